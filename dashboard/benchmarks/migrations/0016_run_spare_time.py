from django.db import migrations, models

from dashboard.benchmarks.migration_operations import AddRunColumnInPlace


class Migration(migrations.Migration):
    dependencies = [
        ("benchmarks", "0015_suite_created_at"),
    ]

    operations = [
        AddRunColumnInPlace(
            model_name="run",
            name="spare_time",
            field=models.BooleanField(
                default=False,
                help_text="Queued beyond its suite's daily budget: taken only when no new commit waits",
            ),
            column_sql="spare_time bool NOT NULL DEFAULT 0",
        ),
    ]

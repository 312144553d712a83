"""DetectionSetting moves to the benchmarks app (compare judges changes by it as detection does); its
table, rows and constraints stay where they are."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("regressions", "0007_alertgroup_follows"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="DetectionSetting")],
            database_operations=[],
        ),
    ]

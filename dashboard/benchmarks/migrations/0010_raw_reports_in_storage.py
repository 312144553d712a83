"""Raw reports leave the run table for the report storage (files or an S3-compatible bucket).

Moved in batches by primary key, each report's gzip written as it is; backwards, each is read into the
table again and its file removed. The keys are those of dashboard.benchmarks.report_storage, written out
here so that this migration keeps working whatever that module becomes.
"""

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import migrations, models

from dashboard.benchmarks.migration_operations import AddRunColumnInPlace

BATCH = 200


def _key(run_id: int) -> str:
    return f"reports/{run_id // 1000}/run-{run_id}.json.gz"


def reports_to_storage(apps, schema_editor) -> None:
    run_model = apps.get_model("benchmarks", "Run")
    last = 0
    while batch := list(
        run_model.objects.filter(pk__gt=last, report_gz__isnull=False)
        .order_by("pk")
        .values_list("pk", "report_gz")[:BATCH]
    ):
        for run_id, stored in batch:
            key = default_storage.save(_key(run_id), ContentFile(bytes(stored)))
            run_model.objects.filter(pk=run_id).update(report_key=key, report_gz=None)
        last = batch[-1][0]


def reports_to_table(apps, schema_editor) -> None:
    run_model = apps.get_model("benchmarks", "Run")
    last = 0
    while batch := list(
        run_model.objects.filter(pk__gt=last)
        .exclude(report_key="")
        .order_by("pk")
        .values_list("pk", "report_key")[:BATCH]
    ):
        for run_id, key in batch:
            with default_storage.open(key, "rb") as stored:
                run_model.objects.filter(pk=run_id).update(report_gz=stored.read(), report_key="")
            default_storage.delete(key)
        last = batch[-1][0]


class Migration(migrations.Migration):
    dependencies = [("benchmarks", "0009_duplicate_indexes_dropped_main_order_indexed")]

    operations = [
        AddRunColumnInPlace(
            model_name="run",
            name="report_key",
            field=models.CharField(
                blank=True,
                editable=False,
                help_text="The raw report's gzip in the report storage",
                max_length=200,
            ),
            column_sql="report_key varchar(200) NOT NULL DEFAULT ''",
        ),
        migrations.RunPython(reports_to_storage, reports_to_table),
        migrations.RemoveField(model_name="run", name="report_gz"),
    ]

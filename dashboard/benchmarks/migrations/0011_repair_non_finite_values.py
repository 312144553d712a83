"""Remove what the runner API stored before its bodies were typed: non-finite measurements, and accuracy
scores that are not finite or not possible (a score outside 0-100 %, more correct answers than samples),
with the accuracy measurement each one made. Such a row can only be wrong; its run keeps the rest."""

import math

import django.db.models.manager
from django.db import migrations
from django.db.models import F, Q

# In PostgreSQL NaN sorts above every number, so `>= Infinity` also finds NaN.
NOT_FINITE = Q(value__gte=math.inf) | Q(value__lte=-math.inf)


def _not_finite(field: str) -> Q:
    return Q(**{f"{field}__gte": math.inf}) | Q(**{f"{field}__lte": -math.inf})


IMPOSSIBLE_SCORE = (
    _not_finite("correct")
    | _not_finite("score_pct")
    | _not_finite("ci_low_pct")
    | _not_finite("ci_high_pct")
    | Q(score_pct__lt=0)
    | Q(score_pct__gt=100)
    | Q(ci_low_pct__lt=0)
    | Q(ci_high_pct__gt=100)
    | Q(ci_low_pct__gt=F("ci_high_pct"))
    | Q(correct__lt=0)
    | Q(correct__gt=F("samples"))
)


def repair(apps, schema_editor):
    measurement = apps.get_model("benchmarks", "Measurement")
    accuracy_score = apps.get_model("benchmarks", "AccuracyScore")
    for run_id, name in accuracy_score.objects.filter(IMPOSSIBLE_SCORE).values_list("run_id", "name"):
        measurement.stored.filter(
            run_id=run_id, series__metric=f"accuracy_{name}", series__concurrency=0
        ).delete()
    accuracy_score.objects.filter(IMPOSSIBLE_SCORE).delete()
    measurement.stored.filter(NOT_FINITE).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("benchmarks", "0010_raw_reports_in_storage"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="measurement",
            options={"base_manager_name": "stored"},
        ),
        migrations.AlterModelManagers(
            name="measurement",
            managers=[
                ("objects", django.db.models.manager.Manager()),
                ("stored", django.db.models.manager.Manager()),
            ],
        ),
        migrations.RunPython(repair, migrations.RunPython.noop),
    ]

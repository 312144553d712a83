"""Writes: a run's load curve, its capacity under the suite's objectives, and its accuracy scores.

Capacity is stored as ordinary measurements (series at WHOLE_RUN), so timelines, detection, alerts and
compare treat it like any metric; it is always derived from the stored load levels, so a changed
objective re-derives it for every run without running anything again.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction

from dashboard.benchmarks.models import (
    WHOLE_RUN,
    AccuracyScore,
    LoadLevel,
    Measurement,
    Run,
    RunStatus,
    Series,
    Suite,
)
from runners.accuracy import AccuracyResult
from runners.capacity import Capacity, CurvePoint, capacity_derive
from runners.guidellm_report import GuidellmReport
from runners.suites import ObjectiveSpec

CAPACITY_METRICS: tuple[str, ...] = ("capacity_req_s", "capacity_output_tok_s", "goodput_at_capacity_req_s")


def suite_objectives(*, suite: Suite) -> tuple[ObjectiveSpec, ...]:
    """The latency objectives a suite declares (none for a suite created by a report's ingest)."""
    return tuple(
        ObjectiveSpec.model_validate(item) for item in (suite.benchmark_settings or {}).get("objectives", ())
    )


def _whole_run_series(*, run: Run, metric: str) -> Series:
    series, _ = Series.objects.get_or_create(
        suite_id=run.suite_id, hardware_class=run.hardware_class, concurrency=WHOLE_RUN, metric=metric
    )
    return series


def _whole_run_value_set(*, run: Run, metric: str, value: float) -> None:
    Measurement.stored.update_or_create(
        run=run,
        series=_whole_run_series(run=run, metric=metric),
        defaults={"commit_id": run.commit_id, "value": value},
    )


def curve_points(levels: Sequence[LoadLevel]) -> list[CurvePoint]:
    return [CurvePoint(label=level.label, metrics=level.metrics) for level in levels]


def run_capacity_store(*, run: Run, objectives: Sequence[ObjectiveSpec]) -> Capacity | None:
    """Derive the run's capacity from its stored levels and store it as its capacity measurements;
    metrics it no longer has (no objectives, no goodput) are removed."""
    capacity = capacity_derive(curve=curve_points(list(run.load_levels.all())), objectives=objectives)
    values = capacity.measurements() if capacity else {}
    for metric, value in values.items():
        _whole_run_value_set(run=run, metric=metric, value=value)
    Measurement.objects.filter(
        run=run, series__concurrency=WHOLE_RUN, series__metric__in=CAPACITY_METRICS
    ).exclude(series__metric__in=values).delete()
    return capacity


def load_curve_store(*, run: Run, report: GuidellmReport) -> int:
    """Store every level of the report's load curve and the capacity it gives; return the number of
    capacity measurements stored."""
    LoadLevel.objects.bulk_create(
        [
            LoadLevel(
                run=run,
                index=index,
                label=level.label,
                strategy=level.strategy,
                streams=level.streams,
                rate=level.rate,
                metrics=dict(level.metrics),
            )
            for index, level in enumerate(report.curve)
        ],
        ignore_conflicts=True,
    )
    capacity = run_capacity_store(run=run, objectives=suite_objectives(suite=run.suite))
    return len(capacity.measurements()) if capacity else 0


def accuracy_store(*, run: Run, accuracy: AccuracyResult) -> None:
    """Store an accuracy score: the `accuracy_<name>` measurement (%) and its samples and interval."""
    AccuracyScore.objects.update_or_create(
        run=run,
        name=accuracy.name,
        defaults={
            "correct": accuracy.correct,
            "samples": accuracy.samples,
            "score_pct": accuracy.score_pct,
            "ci_low_pct": accuracy.ci_low_pct,
            "ci_high_pct": accuracy.ci_high_pct,
        },
    )
    _whole_run_value_set(run=run, metric=accuracy.metric, value=accuracy.score_pct)


def suite_capacity_recompute(*, suite: Suite) -> int:
    """Re-derive the capacity of every succeeded run of `suite` under its current objectives; return how
    many runs have a load curve."""
    objectives = suite_objectives(suite=suite)
    runs = (
        Run.objects.filter(suite=suite, status=RunStatus.SUCCEEDED, load_levels__isnull=False)
        .distinct()
        .prefetch_related("load_levels")
    )
    count = 0
    with transaction.atomic():
        for run in runs:
            run_capacity_store(run=run, objectives=objectives)
            count += 1
    return count

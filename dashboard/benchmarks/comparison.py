"""Reads: two commits (or release tags) side by side, per concurrency and headline metric."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from dashboard.benchmarks.compare import CompareRow, MetricColumn, compare_rows
from dashboard.benchmarks.metrics import metric_display
from dashboard.benchmarks.models import (
    HEADLINE_METRICS,
    Commit,
    DetectionSetting,
    Measurement,
    RunStatus,
    Suite,
)
from dashboard.benchmarks.selectors import commit_get, series_noise
from dashboard.benchmarks.statistics import ChangeEstimate, NoiseEstimate, change_estimate
from dashboard.benchmarks.thresholds import threshold_resolve, thresholds_for_suites

# The columns of DESIGN.md's table first (throughput, mean latency, mean TTFT), then ITL and TPOT.
_DESIGN_COLUMNS = ("output_throughput_tok_s", "latency_s_mean", "ttft_ms_mean")


COMPARE_METRICS: tuple[str, ...] = _DESIGN_COLUMNS + tuple(
    m for m in HEADLINE_METRICS if m not in _DESIGN_COLUMNS
)


class ComparisonInvalid(ValueError):
    """The comparison cannot be made (unknown suite or commit, nothing measured); the message says why."""


@dataclass(frozen=True)
class Comparison:
    suite: Suite
    hardware_class: str
    base: Commit
    head: Commit
    rows: tuple[CompareRow, ...]


def commit_resolve(*, ref: str) -> Commit:
    """A release tag's commit, or a commit by full sha or unique prefix."""
    ref = ref.strip()
    if not ref:
        raise ComparisonInvalid("a commit sha or a tag is needed on both sides")
    # Tags are the GitHub app's rows; a commit reaches them by its reverse relation.
    tagged = Commit.objects.select_related("repository").filter(tags__name=ref).first()
    if tagged is not None:
        return tagged
    commit = commit_get(sha=ref)
    if commit is None:
        raise ComparisonInvalid(
            f"{ref!r} is neither a known tag nor a known commit (or its prefix is ambiguous)"
        )
    return commit


def commit_suite_runs(
    *, commit: Commit, suite: Suite, hardware_class: str
) -> dict[tuple[int, str], list[float]]:
    """Every run's headline values of ``suite`` on ``hardware_class`` at ``commit``."""
    samples: dict[tuple[int, str], list[float]] = defaultdict(list)
    for concurrency, metric, value in Measurement.objects.filter(
        commit=commit,
        run__status=RunStatus.SUCCEEDED,
        series__suite=suite,
        series__hardware_class=hardware_class,
        series__metric__in=HEADLINE_METRICS,
    ).values_list("series__concurrency", "series__metric", "value"):
        samples[(concurrency, metric)].append(value)
    return samples


@dataclass(frozen=True)
class ScopeStatistics:
    """What judging a change on one suite and hardware class needs: each series' run-to-run noise, keyed
    (concurrency, metric), and the suite's detection settings: a change matters on a page exactly when it
    would for detection (`thresholds.threshold_resolve`)."""

    noise: dict[tuple[int, str], NoiseEstimate]
    suite_id: int = 0
    settings: tuple[DetectionSetting, ...] = ()
    # Each metric's minimum change, resolved on first use: a tracking page judges thousands of changes
    # of a few metrics.
    _min_changes: dict[str, float] = field(default_factory=dict, compare=False, repr=False)

    def change(
        self, *, concurrency: int, metric: str, before: Sequence[float], after: Sequence[float]
    ) -> ChangeEstimate:
        minimum = self._min_changes.get(metric)
        if minimum is None:
            minimum = threshold_resolve(
                metric=metric, suite_id=self.suite_id, rows=self.settings
            ).min_relative_change
            self._min_changes[metric] = minimum
        return change_estimate(
            before=before,
            after=after,
            noise=self.noise.get((concurrency, metric)),
            min_relative_change=minimum,
        )


def scope_statistics(*, suite: Suite, hardware_class: str) -> ScopeStatistics:
    """Three queries."""
    return ScopeStatistics(
        noise=series_noise(suite_id=suite.pk, hardware_class=hardware_class),
        suite_id=suite.pk,
        settings=tuple(thresholds_for_suites([suite])[suite.pk]),
    )


def comparison_get(
    *, base_ref: str, head_ref: str, suite_name: str, hardware_class: str | None
) -> Comparison:
    """``suite`` at ``base_ref`` against ``head_ref`` (tags or shas), per concurrency and headline metric."""
    suite = Suite.objects.filter(name=suite_name).first()
    if suite is None:
        raise ComparisonInvalid(f"no suite named {suite_name!r}")
    hardware_class = hardware_class or suite.hardware_class
    base, head = commit_resolve(ref=base_ref), commit_resolve(ref=head_ref)
    sides = {}
    for side, commit in (("base", base), ("head", head)):
        sides[side] = commit_suite_runs(commit=commit, suite=suite, hardware_class=hardware_class)
        if not sides[side]:
            raise ComparisonInvalid(
                f"{commit.short_sha} ({side}) has no succeeded run of {suite.name} on {hardware_class}"
            )
    statistics = scope_statistics(suite=suite, hardware_class=hardware_class)
    rows = compare_rows(
        base=sides["base"], head=sides["head"], metrics=COMPARE_METRICS, estimate=statistics.change
    )
    return Comparison(suite=suite, hardware_class=hardware_class, base=base, head=head, rows=tuple(rows))


def metric_columns() -> list[MetricColumn]:
    """The headline metrics as compare columns: DESIGN.md's headings and the dashboard's precision."""
    columns = []
    for metric in COMPARE_METRICS:
        display = metric_display(metric=metric)
        heading = f"{display.short_label} {display.unit}".strip()
        columns.append(MetricColumn(metric=metric, heading=heading, decimals=display.decimals))
    return columns

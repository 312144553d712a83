"""Writes: alerts found by change-point detection over stored series.

Detection is incremental: a new run is analysed in a window of at most `PERFWATCH_DETECTION_WINDOW`
benchmarked points around its commit, so the cost of a new point does not grow with the history. A
series is analysed under a row lock on that series, and alerts and groups are upserts behind unique
constraints, so concurrent or repeated detection never duplicates an alert.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from dashboard.benchmarks.models import Commit, Measurement, Run, RunStatus, Series
from dashboard.regressions.alert_groups import alert_upsert
from dashboard.regressions.bisection import group_bisect, groups_around
from dashboard.regressions.detection import change_point_kind, change_points_detect
from dashboard.regressions.models import Alert, AlertGroup, DetectionSetting, GroupState, TriageEvent
from dashboard.regressions.notifications import notifications_schedule
from dashboard.regressions.selectors import (
    CommitWindow,
    SeriesPoint,
    SeriesWindow,
    WindowCommit,
    commit_window,
    series_points,
)
from dashboard.regressions.thresholds import Threshold, threshold_resolve, thresholds_for_suite

logger = logging.getLogger(__name__)


# A change this close to a window edge that is not the series' own end is seen with too little context
# on one side; the window that has it nearer its middle decides about it.
EDGE_MARGIN = 20


# A change found within this many benchmarked points of an alert of the same kind on the same series is
# that alert seen again with more (or other) data, not a second change.
SAME_CHANGE_POINTS = 2


@dataclass(frozen=True)
class DetectionOutcome:
    series_analysed: int
    alerts_created: int
    group_ids: frozenset[int]

    def __add__(self, other: DetectionOutcome) -> DetectionOutcome:
        return DetectionOutcome(
            series_analysed=self.series_analysed + other.series_analysed,
            alerts_created=self.alerts_created + other.alerts_created,
            group_ids=self.group_ids | other.group_ids,
        )


NOTHING = DetectionOutcome(series_analysed=0, alerts_created=0, group_ids=frozenset())


@dataclass(frozen=True)
class _KnownAlert:
    group_id: int
    kind: str
    base_commit_id: int
    head_commit_id: int
    base_position: int | None
    head_position: int | None

    def same_change(
        self, *, kind: str, base: SeriesPoint, head: SeriesPoint, index_of: dict[int, int]
    ) -> bool:
        """Whether a change found now is this alert seen again with other commits benchmarked."""
        if kind != self.kind or (self.base_commit_id, self.head_commit_id) == (
            base.commit_id,
            head.commit_id,
        ):
            return False
        if (
            self.base_position is not None
            and self.head_position is not None
            and base.position is not None
            and head.position is not None
            # Ranges (base, head] that share a commit are one gap, split or not by a run in between.
            and max(self.base_position, base.position) < min(self.head_position, head.position)
        ):
            return True
        index = index_of.get(self.head_commit_id)
        return index is not None and abs(index - index_of[head.commit_id]) <= SAME_CHANGE_POINTS

    def narrowed_by(self, *, base: SeriesPoint, head: SeriesPoint) -> bool:
        """Whether (base, head] lies inside this alert's range and is shorter: a point measured inside it."""
        if None in (self.base_position, self.head_position, base.position, head.position):
            return False
        return (
            self.base_position <= base.position  # type: ignore[operator]
            and head.position <= self.head_position  # type: ignore[operator]
            and (base.commit_id, head.commit_id) != (self.base_commit_id, self.head_commit_id)
        )


def _group_narrow(*, known: _KnownAlert, base: SeriesPoint, head: SeriesPoint) -> bool:
    """Give the group of `known` the narrower range (base, head], keeping its triage and notifications.

    The group itself moves rather than its alerts, so nothing is announced twice. When another group
    already holds that range, the ranges stay as they are: merging two triaged groups is a person's call.
    A confirmed group is narrowed by its bisection runs and their repeats (`verdicts`), not by one run.
    """
    if AlertGroup.objects.filter(base_commit_id=base.commit_id, head_commit_id=head.commit_id).exists():
        return False
    try:
        with transaction.atomic():
            narrowed = AlertGroup.objects.filter(
                pk=known.group_id,
                base_commit_id=known.base_commit_id,
                head_commit_id=known.head_commit_id,
                state=GroupState.SUSPECTED,
            ).update(base_commit_id=base.commit_id, head_commit_id=head.commit_id, updated_at=timezone.now())
    except IntegrityError:
        return False  # a concurrent detection gave that range to another group first
    if narrowed:
        ends = (known.base_commit_id, known.head_commit_id, base.commit_id, head.commit_id)
        sha = dict(Commit.objects.filter(pk__in=ends).values_list("pk", "sha"))
        TriageEvent.objects.create(
            group_id=known.group_id,
            field="range",
            old_value=f"{sha[known.base_commit_id][:8]}..{sha[known.head_commit_id][:8]}",
            new_value=f"{sha[base.commit_id][:8]}..{sha[head.commit_id][:8]}",
        )
    return bool(narrowed)


def _window_analyse(*, series: Series, window: SeriesWindow, threshold: Threshold) -> DetectionOutcome:
    points = window.points
    changes = change_points_detect(
        values=[point.value for point in points],
        min_relative_change=threshold.min_relative_change,
        p_threshold=threshold.p_threshold,
    )
    if not changes:
        return DetectionOutcome(series_analysed=1, alerts_created=0, group_ids=frozenset())
    index_of = {point.commit_id: index for index, point in enumerate(points)}
    known = [
        _KnownAlert(*row)
        for row in Alert.objects.filter(series=series).values_list(
            "group_id",
            "kind",
            "group__base_commit_id",
            "group__head_commit_id",
            "group__base_commit__position",
            "group__head_commit__position",
        )
    ]
    created_count = 0
    group_ids: set[int] = set()
    for change in changes:
        if not window.at_series_start and change.index < EDGE_MARGIN:
            continue
        if not window.at_series_end and change.index > len(points) - EDGE_MARGIN:
            continue
        base, head = points[change.index - 1], points[change.index]
        kind = change_point_kind(change=change, higher_is_better=series.higher_is_better)
        same = [
            alert for alert in known if alert.same_change(kind=kind, base=base, head=head, index_of=index_of)
        ]
        narrowing = next((alert for alert in same if alert.narrowed_by(base=base, head=head)), None)
        if narrowing is None or not _group_narrow(known=narrowing, base=base, head=head):
            if same:
                continue
        else:
            # The alert now sits in the narrowed range: the upsert below refreshes its values there.
            known = [
                replace(
                    alert,
                    base_commit_id=base.commit_id,
                    head_commit_id=head.commit_id,
                    base_position=base.position,
                    head_position=head.position,
                )
                if alert.group_id == narrowing.group_id
                else alert
                for alert in known
            ]
        alert, created = alert_upsert(
            series=series,
            base_commit_id=base.commit_id,
            head_commit_id=head.commit_id,
            kind=kind,
            before=change.before,
            after=change.after,
            change_pct=change.change_pct,
            p_value=change.p_value,
        )
        created_count += created
        group_ids.add(alert.group_id)
        if created:
            known.append(
                _KnownAlert(
                    alert.group_id, kind, base.commit_id, head.commit_id, base.position, head.position
                )
            )
    return DetectionOutcome(series_analysed=1, alerts_created=created_count, group_ids=frozenset(group_ids))


def series_lock() -> QuerySet[Series]:
    """Series locked so that detections of one series run one after the other.

    FOR NO KEY UPDATE, not FOR UPDATE: an ingest's deferred foreign-key checks of its new measurements
    take FOR KEY SHARE on their series at COMMIT, in the order it inserted them. FOR UPDATE conflicts
    with those and an ingest could deadlock against a detection that locks in id order; FOR NO KEY UPDATE
    does not conflict with them, and still excludes a second detection.
    """
    return Series.objects.select_for_update(no_key=True)


def series_detect(*, series_ids: Sequence[int], commit_id: int | None = None) -> DetectionOutcome:
    """Detect changes in these series in the window around `commit_id` (the trailing one without it).

    One transaction holds the row locks of all the series, taken in id order: detection of a suite's
    series is serialised, so a second worker sees the first one's alerts and refreshes them instead of
    creating them again; and every series is analysed over the same commits, read once under the locks.
    """
    outcome = NOTHING
    with transaction.atomic():
        locked = list(series_lock().filter(pk__in=series_ids).order_by("pk"))
        windows: dict[tuple[int, str], CommitWindow] = {}
        settings_rows: dict[int, list[DetectionSetting]] = {}
        for series in locked:
            if series.suite_id not in settings_rows:
                settings_rows[series.suite_id] = thresholds_for_suite(series.suite_id)
            threshold = threshold_resolve(
                metric=series.metric, suite_id=series.suite_id, rows=settings_rows[series.suite_id]
            )
            if not threshold.enabled:
                continue
            key = (series.suite_id, series.hardware_class)
            if key not in windows:
                windows[key] = commit_window(
                    suite_id=series.suite_id, hardware_class=series.hardware_class, commit_id=commit_id
                )
            window = windows[key]
            points = series_points(series_id=series.pk, commits=window.commits)
            outcome += _window_analyse(
                series=series,
                window=SeriesWindow(
                    points=tuple(points), at_series_start=window.at_start, at_series_end=window.at_end
                ),
                threshold=threshold,
            )
    return outcome


def series_detect_history(
    *, series_id: int, commits: Sequence[WindowCommit] | None = None
) -> DetectionOutcome:
    """Detect changes over the whole history of a series, in overlapping windows (backfill)."""
    with transaction.atomic():
        series = series_lock().filter(pk=series_id).first()
        if series is None:
            return NOTHING
        threshold = threshold_resolve(
            metric=series.metric, suite_id=series.suite_id, rows=thresholds_for_suite(series.suite_id)
        )
        if not threshold.enabled:
            return NOTHING
        if commits is None:
            commits = _all_commits(suite_id=series.suite_id, hardware_class=series.hardware_class)
        points = series_points(series_id=series_id, commits=commits)
        size = settings.PERFWATCH_DETECTION_WINDOW
        # Windows overlap by half, so every point lies at least a quarter window from an inner edge in one.
        stride = max(size // 2, 2 * EDGE_MARGIN)
        starts = list(range(0, max(len(points) - size, 0) + 1, stride))
        if starts[-1] + size < len(points):
            starts.append(len(points) - size)
        outcome = NOTHING
        for start in starts:
            window = SeriesWindow(
                points=tuple(points[start : start + size]),
                at_series_start=start == 0,
                at_series_end=start + size >= len(points),
            )
            outcome += _window_analyse(series=series, window=window, threshold=threshold)
        return DetectionOutcome(
            series_analysed=1, alerts_created=outcome.alerts_created, group_ids=outcome.group_ids
        )


def _all_commits(*, suite_id: int, hardware_class: str) -> tuple[WindowCommit, ...]:
    return commit_window(suite_id=suite_id, hardware_class=hardware_class, size=2**31 - 2).commits


def _notify(outcome: DetectionOutcome) -> None:
    """Tell about the confirmed groups among those found; a new group is suspected until its repeats
    (`verdicts`) confirm it."""
    if outcome.group_ids:
        notifications_schedule(group_ids=sorted(outcome.group_ids))


def run_detect(*, run_id: int, notify: bool = True, bisect: bool = True) -> DetectionOutcome:
    """Detect changes in every series a succeeded run touched, around the run's commit; then bisect the
    confirmed groups this run created or measured inside, so a culprit range keeps halving run after run."""
    run = Run.objects.filter(pk=run_id, status=RunStatus.SUCCEEDED).values("commit_id").first()
    if run is None:
        return NOTHING
    series_ids = sorted(set(Measurement.objects.filter(run_id=run_id).values_list("series_id", flat=True)))
    outcome = series_detect(series_ids=series_ids, commit_id=run["commit_id"])
    if notify:
        _notify(outcome)
    if bisect:
        for group_id in sorted(outcome.group_ids | set(groups_around(commit_id=run["commit_id"]))):
            group_bisect(group_id=group_id)
    return outcome


def suite_detect_history(
    *, suite_name: str | None = None, hardware_class: str | None = None, notify: bool = False
) -> DetectionOutcome:
    """Detect changes over the whole history of every series (of a suite / hardware class)."""
    series = Series.objects.all()
    if suite_name:
        series = series.filter(suite__name=suite_name)
    if hardware_class:
        series = series.filter(hardware_class=hardware_class)
    outcome = NOTHING
    commits: dict[tuple[int, str], tuple[WindowCommit, ...]] = {}
    for series_id, suite_id, series_hardware in series.order_by("pk").values_list(
        "pk", "suite_id", "hardware_class"
    ):
        key = (suite_id, series_hardware)
        if key not in commits:
            commits[key] = _all_commits(suite_id=suite_id, hardware_class=series_hardware)
        outcome += series_detect_history(series_id=series_id, commits=commits[key])
    if notify:
        _notify(outcome)
    return outcome


def runs_detect_recent(*, since: datetime) -> DetectionOutcome:
    """Safety net for lost messages: the trailing window of every series with a run finished since."""
    pairs = (
        Run.objects.succeeded()
        .filter(finished_at__gte=since)
        .values_list("suite_id", "hardware_class")
        .distinct()
    )
    outcome = NOTHING
    for suite_id, hardware_class in pairs:
        series_ids = Series.objects.filter(suite_id=suite_id, hardware_class=hardware_class).values_list(
            "pk", flat=True
        )
        outcome += series_detect(series_ids=list(series_ids))
    _notify(outcome)
    return outcome

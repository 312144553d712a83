"""Writes: alert groups for the changes located jointly over the series of a suite and hardware class.

Longer than 500 lines: locating changes, matching them to the known groups and storing them are the
steps of one transaction under the series' locks, and read best side by side.

Detection is incremental: a new run is analysed in a window of at most `PERFWATCH_DETECTION_WINDOW`
benchmarked points around its commit, so the cost of a new point does not grow with the history. The
series of a suite and hardware class are analysed together under their row locks, and alerts and groups
are upserts behind unique constraints, so concurrent or repeated detection never duplicates an alert.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import cast

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from dashboard.benchmarks.direction import change_kind, metric_slower_sign
from dashboard.benchmarks.models import Commit, Measurement, Run, RunStatus, Series
from dashboard.regressions.detect.alert_groups import AlertValues, alerts_store, group_reopen
from dashboard.regressions.detect.attribution import (
    LocatedChange,
    SeriesHistory,
    changes_and_outliers_locate,
)
from dashboard.regressions.detect.thresholds import Threshold, threshold_resolve, thresholds_for_suite
from dashboard.regressions.detect.windows import (
    CommitWindow,
    WindowCommit,
    WindowValues,
    commit_window,
    window_values,
)
from dashboard.regressions.models import (
    Alert,
    AlertGroup,
    AlertKind,
    DetectionSetting,
    GroupKind,
    GroupState,
    TriageEvent,
)

logger = logging.getLogger(__name__)


# A change this close to a window edge that is not the series' own end is seen with too little context
# on one side; the window that has it nearer its middle decides about it.
EDGE_MARGIN = 20


# A change located within this many benchmarked points of a group of the same suite and hardware class,
# where this analysis locates nothing else, is that group's change seen again with other data (a point
# more on one side moves a weak step by one or two), not a second change: when it moved a series that
# the group holds. Changes of other metrics at ranges that do not overlap are two changes (a TTFT
# regression one commit after a throughput one was folded into it and never looked for again).
SAME_CHANGE_POINTS = 2


# An outlier point this close (in benchmarked points) to the run just analysed is reported for more runs.
OUTLIER_REACH = 2


@dataclass(frozen=True)
class OutlierPoint:
    """A commit whose few runs fit neither side in some series of a suite and hardware class."""

    commit_id: int
    suite_id: int
    hardware_class: str


@dataclass(frozen=True)
class DetectionOutcome:
    series_analysed: int
    alerts_created: int
    group_ids: frozenset[int]
    # Outlier points beside the commit the analysis was run for: the sheriff runs their commits again.
    outliers: frozenset[OutlierPoint] = frozenset()

    def __add__(self, other: DetectionOutcome) -> DetectionOutcome:
        return DetectionOutcome(
            series_analysed=self.series_analysed + other.series_analysed,
            alerts_created=self.alerts_created + other.alerts_created,
            group_ids=self.group_ids | other.group_ids,
            outliers=self.outliers | other.outliers,
        )


NOTHING = DetectionOutcome(series_analysed=0, alerts_created=0, group_ids=frozenset())


@dataclass(frozen=True)
class _KnownGroup:
    """A group that already holds alerts of the suite and hardware class being analysed."""

    group_id: int
    base_commit_id: int
    head_commit_id: int
    base_position: int | None
    head_position: int | None
    state: str = GroupState.SUSPECTED
    series_ids: frozenset[int] = frozenset()  # the series it holds alerts of

    @property
    def closed(self) -> bool:
        """A dismissed group takes no alerts: a change near it is a new one."""
        return self.state == GroupState.DISMISSED

    def overlaps(self, *, base: WindowCommit, head: WindowCommit) -> bool:
        """Whether the ranges (base, head] share a commit: one change, split or not by runs in between."""
        return (
            self.base_position is not None
            and self.head_position is not None
            and base.position is not None
            and head.position is not None
            and max(self.base_position, base.position) < min(self.head_position, head.position)
        )

    def near(self, *, head: WindowCommit, index_of: dict[int, int]) -> bool:
        """Whether a change ending at `head` lies within SAME_CHANGE_POINTS benchmarked points of this one."""
        index = index_of.get(self.head_commit_id)
        return index is not None and abs(index - index_of[head.commit_id]) <= SAME_CHANGE_POINTS

    @property
    def width(self) -> float:
        if self.base_position is None or self.head_position is None:
            return float("inf")
        return float(self.head_position - self.base_position)

    def narrowed_by(self, *, base: WindowCommit, head: WindowCommit) -> bool:
        """Whether (base, head] lies inside this group's range and is shorter: points measured inside it."""
        if None in (self.base_position, self.head_position, base.position, head.position):
            return False
        return (
            self.base_position <= base.position  # type: ignore[operator]
            and head.position <= self.head_position  # type: ignore[operator]
            and (base.commit_id, head.commit_id) != (self.base_commit_id, self.head_commit_id)
        )


def _same_group(
    *,
    known: Sequence[_KnownGroup],
    claimed: set[int],
    located: Sequence[tuple[WindowCommit, WindowCommit]],
    base: WindowCommit,
    head: WindowCommit,
    index_of: dict[int, int],
    moved: frozenset[int],
) -> _KnownGroup | None:
    """The open group that a change located at (base, head], moving the series `moved`, belongs to, if
    any.

    First the narrowest group whose range overlaps it; else a group a point or two away that holds one of
    its series and that no change of this analysis overlaps (the same change, placed one or two points
    apart by other data). Each group is taken by one change of an analysis: a second change in its range
    is a second change. A dismissed group is never the answer.
    """
    open_groups = [group for group in known if not group.closed and group.group_id not in claimed]
    overlapping = [group for group in open_groups if group.overlaps(base=base, head=head)]
    if overlapping:
        return min(overlapping, key=lambda group: (group.width, group.group_id))
    return next(
        (
            group
            for group in open_groups
            if group.near(head=head, index_of=index_of)
            and group.series_ids & moved
            and not any(
                group.overlaps(base=other_base, head=other_head) for other_base, other_head in located
            )
        ),
        None,
    )


def _dismissed_near(
    *, known: Sequence[_KnownGroup], base: WindowCommit, head: WindowCommit, index_of: dict[int, int]
) -> _KnownGroup | None:
    """A dismissed group at or next to (base, head]: the new group that opens there links it."""
    return next(
        (
            group
            for group in known
            if group.closed
            and (group.overlaps(base=base, head=head) or group.near(head=head, index_of=index_of))
        ),
        None,
    )


# A change re-raised on a dismissed group's series is the same one when it is at most this many times the
# dismissed alert's size; a larger one is news.
DISMISSED_AGAIN_RATIO = 2.0


def _dismissed_alerts(known: Sequence[_KnownGroup]) -> dict[int, dict[int, float]]:
    """The change of every alert of the dismissed groups among `known`, by group and series: one query."""
    closed = [group.group_id for group in known if group.closed]
    alerts: dict[int, dict[int, float]] = {group_id: {} for group_id in closed}
    if closed:
        for group_id, series_id, change_pct in Alert.objects.filter(group_id__in=closed).values_list(
            "group_id", "series_id", "change_pct"
        ):
            alerts[group_id][series_id] = change_pct
    return alerts


def _dismissed_again(
    *,
    known: Sequence[_KnownGroup],
    dismissed: dict[int, dict[int, float]],
    change: LocatedChange,
    base: WindowCommit,
    head: WindowCommit,
) -> bool:
    """Whether a change located at (base, head] is a dismissed group's change seen again: its range
    overlaps the dismissed one and starts or ends at the same commit, and every series it moved moved in
    the dismissed group too, the same way and not much more. Newer runs move the far end of a range that
    holds unbenchmarked commits, and each new range used to open a new suspected group, verified again:
    a change of noise raised six times was tested six times and, once, confirmed."""
    for group in known:
        if not group.closed or not group.overlaps(base=base, head=head):
            continue
        if group.base_commit_id != base.commit_id and group.head_commit_id != head.commit_id:
            continue
        seen = dismissed.get(group.group_id, {})
        if change.changes and all(
            (before := seen.get(int(cast(int, item.key)))) is not None
            and before * item.change_pct > 0
            and abs(item.change_pct) <= DISMISSED_AGAIN_RATIO * abs(before)
            for item in change.changes
        ):
            return True
    return False


def _group_narrow(*, known: _KnownGroup, base: WindowCommit, head: WindowCommit) -> bool:
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


def _range_reason(*, change: LocatedChange, commits: Sequence[WindowCommit]) -> str:
    """Why a located change's range holds more than one commit, in words for its group page."""
    base, head = commits[change.first - 1], commits[change.last]
    reasons: list[str] = []
    if change.outliers:
        shas = Commit.objects.in_bulk([commits[index].commit_id for index in change.outliers])
        names = ", ".join(shas[commits[index].commit_id].short_sha for index in change.outliers)
        reasons.append(
            f"The run at {names} fits neither side of the change (an outlier run) and was left out, so its "
            "commit may be on either side: the range keeps it."
            if len(change.outliers) == 1
            else f"The runs at {names} fit neither side of the change (outlier runs) and were left out, so "
            "their commits may be on either side: the range keeps them."
        )
    if change.ambiguous:
        reasons.append(
            "Benchmarked commits inside the range fit both sides of the change about equally well: one "
            "run per commit cannot place it more precisely."
        )
    if base.position is not None and head.position is not None:
        unbenchmarked = head.position - base.position - (change.last - change.first + 1)
        if unbenchmarked > 0:
            reasons.append(
                f"{unbenchmarked} commit{'s' if unbenchmarked > 1 else ''} in the range "
                f"{'were' if unbenchmarked > 1 else 'was'} not benchmarked."
            )
    return " ".join(reasons)


def _history_build(
    *,
    series: Sequence[Series],
    thresholds: dict[int, Threshold],
    values: dict[int, WindowValues],
    part: slice,
) -> list[SeriesHistory]:
    return [
        SeriesHistory(
            key=item.pk,
            values=values[item.pk].values[part],
            runs=values[item.pk].runs[part],
            min_relative_change=thresholds[item.pk].min_relative_change,
            p_threshold=thresholds[item.pk].p_threshold,
            slower=metric_slower_sign(item.metric),
        )
        for item in series
    ]


def _window_analyse(
    *,
    series: Sequence[Series],
    thresholds: dict[int, Threshold],
    window: CommitWindow,
    values: dict[int, WindowValues],
    part: slice = slice(None),
    around_commit_id: int | None = None,
) -> DetectionOutcome:
    """Locate the changes of one suite and hardware class jointly over every enabled series of it, in
    one commit window, and store each as one group with an alert per series that moved. `values[part]`
    are the series' values at the window's commits. With `around_commit_id`, the outlier points within
    OUTLIER_REACH points of that commit are reported too."""
    commits = window.commits
    located, outlier_indices = changes_and_outliers_locate(
        series=_history_build(series=series, thresholds=thresholds, values=values, part=part)
    )
    outliers: frozenset[OutlierPoint] = frozenset()
    around = next(
        (index for index, commit in enumerate(commits) if commit.commit_id == around_commit_id), None
    )
    if around is not None and series:
        outliers = frozenset(
            OutlierPoint(commits[index].commit_id, series[0].suite_id, series[0].hardware_class)
            for index in outlier_indices
            if abs(index - around) <= OUTLIER_REACH
        )
    analysed = DetectionOutcome(
        series_analysed=len(series), alerts_created=0, group_ids=frozenset(), outliers=outliers
    )
    if not located:
        return analysed
    by_id = {item.pk: item for item in series}
    index_of = {commit.commit_id: index for index, commit in enumerate(commits)}
    # One query: every group holding alerts of these series, with the series it holds.
    rows: dict[int, tuple[int, int, int | None, int | None, str]] = {}
    held: dict[int, set[int]] = defaultdict(set)
    for group_id, series_id, *row in Alert.objects.filter(series__in=series).values_list(
        "group_id",
        "series_id",
        "group__base_commit_id",
        "group__head_commit_id",
        "group__base_commit__position",
        "group__head_commit__position",
        "group__state",
    ):
        rows[group_id] = cast(tuple[int, int, int | None, int | None, str], tuple(row))
        held[group_id].add(series_id)
    known = [
        _KnownGroup(group_id, *row, series_ids=frozenset(held[group_id]))
        for group_id, row in sorted(rows.items())
    ]
    located_ranges = [(commits[change.first - 1], commits[change.last]) for change in located]
    dismissed_alerts = _dismissed_alerts(known)
    claimed: set[int] = set()
    created_count = 0
    group_ids: set[int] = set()
    for change in located:
        if not window.at_start and change.first < EDGE_MARGIN:
            continue
        if not window.at_end and change.last > len(commits) - EDGE_MARGIN:
            continue
        base, head = commits[change.first - 1], commits[change.last]
        reason = _range_reason(change=change, commits=commits)
        moved_ids = frozenset(int(cast(int, item.key)) for item in change.changes)
        same = _same_group(
            known=known,
            claimed=claimed,
            located=located_ranges,
            base=base,
            head=head,
            index_of=index_of,
            moved=moved_ids,
        )
        if same is None:
            if any(
                group.closed
                and (group.base_commit_id, group.head_commit_id) == (base.commit_id, head.commit_id)
                for group in known
            ):
                continue  # the dismissed change itself, seen again: its verdict stands
            if _dismissed_again(known=known, dismissed=dismissed_alerts, change=change, base=base, head=head):
                continue  # the same, with its other end placed elsewhere by newer runs
            dismissed = _dismissed_near(known=known, base=base, head=head, index_of=index_of)
            group, _ = AlertGroup.objects.get_or_create(
                base_commit_id=base.commit_id,
                head_commit_id=head.commit_id,
                defaults={
                    "kind": GroupKind.REGRESSION,
                    "range_reason": reason,
                    "follows_id": dismissed.group_id if dismissed else None,
                },
            )
            if group.state == GroupState.DISMISSED and not _reopen(group=group, series=series):
                continue
            group_id = group.pk
            known.append(
                _KnownGroup(
                    group_id,
                    base.commit_id,
                    head.commit_id,
                    base.position,
                    head.position,
                    group.state,
                    series_ids=moved_ids,
                )
            )
        else:
            group_id = same.group_id
            if same.narrowed_by(base=base, head=head) and _group_narrow(known=same, base=base, head=head):
                known = [
                    replace(
                        group,
                        base_commit_id=base.commit_id,
                        head_commit_id=head.commit_id,
                        base_position=base.position,
                        head_position=head.position,
                    )
                    if group.group_id == group_id
                    else group
                    for group in known
                ]
                AlertGroup.objects.filter(pk=group_id).update(range_reason=reason)
        claimed.add(group_id)
        moved = [
            (by_id[int(cast(int, series_change.key))], series_change) for series_change in change.changes
        ]
        stored = alerts_store(
            group_id=group_id,
            alerts=[
                (
                    item,
                    AlertValues(
                        kind=_alert_kind(series=item, change_pct=series_change.change_pct),
                        before=series_change.before,
                        after=series_change.after,
                        change_pct=series_change.change_pct,
                        p_value=series_change.p_value,
                    ),
                )
                for item, series_change in moved
            ],
        )
        created_count += sum(created for _, created in stored)
        group_ids.add(group_id)
    return DetectionOutcome(
        series_analysed=len(series),
        alerts_created=created_count,
        group_ids=frozenset(group_ids),
        outliers=outliers,
    )


def _reopen(*, group: AlertGroup, series: Sequence[Series]) -> bool:
    """A change of another suite (or hardware class) at the very range of a dismissed group: one range is
    one group, so that group is suspected again and its verification repeats run on the new series too
    (its own alerts keep their repeats and are judged again on them: the new alarm did not read them).
    Dropping the change instead lost real ones for good: a 6.4x revert was never raised because another
    suite's noise had been dismissed at its commit. Returns whether it reopened; a group a person closed
    stays as it is."""
    if not series:
        return False
    return group_reopen(
        group=group,
        why=f"{series[0].suite.name} · {series[0].hardware_class} changed at this range",
        fresh=False,
    )


def _alert_kind(*, series: Series, change_pct: float) -> str:
    return AlertKind(change_kind(metric=series.metric, change_pct=change_pct))


def series_lock() -> QuerySet[Series]:
    """Series locked so that detections of one series run one after the other.

    FOR NO KEY UPDATE, not FOR UPDATE: an ingest's deferred foreign-key checks of its new measurements
    take FOR KEY SHARE on their series at COMMIT, in the order it inserted them. FOR UPDATE conflicts
    with those and an ingest could deadlock against a detection that locks in id order; FOR NO KEY UPDATE
    does not conflict with them, and still excludes a second detection.
    """
    return Series.objects.select_for_update(no_key=True)


def _enabled_series(*, locked: Sequence[Series]) -> tuple[list[Series], dict[int, Threshold]]:
    """The series detection looks at, with the threshold of each."""
    rows: dict[int, list[DetectionSetting]] = {}
    thresholds: dict[int, Threshold] = {}
    for series in locked:
        if series.suite_id not in rows:
            rows[series.suite_id] = thresholds_for_suite(series.suite_id)
        threshold = threshold_resolve(
            metric=series.metric, suite_id=series.suite_id, rows=rows[series.suite_id]
        )
        if threshold.enabled:
            thresholds[series.pk] = threshold
    return [series for series in locked if series.pk in thresholds], thresholds


def _pairs_lock(pairs: Iterable[tuple[int, str]]) -> dict[tuple[int, str], list[Series]]:
    """Row locks on every series of these (suite, hardware class) pairs, taken in id order."""
    condition = Q(pk__in=[])
    for suite_id, hardware_class in pairs:
        condition |= Q(suite_id=suite_id, hardware_class=hardware_class)
    grouped: dict[tuple[int, str], list[Series]] = {}
    for series in series_lock().filter(condition).order_by("pk"):
        grouped.setdefault((series.suite_id, series.hardware_class), []).append(series)
    return grouped


def series_detect(*, series_ids: Sequence[int], commit_id: int | None = None) -> DetectionOutcome:
    """Detect changes around `commit_id` (the trailing window without it) in the suites and hardware
    classes of these series, over every series of each: a change is located on all of them together.

    One transaction holds the row locks of all those series, taken in id order: detection of a suite's
    series is serialised, so a second worker sees the first one's groups and refreshes them instead of
    creating them again; and every series is analysed over the same commits, read once under the locks.
    """
    pairs = set(Series.objects.filter(pk__in=series_ids).values_list("suite_id", "hardware_class"))
    outcome = NOTHING
    with transaction.atomic():
        for (suite_id, hardware_class), locked in sorted(_pairs_lock(pairs).items()):
            enabled, thresholds = _enabled_series(locked=locked)
            if not enabled:
                continue
            window = commit_window(suite_id=suite_id, hardware_class=hardware_class, commit_id=commit_id)
            values = _values_read(series=enabled, commits=window.commits)
            outcome += _window_analyse(
                series=enabled,
                thresholds=thresholds,
                window=window,
                values=values,
                around_commit_id=commit_id,
            )
    return outcome


def pair_detect_history(*, suite_id: int, hardware_class: str) -> DetectionOutcome:
    """Detect changes over the whole history of a suite on a hardware class, in overlapping windows."""
    with transaction.atomic():
        locked = _pairs_lock([(suite_id, hardware_class)]).get((suite_id, hardware_class), [])
        enabled, thresholds = _enabled_series(locked=locked)
        if not enabled:
            return NOTHING
        commits = _all_commits(suite_id=suite_id, hardware_class=hardware_class)
        size = settings.PERFWATCH_DETECTION_WINDOW
        # Windows overlap by half, so every point lies at least a quarter window from an inner edge in one.
        stride = max(size // 2, 2 * EDGE_MARGIN)
        starts = list(range(0, max(len(commits) - size, 0) + 1, stride))
        if starts[-1] + size < len(commits):
            starts.append(len(commits) - size)
        # Every series is read once, over the whole history; each window analyses its slice of it.
        values = _values_read(series=enabled, commits=commits)
        outcome = NOTHING
        for start in starts:
            window = CommitWindow(
                commits=commits[start : start + size],
                at_start=start == 0,
                at_end=start + size >= len(commits),
            )
            outcome += _window_analyse(
                series=enabled,
                thresholds=thresholds,
                window=window,
                values=values,
                part=slice(start, start + size),
            )
        return DetectionOutcome(
            series_analysed=len(enabled), alerts_created=outcome.alerts_created, group_ids=outcome.group_ids
        )


def _values_read(*, series: Sequence[Series], commits: Sequence[WindowCommit]) -> dict[int, WindowValues]:
    return window_values(series_ids=[item.pk for item in series], commit_ids=[c.commit_id for c in commits])


def _all_commits(*, suite_id: int, hardware_class: str) -> tuple[WindowCommit, ...]:
    return commit_window(suite_id=suite_id, hardware_class=hardware_class, size=2**31 - 2).commits


def run_detect(*, run_id: int) -> DetectionOutcome:
    """Detect changes in every series a succeeded run touched, around the run's commit."""
    run = Run.objects.filter(pk=run_id, status=RunStatus.SUCCEEDED).values("commit_id").first()
    if run is None:
        return NOTHING
    series_ids = sorted(set(Measurement.objects.filter(run_id=run_id).values_list("series_id", flat=True)))
    return series_detect(series_ids=series_ids, commit_id=run["commit_id"])


def suite_detect_history(
    *, suite_name: str | None = None, hardware_class: str | None = None
) -> DetectionOutcome:
    """Detect changes over the whole history of every suite and hardware class (or of one)."""
    series = Series.objects.all()
    if suite_name:
        series = series.filter(suite__name=suite_name)
    if hardware_class:
        series = series.filter(hardware_class=hardware_class)
    outcome = NOTHING
    for suite_id, series_hardware in sorted(set(series.values_list("suite_id", "hardware_class"))):
        outcome += pair_detect_history(suite_id=suite_id, hardware_class=series_hardware)
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
    return outcome

"""Writes: detection of alerts over stored series, and their triage.

Detection is incremental: a new run is analysed in a window of at most `PERFWATCH_DETECTION_WINDOW`
benchmarked points around its commit, so the cost of a new point does not grow with the history. A
series is analysed under a row lock on that series, and alerts and groups are upserts behind unique
constraints, so concurrent or repeated detection never duplicates an alert.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from dashboard.benchmarks.models import (
    Commit,
    Measurement,
    Run,
    RunStatus,
    Series,
    Suite,
)
from dashboard.regressions.detection import change_point_kind, change_points_detect
from dashboard.regressions.models import (
    Alert,
    AlertGroup,
    AlertKind,
    DetectionSetting,
    GroupKind,
    TriageEvent,
    TriageStatus,
)
from dashboard.regressions.notifications import notifications_schedule
from dashboard.regressions.selectors import (
    PENDING_RUN_STATUSES,
    CommitWindow,
    SeriesPoint,
    SeriesWindow,
    WindowCommit,
    commit_window,
    series_points,
)

logger = logging.getLogger(__name__)

# Built-in minimum relative changes by metric prefix; None leaves the metric out of detection. A
# DetectionSetting row overrides them. guidellm's request counts follow from latency and the run's
# length, and an errored request is the run's business, not a performance change.
DEFAULT_THRESHOLDS: tuple[tuple[str, float | None], ...] = (
    ("output_throughput", 0.02),
    ("request_throughput", 0.02),
    ("ttft_", 0.03),
    ("itl_", 0.03),
    ("tpot_", 0.03),
    ("latency_", 0.03),
    ("requests_", None),
)
FALLBACK_MIN_RELATIVE_CHANGE = 0.03
DEFAULT_P_THRESHOLD = 1e-4
# A change this close to a window edge that is not the series' own end is seen with too little context
# on one side; the window that has it nearer its middle decides about it.
EDGE_MARGIN = 20
# A change found within this many benchmarked points of an alert of the same kind on the same series is
# that alert seen again with more (or other) data, not a second change.
SAME_CHANGE_POINTS = 2


class TriageRefused(Exception):
    """The user may not triage, or the change does not apply."""


@dataclass(frozen=True)
class Threshold:
    min_relative_change: float
    p_threshold: float
    enabled: bool


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


def threshold_resolve(*, metric: str, suite_id: int, rows: Iterable[DetectionSetting]) -> Threshold:
    """The setting that applies to `metric` in suite `suite_id`: the most specific row, else the default."""
    matching = [
        row
        for row in rows
        if (row.suite_id is None or row.suite_id == suite_id) and metric.startswith(row.metric_prefix)
    ]
    if matching:
        row = max(matching, key=lambda r: (r.suite_id is not None, len(r.metric_prefix)))
        return Threshold(row.min_relative_change, row.p_threshold, row.enabled)
    for prefix, change in DEFAULT_THRESHOLDS:
        if metric.startswith(prefix):
            return Threshold(change or 0.0, DEFAULT_P_THRESHOLD, change is not None)
    return Threshold(FALLBACK_MIN_RELATIVE_CHANGE, DEFAULT_P_THRESHOLD, True)


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
    """
    if AlertGroup.objects.filter(base_commit_id=base.commit_id, head_commit_id=head.commit_id).exists():
        return False
    try:
        with transaction.atomic():
            narrowed = AlertGroup.objects.filter(
                pk=known.group_id, base_commit_id=known.base_commit_id, head_commit_id=known.head_commit_id
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


def _group_refresh(group: AlertGroup) -> None:
    """Judge the group's metrics together: all worse, all better, or some of each."""
    alerts = list(group.alerts.values_list("kind", "change_pct", "status"))
    counted = [a for a in alerts if a[2] != TriageStatus.INVALID] or alerts
    kinds = {kind for kind, _, _ in counted}
    if kinds == {AlertKind.REGRESSION}:
        group.kind = GroupKind.REGRESSION
    elif kinds == {AlertKind.IMPROVEMENT}:
        group.kind = GroupKind.IMPROVEMENT
    else:
        group.kind = GroupKind.TRADE_OFF
    group.magnitude_pct = max((abs(change) for _, change, _ in counted), default=0.0)
    group.save(update_fields=["kind", "magnitude_pct", "updated_at"])


def alert_upsert(
    *,
    series: Series,
    base_commit_id: int,
    head_commit_id: int,
    kind: str,
    before: float,
    after: float,
    change_pct: float,
    p_value: float | None,
    source: str = Alert.Source.DETECTOR,
) -> tuple[Alert, bool]:
    """The alert of `series` in the range (base, head], created or refreshed, and its group judged again."""
    group, _ = AlertGroup.objects.get_or_create(
        base_commit_id=base_commit_id, head_commit_id=head_commit_id, defaults={"kind": kind}
    )
    # Alerts of other series may join the same group concurrently: judging it under its row lock means
    # the last writer sees every alert, so a trade-off is never judged from half of its metrics.
    group = AlertGroup.objects.select_for_update().get(pk=group.pk)
    alert, created = Alert.objects.update_or_create(
        series=series,
        group=group,
        defaults={
            "kind": kind,
            "before_value": before,
            "after_value": after,
            "change_pct": change_pct,
            "p_value": p_value,
        },
        create_defaults={
            "kind": kind,
            "before_value": before,
            "after_value": after,
            "change_pct": change_pct,
            "p_value": p_value,
            "source": source,
        },
    )
    _group_refresh(group)
    return alert, created


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


def _thresholds(suite_id: int) -> list[DetectionSetting]:
    """The detection settings of a suite: its rows and the every-suite rows, then what the suite file
    declares (an accuracy task's tolerance), which a row of the same prefix overrides."""
    rows = list(DetectionSetting.objects.filter(Q(suite_id=suite_id) | Q(suite__isnull=True)))
    settings = Suite.objects.filter(pk=suite_id).values_list("benchmark_settings", flat=True).first()
    accuracy = (settings or {}).get("accuracy")
    if accuracy and accuracy.get("tolerance"):
        # Unsaved, and after the rows: threshold_resolve keeps the first of equally specific settings.
        rows.append(
            DetectionSetting(
                suite_id=suite_id,
                metric_prefix=f"accuracy_{accuracy['name']}",
                min_relative_change=float(accuracy["tolerance"]),
            )
        )
    return rows


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
                settings_rows[series.suite_id] = _thresholds(series.suite_id)
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
            metric=series.metric, suite_id=series.suite_id, rows=_thresholds(series.suite_id)
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
    if outcome.group_ids:
        notifications_schedule(group_ids=sorted(outcome.group_ids))


def run_detect(*, run_id: int, notify: bool = True, bisect: bool = True) -> DetectionOutcome:
    """Detect changes in every series a succeeded run touched, around the run's commit; then bisect the
    open groups this run created or measured inside, so a culprit range keeps halving run after run."""
    run = Run.objects.filter(pk=run_id, status=RunStatus.SUCCEEDED).values("commit_id").first()
    if run is None:
        return NOTHING
    series_ids = sorted(set(Measurement.objects.filter(run_id=run_id).values_list("series_id", flat=True)))
    outcome = series_detect(series_ids=series_ids, commit_id=run["commit_id"])
    if notify:
        _notify(outcome)
    if bisect:
        for group_id in sorted(outcome.group_ids | set(_groups_around(commit_id=run["commit_id"]))):
            group_bisect(group_id=group_id)
    return outcome


# Bisection

BISECTED_KINDS: tuple[str, ...] = (GroupKind.REGRESSION, GroupKind.TRADE_OFF)
BISECTED_STATUSES: tuple[str, ...] = (
    TriageStatus.UNTRIAGED,
    TriageStatus.INVESTIGATING,
    TriageStatus.ACKNOWLEDGED,
)


def _groups_around(*, commit_id: int) -> list[int]:
    """Open groups whose range holds the commit, its ends included (a narrowed range ends at it)."""
    position = Commit.objects.filter(pk=commit_id).values_list("position", flat=True).first()
    if position is None:
        return []
    return list(
        AlertGroup.objects.filter(
            kind__in=BISECTED_KINDS,
            status__in=BISECTED_STATUSES,
            base_commit__position__lte=position,
            head_commit__position__gte=position,
        ).values_list("pk", flat=True)
    )


def _bisection_commit(*, inside: Sequence[Commit], suite: Suite, hardware_class: str) -> Commit | None:
    """The middle of the commits after the last one this suite benchmarked in the range, head excluded;
    None while a run inside the range is still pending (its result decides which half comes next)."""
    runs = Run.objects.filter(
        suite=suite, hardware_class=hardware_class, commit_id__in=[commit.pk for commit in inside]
    )
    if runs.filter(status__in=PENDING_RUN_STATUSES).exists():
        return None
    benchmarked = set(runs.filter(status=RunStatus.SUCCEEDED).values_list("commit_id", flat=True))
    last = max((index for index, commit in enumerate(inside) if commit.pk in benchmarked), default=-1)
    # A commit touching only docs, tests or CI cannot be the culprit of a performance change.
    candidates = [commit for commit in inside[last + 1 :] if commit.change_class != "docs_tests_ci"]
    return candidates[len(candidates) // 2] if candidates else None


def group_bisect(*, group_id: int) -> list[Run]:
    """Queue one forced run at the middle unbenchmarked commit of an open regression or trade-off range,
    per suite and hardware class of its alerts; idempotent, returns the runs it queued.

    Release suites install versions, not commits, so they cannot bisect.
    """
    from dashboard.benchmarks.lifecycle import run_enqueue  # lifecycle imports this module

    queued: list[Run] = []
    with transaction.atomic():
        # The group's row lock serialises two detections bisecting it at once.
        group = (
            AlertGroup.objects.select_for_update()
            .filter(pk=group_id, kind__in=BISECTED_KINDS, status__in=BISECTED_STATUSES)
            .select_related("base_commit", "head_commit")
            .first()
        )
        if group is None or group.base_commit.position is None or group.head_commit.position is None:
            return []
        inside = list(
            Commit.objects.filter(
                repository_id=group.head_commit.repository_id,
                position__gt=group.base_commit.position,
                position__lt=group.head_commit.position,
            ).order_by("position")
        )
        if not inside:
            return []
        pairs = sorted(set(group.alerts.values_list("series__suite_id", "series__hardware_class")))
        suites = Suite.objects.in_bulk([suite_id for suite_id, _ in pairs])
        for suite_id, hardware_class in pairs:
            suite = suites[suite_id]
            if suite.install_settings.get("method") == "pypi_release":
                continue
            commit = _bisection_commit(inside=inside, suite=suite, hardware_class=hardware_class)
            if commit is None:
                continue
            taken = Run.objects.filter(commit=commit, suite=suite, hardware_class=hardware_class).exclude(
                status__in=(RunStatus.FAILED, RunStatus.CANCELLED)
            )
            if taken.exists():
                continue
            queued.append(run_enqueue(commit=commit, suite=suite, hardware_class=hardware_class, forced=True))
    if queued:
        logger.info("group %s: bisection queued runs %s", group_id, [run.pk for run in queued])
    return queued


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


# Triage


def _user_check(user: AbstractBaseUser | AnonymousUser) -> None:
    if not (user.is_authenticated and getattr(user, "is_staff", False)):
        raise TriageRefused("triage needs a signed-in staff user")


def _user_label(user_id: int | None) -> str:
    if user_id is None:
        return ""
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.filter(pk=user_id).first()
    return user.get_username() if user else str(user_id)


@dataclass(frozen=True)
class TriageChange:
    """What a triage form asks for; None leaves a field as it is."""

    status: str | None = None
    assignee_id: int | None = None
    assignee_set: bool = False  # distinguishes "unassign" (None) from "leave as is"
    notes: str | None = None
    alert_ids: Sequence[int] = ()
    alert_status: str | None = None


def group_triage(
    *, group_id: int, user: AbstractBaseUser | AnonymousUser, change: TriageChange
) -> list[TriageEvent]:
    """Apply a triage change to a group and, in bulk, to some of its alerts; every change is recorded."""
    _user_check(user)
    valid = set(TriageStatus.values)
    for status in (change.status, change.alert_status):
        if status is not None and status not in valid:
            raise TriageRefused(f"unknown status {status!r}")
    events: list[TriageEvent] = []
    with transaction.atomic():
        group = AlertGroup.objects.select_for_update().filter(pk=group_id).first()
        if group is None:
            raise TriageRefused(f"no alert group {group_id}")
        user_id = user.pk

        def record(field: str, old: Any, new: Any, alert: Alert | None = None) -> None:
            events.append(
                TriageEvent(
                    group=group, alert=alert, user_id=user_id, field=field, old_value=old, new_value=new
                )
            )

        if change.status is not None and change.status != group.status:
            record("status", group.status, change.status)
            group.status = change.status
        if change.assignee_set and change.assignee_id != group.assignee_id:
            record("assignee", _user_label(group.assignee_id), _user_label(change.assignee_id))
            group.assignee_id = change.assignee_id
        if change.notes is not None and change.notes != group.notes:
            record("notes", group.notes, change.notes)
            group.notes = change.notes
        if change.alert_status is not None and change.alert_ids:
            for alert in group.alerts.filter(pk__in=change.alert_ids).order_by("pk"):
                if alert.status != change.alert_status:
                    record("status", alert.status, change.alert_status, alert=alert)
                    alert.status = change.alert_status
                    alert.save(update_fields=["status", "updated_at"])
        if not events:
            return []
        group.save()
        TriageEvent.objects.bulk_create(events)
        _group_refresh(group)
    return events


def alert_mark_missed(
    *,
    series_id: int,
    base_commit_id: int,
    head_commit_id: int,
    user: AbstractBaseUser | AnonymousUser,
    before: float,
    after: float,
) -> Alert:
    """Record by hand a change the detector did not raise: it counts as a miss in the detector's quality."""
    _user_check(user)
    with transaction.atomic():
        series = series_lock().get(pk=series_id)
        change_pct = (after - before) / abs(before) * 100.0 if before else 0.0
        kind = AlertKind.IMPROVEMENT if (change_pct > 0) == series.higher_is_better else AlertKind.REGRESSION
        alert, _ = alert_upsert(
            series=series,
            base_commit_id=base_commit_id,
            head_commit_id=head_commit_id,
            kind=kind,
            before=before,
            after=after,
            change_pct=change_pct,
            p_value=None,
            source=Alert.Source.MANUAL,
        )
        TriageEvent.objects.create(
            group_id=alert.group_id, alert=alert, user_id=user.pk, field="source", new_value="manual"
        )
    return alert

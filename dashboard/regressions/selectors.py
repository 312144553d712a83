"""Reads for the alert pages: alert lists, a group's page, its chart points, precision, triage history.

The detector's window reads are `detect/windows.py`; timeline markers are `timeline.py`.

Longer than 500 lines: every read of the alert pages sits beside the others, so that the pages'
query-count tests pin one module.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from django.db import connection
from django.db.models import Count, F, Prefetch, Q, QuerySet
from django.utils.text import capfirst

from dashboard.benchmarks.metrics import metric_display, statistic_rank
from dashboard.benchmarks.models import (
    HEADLINE_METRICS,
    PENDING_RUN_STATUSES,
    Commit,
    Run,
    Series,
)
from dashboard.github.models import CommitRevert, PullRequest
from dashboard.regressions.detect.windows import commit_values, commit_window
from dashboard.regressions.models import (
    DECIDED_STATUSES,
    Alert,
    AlertGroup,
    AlertKind,
    Comment,
    GroupKind,
    GroupState,
    Notification,
    TriageEvent,
    TriageStatus,
)

Sort = Literal["date", "size"]


def group_range_commits(*, group: AlertGroup) -> list[Commit]:
    """The commits that may hold the culprit, oldest first: after the base commit, up to the head.

    Without positions on main for both ends the range cannot be listed, and only the head is known.
    """
    base, head = group.base_commit, group.head_commit
    if base.position is None or head.position is None:
        return [head]
    return list(
        Commit.objects.filter(
            repository_id=head.repository_id, position__gt=base.position, position__lte=head.position
        )
        .select_related("repository")
        .order_by("position")
    )


@dataclass(frozen=True)
class AlertFilters:
    suite: str = ""
    hardware_class: str = ""
    status: str = ""
    kind: str = ""
    sort: Sort = "date"


def alert_groups(*, filters: AlertFilters) -> QuerySet[AlertGroup]:
    """Groups matching the filters, newest culprit range (or largest change) first, alerts prefetched."""
    groups = AlertGroup.objects.all()
    if filters.suite:
        groups = groups.for_suite(filters.suite)
    if filters.hardware_class:
        groups = groups.for_hardware(filters.hardware_class)
    if filters.status:
        groups = groups.filter(status=filters.status)
    if filters.kind:
        groups = groups.filter(kind=filters.kind)
    if filters.sort == "size":
        groups = groups.order_by("-magnitude_pct", "-pk")
    else:
        groups = groups.order_by(
            F("head_commit__position").desc(nulls_last=True),
            F("head_commit__committed_at").desc(nulls_last=True),
            "-pk",
        )
    return groups.select_related("base_commit", "head_commit__repository", "assignee").prefetch_related(
        Prefetch("alerts", queryset=Alert.objects.select_related("series__suite").order_by("pk"))
    )


def alert_order(alert: Alert) -> tuple[bool, int, float, int]:
    """Headline metrics first, in the order pages show them (throughput leads), then the larger change;
    alerts triaged as invalid last."""
    metric = alert.series.metric
    rank = HEADLINE_METRICS.index(metric) if metric in HEADLINE_METRICS else len(HEADLINE_METRICS)
    return (alert.status == TriageStatus.INVALID, rank, -abs(alert.change_pct), alert.pk)


@dataclass(frozen=True)
class AlertGroupRow:
    group: AlertGroup
    alerts: tuple[Alert, ...]  # in alert_order
    suites: tuple[str, ...]
    hardware_classes: tuple[str, ...]

    @property
    def headline(self) -> Alert | None:
        return self.alerts[0] if self.alerts else None

    @property
    def metrics(self) -> tuple[str, ...]:
        """Each metric that moved once, in alert order (headline metrics first)."""
        return tuple(dict.fromkeys(alert.series.metric for alert in self.alerts))

    @property
    def title(self) -> str:
        group, headline = self.group, self.headline
        kind = group.get_kind_display().capitalize()
        text = f"{kind} in {group.base_commit.short_sha}..{group.head_commit.short_sha}"
        if headline is None:
            return text
        series = headline.series
        name = metric_display(metric=series.metric).short_label
        sign = "+" if headline.change_pct > 0 else "\u2212" if headline.change_pct < 0 else ""
        return (
            f"{text}: {name} {sign}{abs(headline.change_pct):.1f} % "
            f"({series.suite.name} {series.hardware_class} c={series.concurrency})"
        )


def alert_group_rows(*, groups: list[AlertGroup]) -> list[AlertGroupRow]:
    """Cards for groups from `alert_groups` (no further query)."""
    rows = []
    for group in groups:
        alerts = tuple(sorted(group.alerts.all(), key=alert_order))
        rows.append(
            AlertGroupRow(
                group=group,
                alerts=alerts,
                suites=tuple(sorted({a.series.suite.name for a in alerts})),
                hardware_classes=tuple(sorted({a.series.hardware_class for a in alerts})),
            )
        )
    return rows


OPEN_STATUSES: tuple[str, ...] = (TriageStatus.UNTRIAGED, TriageStatus.INVESTIGATING)


# A regression counts as restored once a later change on the same series brings it back within this
# share of its own size (the revert of a 6 % loss that lands 0.5 % short still restores it).
RESTORED_WITHIN = 0.5


@dataclass(frozen=True)
class Restoration:
    """A later group (its revert, or a fix) that undid a regression on its series."""

    regression_id: int
    by: AlertGroup  # base and head commits loaded
    series_restored: int
    series_regressed: int

    @property
    def by_revert(self) -> bool:
        return self.by.head_commit.subject.lower().startswith("revert")


# Each regressed series of a regression (or trade-off) that nobody dismissed, against the improvements of the
# same series in later groups (based at or after its head) that nobody dismissed: one undoes it when the
# series ends within RESTORED_WITHIN of the loss's size from where it was before the loss. The later group
# that undid most of its series (the nearest on main among equals, then the first made) restores it when
# that is more than half of them. Worked out in the database, over the alerts' columns only (double
# precision, as Python's floats): the overview needs the few restored groups, not every alert of the
# history loaded as objects.
_RESTORED_SQL = """
WITH lost AS (
    SELECT a.group_id, a.series_id, a.before_value, a.change_pct, COALESCE(head.position, 0) AS at
    FROM {alert} a
    JOIN {group} g ON g.id = a.group_id
    JOIN {commit} head ON head.id = g.head_commit_id
    WHERE a.kind = %(regression)s AND g.kind IN (%(regression)s, %(trade_off)s) AND g.state <> %(dismissed)s
),
sizes AS (SELECT group_id, COUNT(*) AS regressed FROM lost GROUP BY group_id),
backs AS (
    SELECT lost.group_id, back.group_id AS by_id, COALESCE(by_head.position, 0) AS by_at,
        COUNT(*) AS restored
    FROM lost
    JOIN {alert} back ON back.series_id = lost.series_id AND back.kind = %(improvement)s
    JOIN {group} by_group ON by_group.id = back.group_id AND by_group.state <> %(dismissed)s
    JOIN {commit} by_base ON by_base.id = by_group.base_commit_id
    JOIN {commit} by_head ON by_head.id = by_group.head_commit_id
    WHERE COALESCE(by_base.position, 0) >= lost.at
      AND lost.before_value <> 0 AND (lost.change_pct > 0) <> (back.change_pct > 0)
      AND ABS(back.after_value / lost.before_value - 1.0) * 100.0 <= %(within)s * ABS(lost.change_pct)
    GROUP BY lost.group_id, back.group_id, COALESCE(by_head.position, 0)
),
ranked AS (
    SELECT backs.*, ROW_NUMBER() OVER (
        PARTITION BY backs.group_id ORDER BY backs.restored DESC, backs.by_at, backs.by_id
    ) AS place
    FROM backs
)
SELECT ranked.group_id, ranked.by_id, ranked.restored, sizes.regressed
FROM ranked JOIN sizes ON sizes.group_id = ranked.group_id
WHERE ranked.place = 1 AND ranked.restored * 2 > sizes.regressed
"""


def regressions_restored() -> dict[int, Restoration]:
    """Regressions (and trade-offs) that a later change restored, by group id: most of their regressed
    series came back by the head of one later group (see _RESTORED_SQL). One query over the alerts'
    columns, and one for the restoring groups when there are any."""
    sql = _RESTORED_SQL.format(
        alert=Alert._meta.db_table, group=AlertGroup._meta.db_table, commit=Commit._meta.db_table
    )
    params: dict[str, str | float] = {
        "regression": AlertKind.REGRESSION.value,
        "improvement": AlertKind.IMPROVEMENT.value,
        "trade_off": GroupKind.TRADE_OFF.value,
        "dismissed": GroupState.DISMISSED.value,
        "within": RESTORED_WITHIN,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    if not rows:
        return {}
    by_groups = AlertGroup.objects.select_related("base_commit", "head_commit").in_bulk(
        {by_id for _, by_id, _, _ in rows}
    )
    return {
        group_id: Restoration(
            regression_id=group_id,
            by=by_groups[by_id],
            series_restored=restored,
            series_regressed=regressed,
        )
        for group_id, by_id, restored, regressed in rows
    }


def regressions_restored_rows(
    *, restored: dict[int, Restoration] | None = None, limit: int = 5
) -> list[tuple[AlertGroup, Restoration]]:
    """The newest regressions that a later change restored (`restored`, found when not given), each with
    what restored it; no query when there are none."""
    restored = regressions_restored() if restored is None else restored
    if not restored:
        return []
    groups = AlertGroup.objects.filter(pk__in=list(restored)).select_related("head_commit")
    return [(group, restored[group.pk]) for group in groups.order_by("-head_commit__position")[:limit]]


def _groups_open(*, restored: dict[int, Restoration] | None = None) -> QuerySet[AlertGroup]:
    """Groups with a regression that nobody has decided on yet, re-runs have not dismissed and no later
    change (a revert or a fix) has restored (`restored`, found when not given)."""
    restored = regressions_restored() if restored is None else restored
    return (
        AlertGroup.objects.filter(status__in=OPEN_STATUSES)
        .exclude(kind=GroupKind.IMPROVEMENT)
        .exclude(state=GroupState.DISMISSED)
        .exclude(pk__in=list(restored))
    )


def alert_groups_open(
    *, restored: dict[int, Restoration] | None = None, limit: int = 20
) -> list[AlertGroupRow]:
    """The open regressions (`_groups_open`), largest change first."""
    groups = (
        _groups_open(restored=restored)
        .order_by("-magnitude_pct", "-pk")
        .select_related("base_commit", "head_commit__repository")
        .prefetch_related(
            Prefetch("alerts", queryset=Alert.objects.select_related("series__suite").order_by("pk"))
        )
    )
    return alert_group_rows(groups=list(groups[:limit]))


def open_regression_counts(*, restored: dict[int, Restoration] | None = None) -> dict[tuple[str, str], int]:
    """How many open regressions touch each (suite name, hardware class), however many there are; one
    query (and those of `regressions_restored` when `restored` is not given)."""
    return {
        (suite, hardware_class): count
        for suite, hardware_class, count in Alert.objects.filter(group__in=_groups_open(restored=restored))
        .values_list("series__suite__name", "series__hardware_class")
        .annotate(count=Count("group", distinct=True))
        .values_list("series__suite__name", "series__hardware_class", "count")
        .order_by()
    }


def _groups_holding(*, commits: Sequence[Commit]) -> QuerySet[AlertGroup]:
    """Groups whose range (base, head] holds one of `commits` (commits on main only)."""
    holds = Q(pk__in=[])
    for commit in commits:
        if commit.position is not None:
            holds |= Q(
                head_commit__repository_id=commit.repository_id,
                base_commit__position__lt=commit.position,
                head_commit__position__gte=commit.position,
            )
    return AlertGroup.objects.filter(holds)


def _with_alerts(groups: QuerySet[AlertGroup]) -> list[AlertGroupRow]:
    groups = groups.select_related("base_commit", "head_commit__repository").prefetch_related(
        Prefetch("alerts", queryset=Alert.objects.select_related("series__suite").order_by("pk"))
    )
    return alert_group_rows(groups=list(groups.order_by("-magnitude_pct", "-pk")))


def alert_groups_naming(*, commit: Commit) -> list[AlertGroupRow]:
    """Groups whose culprit range holds `commit`: the alerts that name it."""
    return _with_alerts(_groups_holding(commits=[commit]) | AlertGroup.objects.filter(head_commit=commit))


@dataclass(frozen=True)
class RelatedGroup:
    """A group tied to another: by a revert, or by holding the same PRs (a commit measured on another suite
    or hardware class, or over a different range)."""

    row: AlertGroupRow
    revert_tie: str  # "holds its revert", "holds the PR it reverts" or "" when not tied by a revert
    shared_pr_numbers: tuple[int, ...]

    @property
    def by_revert(self) -> bool:
        return bool(self.revert_tie)


def _holds(group: AlertGroup, commit: Commit) -> bool:
    """Whether `group`'s range (base, head] holds `commit`, as `_groups_holding` selects them."""
    base, head, position = group.base_commit.position, group.head_commit.position, commit.position
    if base is None or head is None or position is None:
        return False
    return base < position <= head


def alert_groups_related(*, group: AlertGroup, commits: Sequence[Commit]) -> list[RelatedGroup]:
    """Other groups tied to this one's range `commits`: a group holds the revert of a PR in the range, the
    range reverts a PR that a group holds, or a group's range holds a PR of this range too. Revert ties
    first."""
    repository_id = group.head_commit.repository_id
    with_pr = {commit.pr_number: commit for commit in commits if commit.pr_number}
    reverted = set(
        CommitRevert.objects.filter(commit__in=commits).values_list("reverted_pr_number", flat=True)
    )
    linked = list(
        Commit.objects.filter(repository_id=repository_id, pr_number__in=reverted)
        | Commit.objects.filter(
            repository_id=repository_id,
            pk__in=CommitRevert.objects.filter(reverted_pr_number__in=list(with_pr)).values("commit_id"),
        )
    )
    # A linked commit is either a PR this range reverts or the revert of one of this range's PRs.
    reverted_here = [commit for commit in linked if commit.pr_number in reverted]
    reverting = [commit for commit in linked if commit not in reverted_here]
    candidates = _with_alerts(_groups_holding(commits=[*linked, *with_pr.values()]).exclude(pk=group.pk))
    related = []
    for row in candidates:
        revert_tie = ""
        if any(_holds(row.group, commit) for commit in reverting):
            revert_tie = "holds its revert"
        elif any(_holds(row.group, commit) for commit in reverted_here):
            revert_tie = "holds the PR it reverts"
        shared = tuple(number for number, pr_commit in with_pr.items() if _holds(row.group, pr_commit))
        related.append(RelatedGroup(row=row, revert_tie=revert_tie, shared_pr_numbers=shared))
    return sorted(related, key=lambda tie: not tie.by_revert)  # stable: largest first within each tie


def alert_filter_choices() -> tuple[list[str], list[str]]:
    """Suites and hardware classes that have alerts: what the alerts page can be filtered by."""
    pairs = (
        Alert.objects.values_list("series__suite__name", "series__hardware_class")
        .distinct()
        .order_by("series__suite__name", "series__hardware_class")
    )
    suites, hardware = set(), set()
    for suite, hardware_class in pairs:
        suites.add(suite)
        hardware.add(hardware_class)
    return sorted(suites), sorted(hardware)


@dataclass(frozen=True)
class HistoryEntry:
    """One triage change as a person reads it: "Status: Untriaged → Investigating", by whom and when."""

    created_at: datetime
    who: str
    what: str
    alert: Alert | None
    old: str
    new: str


_FIELD_LABELS = {"status": "Status", "assignee": "Assignee", "notes": "Notes"}


def _value_label(field: str, value: str) -> str:
    if field == "status" and value in TriageStatus.values:
        return capfirst(TriageStatus(value).label)
    return value


def triage_history(*, events: Iterable[TriageEvent]) -> list[HistoryEntry]:
    """Events (with user and alert's series loaded) as readable entries: labels, not stored values."""
    return [
        HistoryEntry(
            created_at=event.created_at,
            who=event.user.get_username() if event.user else "PerfWatch",
            what=_FIELD_LABELS.get(event.field, event.field),
            alert=event.alert,
            old=_value_label(event.field, event.old_value),
            new=_value_label(event.field, event.new_value),
        )
        for event in events
    ]


@dataclass(frozen=True)
class AlertGroupDetail:
    group: AlertGroup
    alerts: tuple[Alert, ...]
    commits: tuple[Commit, ...]
    history: tuple[HistoryEntry, ...]
    comments: tuple[Comment, ...]
    notifications: tuple[Notification, ...]
    pull_requests: dict[int, PullRequest]  # by number, for the PRs in the range GitHub told us about
    bisection_runs: tuple[Run, ...] = ()  # queued or running inside the range for the group's suites
    search: CulpritSearch | None = None
    # The group this one was opened after (a dismissed group next to it, or one whose culprit left a
    # change), and the groups opened after this one, oldest first.
    follows: AlertGroup | None = None
    followed_by: tuple[AlertGroup, ...] = ()


@dataclass(frozen=True)
class PosteriorRow:
    """One commit of a searched range: how likely it is the culprit, and how many runs it has."""

    commit: Commit
    probability: float
    runs: int
    pending: int
    docs_only: bool

    @property
    def percent(self) -> float:
        return 100.0 * self.probability


@dataclass(frozen=True)
class CulpritSearch:
    """Where a confirmed group's culprit search stands: its posterior over the searched range, its runs
    against the cap, and why it stopped if it did ("found"; "found_at_cap", at 95 % once its runs were
    spent; "found_of_two", the larger of two changes read in the range, whose pair of commits holds 99 %;
    "found_at_cap_of_two", the same at 95 % once its runs were spent; or "cap")."""

    rows: tuple[PosteriorRow, ...]
    runs_queued: int
    runs_cap: int
    stopped: str
    culprit_sha: str
    stop_at_pct: int = 95  # where it stops: what the search that wrote it used

    @property
    def likeliest(self) -> PosteriorRow | None:
        return max(self.rows, key=lambda row: row.probability, default=None)


# Commits less likely than this, and never run, are left out of a long posterior table.
POSTERIOR_SHOWN = 0.001


def group_culprit_search(*, group: AlertGroup) -> CulpritSearch | None:
    """The search stored on the group (`sheriff.search`), its commits read in one query; None before one."""
    search = (group.evidence or {}).get("search")
    if not search or not search.get("posterior"):
        return None
    stored = search["posterior"]
    commits = {
        commit.sha: commit
        for commit in Commit.objects.filter(
            repository_id=group.head_commit.repository_id, sha__in=[row["sha"] for row in stored]
        )
    }
    rows = tuple(
        PosteriorRow(
            commit=commits[row["sha"]],
            probability=float(row["probability"]),
            runs=int(row["runs"]),
            pending=int(row.get("pending", 0)),
            docs_only=bool(row.get("docs_only")),
        )
        for index, row in enumerate(stored)
        if index > 0  # the base: the change is after it
        and row["sha"] in commits
        and (row["probability"] >= POSTERIOR_SHOWN or row["runs"] or row.get("pending"))
    )
    return CulpritSearch(
        rows=rows,
        runs_queued=int(search.get("runs_queued", 0)),
        runs_cap=int(search.get("runs_cap", 0)),
        stopped=str(search.get("stopped", "")),
        culprit_sha=str(search.get("culprit", "")),
        stop_at_pct=int(search.get("stop_at_pct", 95)),
    )


def group_bisection_runs(*, group: AlertGroup) -> list[Run]:
    """Runs queued or running strictly inside the group's range, for the suites and hardware of its alerts."""
    base, head = group.base_commit, group.head_commit
    if base.position is None or head.position is None:
        return []
    pairs = set(group.alerts.values_list("series__suite_id", "series__hardware_class"))
    runs = Run.objects.filter(
        commit__repository_id=head.repository_id,
        commit__position__gt=base.position,
        commit__position__lt=head.position,
        status__in=PENDING_RUN_STATUSES,
        suite_id__in={suite_id for suite_id, _ in pairs},
    ).select_related("commit", "suite")
    return [run for run in runs.order_by("pk") if (run.suite_id, run.hardware_class) in pairs]


def alert_group_detail(*, group_id: int) -> AlertGroupDetail | None:
    group = (
        AlertGroup.objects.select_related(
            "base_commit__repository", "head_commit__repository", "assignee", "follows"
        )
        .filter(pk=group_id)
        .first()
    )
    if group is None:
        return None
    alerts = sorted(group.alerts.select_related("series__suite"), key=alert_order)
    commits = group_range_commits(group=group)
    pull_requests = PullRequest.objects.filter(
        repository_id=group.head_commit.repository_id,
        number__in=[commit.pr_number for commit in commits if commit.pr_number],
    )
    return AlertGroupDetail(
        group=group,
        alerts=tuple(alerts),
        commits=tuple(commits),
        history=tuple(triage_history(events=group.events.select_related("user", "alert__series"))),
        comments=tuple(group.comments.select_related("author")),
        notifications=tuple(group.notifications.order_by("channel")),
        pull_requests={pull.number: pull for pull in pull_requests},
        bisection_runs=tuple(group_bisection_runs(group=group)),
        search=group_culprit_search(group=group),
        follows=group.follows,
        followed_by=tuple(AlertGroup.objects.filter(follows=group).order_by("pk")),
    )


@dataclass(frozen=True)
class ChartCommit:
    sha: str
    subject: str
    pr_number: int | None
    position: int | None
    committed_at: datetime | None = None


@dataclass(frozen=True)
class FamilyTrace:
    """One statistic of a family chart: its value at each of the chart's commits (None where it has
    none), and the group's alert on it when it is one that moved."""

    metric: str
    values: tuple[float | None, ...]
    alert: Alert | None
    # (base sha, head sha) of the series' other changes, where its means before and after stop.
    neighbour_ranges: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class FamilyChartData:
    commits: tuple[ChartCommit, ...]  # in main order, each with a value in at least one trace
    traces: tuple[FamilyTrace, ...]  # mean first, then the percentiles in order


def alert_family_chart(*, alert: Alert, span: int = 30) -> FamilyChartData:
    """The chart of an alert in its family: every statistic of its metric family (mean, p50, p90, p99 …
    whichever the suite stores) at its suite, hardware class and concurrency, over `span` benchmarked
    commits each side of the group's head; the group's alerts on them mark the statistics that moved.

    The same reads whatever the number of statistics: the series, the window, the values of all of them,
    the commits, the group's alerts and the other changes of the alerted series.
    """
    family = metric_display(metric=alert.series.metric).family
    siblings = sorted(
        (
            series
            for series in Series.objects.filter(
                suite_id=alert.series.suite_id,
                hardware_class=alert.series.hardware_class,
                concurrency=alert.series.concurrency,
            )
            if metric_display(metric=series.metric).family == family
        ),
        key=lambda series: statistic_rank(metric_display(metric=series.metric).statistic),
    )
    window = commit_window(
        suite_id=alert.series.suite_id,
        hardware_class=alert.series.hardware_class,
        commit_id=alert.group.head_commit_id,
        size=2 * span + 1,
    )
    values = commit_values(
        series_ids=[series.pk for series in siblings],
        commit_ids=[commit.commit_id for commit in window.commits],
    )
    shown = [
        commit.commit_id
        for commit in window.commits
        if any(commit.commit_id in values[s.pk] for s in siblings)
    ]
    commits = Commit.objects.in_bulk(shown)
    moved = Alert.objects.filter(group_id=alert.group_id, series__in=siblings).select_related("series")
    alerts = {each.series_id: each for each in moved}
    neighbours: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for series_id, base_sha, head_sha in (
        Alert.objects.filter(series_id__in=alerts)
        .exclude(group_id=alert.group_id)
        .exclude(status=TriageStatus.INVALID)
        .values_list("series_id", "group__base_commit__sha", "group__head_commit__sha")
    ):
        neighbours[series_id].append((base_sha, head_sha))
    return FamilyChartData(
        commits=tuple(
            ChartCommit(
                sha=commits[commit_id].sha,
                subject=commits[commit_id].subject,
                pr_number=commits[commit_id].pr_number,
                position=commits[commit_id].position,
                committed_at=commits[commit_id].committed_at,
            )
            for commit_id in shown
        ),
        traces=tuple(
            FamilyTrace(
                metric=series.metric,
                values=tuple(
                    values[series.pk][commit_id].value if commit_id in values[series.pk] else None
                    for commit_id in shown
                ),
                alert=alerts.get(series.pk),
                neighbour_ranges=tuple(neighbours.get(series.pk, ())),
            )
            for series in siblings
            if values[series.pk]
        ),
    )


@dataclass(frozen=True)
class PrecisionRow:
    """How triage judged the detector on one suite and metric (every concurrency and hardware class)."""

    suite: str
    metric: str
    detected: int
    decided: int
    false_positives: int
    missed: int

    @property
    def true_positives(self) -> int:
        return self.decided - self.false_positives

    @property
    def precision(self) -> float | None:
        return self.true_positives / self.decided if self.decided else None

    @property
    def recall(self) -> float | None:
        found = self.true_positives + self.missed
        return self.true_positives / found if found else None


def detector_precision() -> list[PrecisionRow]:
    """Per suite and metric, from triage labels: `invalid` is a false positive, a hand-marked alert a miss.

    An alert without its own verdict takes its group's. One query.
    """
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for suite, metric, source, status, group_status in Alert.objects.values_list(
        "series__suite__name", "series__metric", "source", "status", "group__status"
    ):
        row = counts[(suite, metric)]
        if source == Alert.Source.MANUAL:
            row[3] += 1
            continue
        verdict = status if status in DECIDED_STATUSES else group_status
        row[0] += 1
        if verdict in DECIDED_STATUSES:
            row[1] += 1
            row[2] += verdict == TriageStatus.INVALID
    return [
        PrecisionRow(suite, metric, detected, decided, false_positives, missed)
        for (suite, metric), (detected, decided, false_positives, missed) in sorted(counts.items())
    ]


def alert_get(*, alert_id: int) -> Alert | None:
    """One alert with what its chart needs (series and the group's range); None if unknown."""
    return (
        Alert.objects.select_related("series", "group__base_commit", "group__head_commit")
        .filter(pk=alert_id)
        .first()
    )


@dataclass(frozen=True)
class AlertFamily:
    """The alerts of one metric family (throughput, TTFT, latency, ITL, TPOT …) of a group, read in one
    line: which statistics and levels moved, and by how much."""

    metric: str  # the family's key, e.g. ttft_ms
    label: str
    unit: str
    alerts: tuple[Alert, ...]  # largest change first

    @property
    def headline(self) -> Alert:
        return self.alerts[0]

    @property
    def statistics(self) -> tuple[str, ...]:
        found = {metric_display(metric=alert.series.metric).statistic for alert in self.alerts} - {""}
        return tuple(sorted(found, key=statistic_rank))

    @property
    def concurrencies(self) -> tuple[int, ...]:
        return tuple(sorted({alert.series.concurrency for alert in self.alerts}))

    @property
    def low_pct(self) -> float:
        return min(alert.change_pct for alert in self.alerts)

    @property
    def high_pct(self) -> float:
        return max(alert.change_pct for alert in self.alerts)

    @property
    def worse(self) -> bool:
        return self.headline.kind == AlertKind.REGRESSION


def alert_families(*, alerts: Sequence[Alert]) -> list[AlertFamily]:
    """`alerts` by metric family, each family's largest change first; families in the order of their
    first alert (alert_order puts the headline metrics first)."""
    by_family: dict[str, list[Alert]] = {}
    for alert in alerts:
        by_family.setdefault(metric_display(metric=alert.series.metric).family, []).append(alert)
    families = []
    for family, members in by_family.items():
        members.sort(key=lambda alert: -abs(alert.change_pct))
        display = metric_display(metric=members[0].series.metric)
        families.append(
            AlertFamily(metric=family, label=display.family_label, unit=display.unit, alerts=tuple(members))
        )
    return families


@dataclass(frozen=True)
class FamilyChart:
    """One chart of a group's page: a metric family at one suite, hardware class and concurrency, its
    statistics as traces; `alerts` are those of them that moved, largest change first."""

    family: AlertFamily
    alerts: tuple[Alert, ...]

    @property
    def headline(self) -> Alert:
        return self.alerts[0]

    @property
    def changes(self) -> tuple[tuple[str, Alert], ...]:
        """(statistic, alert) of each statistic that moved, in the legend's order: ("mean", …), ("p99", …);
        ("", …) for a family without statistics."""
        changes = [(metric_display(metric=alert.series.metric).statistic, alert) for alert in self.alerts]
        return tuple(sorted(changes, key=lambda change: statistic_rank(change[0])))


def family_charts(*, families: Sequence[AlertFamily], limit: int) -> list[FamilyChart]:
    """At most `limit` charts, one per family and (suite, hardware class, concurrency) with an alert.

    Every family gets its largest change charted before any family gets a second chart; the charts are
    then listed by family, each family's largest change first.
    """
    cells: list[list[FamilyChart]] = []
    for family in families:
        by_cell: dict[tuple[int, str, int], list[Alert]] = {}
        for alert in family.alerts:  # largest change first, so each cell's first alert is its largest
            series = alert.series
            by_cell.setdefault((series.suite_id, series.hardware_class, series.concurrency), []).append(alert)
        cells.append([FamilyChart(family=family, alerts=tuple(members)) for members in by_cell.values()])
    chosen: set[tuple[int, int]] = set()
    for rank in range(max((len(charts) for charts in cells), default=0)):
        for index, charts in enumerate(cells):
            if rank < len(charts) and len(chosen) < limit:
                chosen.add((index, rank))
    return [
        chart
        for index, charts in enumerate(cells)
        for rank, chart in enumerate(charts)
        if (index, rank) in chosen
    ]

"""Reads: what each PR changed, per suite, hardware class and concurrency, around its merge."""

from __future__ import annotations

import bisect
import hashlib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from django.core.cache import cache
from django.db import connection
from django.db.models import Count, Max, Q

from dashboard.benchmarks.compare import change_pct
from dashboard.benchmarks.comparison import ScopeStatistics
from dashboard.benchmarks.direction import improvement_pct
from dashboard.benchmarks.models import (
    HEADLINE_METRICS,
    Commit,
    Measurement,
    Run,
    RunStatus,
    Series,
    Suite,
)
from dashboard.benchmarks.selectors import series_noises
from dashboard.benchmarks.statistics import ChangeEstimate
from dashboard.benchmarks.subjects import ChangeClass
from dashboard.benchmarks.thresholds import thresholds_for_suites
from dashboard.github.models import PullRequest

# Commits of this class cannot change serving performance, so they do not make a PR's range ambiguous.
_INERT_CHANGE_CLASS = ChangeClass.DOCS_TESTS_CI


OTHER_PULLS_LISTED = 8


@dataclass(frozen=True)
class CommitRef:
    sha: str
    position: int

    @property
    def short_sha(self) -> str:
        return self.sha[:8]


@dataclass(frozen=True)
class MetricChange:
    metric: str
    before: float
    after: float
    change_pct: float | None
    # change_pct with its sign turned so that positive is an improvement, whatever the metric's direction.
    improvement_pct: float | None
    # The change with its 95 % interval, p-value and run counts (before/after above are its medians).
    estimate: ChangeEstimate | None = None

    @property
    def significant(self) -> bool:
        """Beyond the series' noise by the test and at least the metric's minimum change."""
        return self.estimate is not None and self.estimate.significant


@dataclass(frozen=True)
class LevelImpact:
    concurrency: int
    changes: tuple[MetricChange | None, ...]  # one per HEADLINE_METRICS entry

    def change(self, metric: str) -> MetricChange | None:
        return self.changes[HEADLINE_METRICS.index(metric)] if metric in HEADLINE_METRICS else None


@dataclass(frozen=True)
class PullImpact:
    """A PR's change on one suite and hardware class: last benchmarked commit before its merge against
    the first one containing it. ``other_commits`` counts the other commits in that range that may have
    changed performance too; any makes the figures ambiguous."""

    suite: str
    hardware_class: str
    before: CommitRef
    after: CommitRef
    other_commits: int
    other_pull_numbers: tuple[int, ...]
    levels: tuple[LevelImpact, ...]

    @property
    def ambiguous(self) -> bool:
        return self.other_commits > 0

    def change(self, *, concurrency: int, metric: str) -> MetricChange | None:
        level = next((level for level in self.levels if level.concurrency == concurrency), None)
        return level.change(metric) if level else None


def metric_change(*, metric: str, estimate: ChangeEstimate) -> MetricChange:
    """The change of `metric` as pages print it: the medians of the runs on each side, the change between
    them, and its uncertainty against the series' run-to-run noise."""
    change = change_pct(base=estimate.before, head=estimate.after)
    improvement = None if change is None else improvement_pct(metric=metric, change_pct=change)
    return MetricChange(
        metric=metric,
        before=estimate.before,
        after=estimate.after,
        change_pct=change,
        improvement_pct=improvement,
        estimate=estimate,
    )


def pull_impacts(*, pulls: Sequence[PullRequest]) -> dict[int, tuple[PullImpact, ...]]:
    """Per PR id (or number for unsaved PRs): its impact on every suite and hardware class benchmarked on
    both sides of its merge within NEIGHBOUR_COMMITS commits. PRs without a placed merge commit get
    nothing. A fixed number of queries, each reading around the merges rather than the whole history."""
    placed = [
        pull for pull in pulls if pull.merge_commit is not None and pull.merge_commit.position is not None
    ]
    if not placed:
        return {}
    repository_ids = {pull.repository_id for pull in placed}
    ranges = _merge_neighbours(pulls=placed)
    if not ranges:
        return {}

    commit_ids = {commit[1] for pair in ranges.values() for commit in pair}
    # Noise and points only where some PR has a range: a suite benchmarked on neither side of any of
    # them needs neither.
    scopes = sorted({(suite, hardware_class) for _, suite, hardware_class in ranges})
    wanted_scopes = set(scopes)
    # The headline series of the scopes first, then their points at the range ends through the
    # (series, commit) covering index: no join per point.
    series = {
        series_id: (suite, hardware_class, concurrency, metric)
        for series_id, suite, hardware_class, concurrency, metric in Series.objects.filter(
            suite__name__in={suite for suite, _ in wanted_scopes},
            hardware_class__in={hardware_class for _, hardware_class in wanted_scopes},
            metric__in=HEADLINE_METRICS,
        ).values_list("id", "suite__name", "hardware_class", "concurrency", "metric")
        if (suite, hardware_class) in wanted_scopes
    }
    values: dict[tuple[int, str, str], dict[tuple[int, str], list[float]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for series_id, commit_id, value in _end_values(series_ids=list(series), commit_ids=list(commit_ids)):
        suite, hardware_class, concurrency, metric = series[series_id]
        values[(commit_id, suite, hardware_class)][(concurrency, metric)].append(value)

    low = min(before[0] for before, _ in ranges.values())
    high = max(after[0] for _, after in ranges.values())
    others: list[tuple[int, int | None, int]] = sorted(
        (
            (position, pr_number, commit_id)
            for position, pr_number, commit_id in Commit.objects.filter(
                repository_id__in=repository_ids, position__gt=low, position__lte=high
            )
            .exclude(change_class=_INERT_CHANGE_CLASS)
            .values_list("position", "pr_number", "id")
            if position is not None
        ),
        key=lambda entry: entry[0],
    )
    other_positions = [position for position, _, _ in others]

    impacts: dict[int, list[PullImpact]] = defaultdict(list)
    suites = Suite.objects.in_bulk([suite for suite, _ in scopes], field_name="name")
    noises = series_noises(
        scopes=[(suites[suite].pk, hardware_class) for suite, hardware_class in scopes],
        metrics=HEADLINE_METRICS,
    )
    detection_settings = thresholds_for_suites(suites[suite] for suite, _ in scopes)
    statistics = {
        (suite, hardware_class): ScopeStatistics(
            noise=noises.get((suites[suite].pk, hardware_class), {}),
            suite_id=suites[suite].pk,
            settings=tuple(detection_settings[suites[suite].pk]),
        )
        for suite, hardware_class in scopes
    }
    for pull in placed:
        for suite, hardware_class in scopes:
            pair = ranges.get((pull_key(pull), suite, hardware_class))
            if pair is None:
                continue
            before, after = pair
            in_range = others[
                bisect.bisect_right(other_positions, before[0]) : bisect.bisect_right(
                    other_positions, after[0]
                )
            ]
            other = [entry for entry in in_range if entry[2] != pull.merge_commit_id]
            levels = _level_impacts(
                before=values.get((before[1], suite, hardware_class), {}),
                after=values.get((after[1], suite, hardware_class), {}),
                statistics=statistics[(suite, hardware_class)],
            )
            if not levels:
                continue
            impacts[pull_key(pull)].append(
                PullImpact(
                    suite=suite,
                    hardware_class=hardware_class,
                    before=CommitRef(sha=before[2], position=before[0]),
                    after=CommitRef(sha=after[2], position=after[0]),
                    other_commits=len(other),
                    other_pull_numbers=tuple(
                        number for _, number, _ in other[:OTHER_PULLS_LISTED] if number is not None
                    ),
                    levels=levels,
                )
            )
    return {key: tuple(found) for key, found in impacts.items()}


def _end_values(*, series_ids: list[int], commit_ids: list[int]) -> list[tuple[int, int, float]]:
    """(series id, commit id, value) of the succeeded runs' points of `series_ids` at `commit_ids`. On
    PostgreSQL each (series, commit) is looked up in the (series, commit) covering index: asked for both
    lists at once, the planner read every point of the series (a million for the bench's 90 series) and
    kept the commits' by a filter."""
    if connection.vendor != "postgresql":
        return list(
            Measurement.objects.filter(
                series_id__in=series_ids, commit_id__in=commit_ids, run__status=RunStatus.SUCCEEDED
            ).values_list("series_id", "commit_id", "value")
        )
    sql = f"""
        SELECT m.series_id, m.commit_id, m.value
        FROM unnest(%s::bigint[]) AS wanted_series(id)
        CROSS JOIN unnest(%s::bigint[]) AS wanted_commit(id)
        CROSS JOIN LATERAL (
            SELECT m.series_id, m.commit_id, m.value, m.run_id FROM {Measurement._meta.db_table} m
            WHERE m.series_id = wanted_series.id AND m.commit_id = wanted_commit.id
            OFFSET 0
        ) m
        WHERE (SELECT r.status FROM {Run._meta.db_table} r WHERE r.id = m.run_id) = %s
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [series_ids, commit_ids, RunStatus.SUCCEEDED])
        return cursor.fetchall()


# A PR's figures compare the last benchmarked commit before its merge with the first one containing it,
# looked for this many commits either side: a range any wider holds hundreds of other commits and says
# nothing about one PR, and the search reads around the merge instead of the whole history.
NEIGHBOUR_COMMITS = 128

BenchmarkedCommit = tuple[int, int, str]  # (position, commit id, sha)


def _merge_neighbours(
    *, pulls: Sequence[PullRequest]
) -> dict[tuple[int, str, str], tuple[BenchmarkedCommit, BenchmarkedCommit]]:
    """(pull key, suite, hardware class) -> the benchmarked commits around the PR's merge: the last with a
    succeeded run before the merge commit and the first at or after it, each within NEIGHBOUR_COMMITS.
    Two queries whatever the number of PRs."""
    merges = [
        (pull_key(pull), pull.merge_commit.position, pull.repository_id)  # type: ignore[union-attr]
        for pull in pulls
    ]
    values = ", ".join(["(%s, %s, %s)"] * len(merges))
    around = (
        "c.repository_id = m.repository_id AND c.position >= m.position - %s AND c.position < m.position + %s"
    )
    # On PostgreSQL each merge reads its own neighbours through the commits' (repository, position) index:
    # joined, the planner hashed the commits on their repository and tested every commit against every
    # merge (a million pairs for a tracking issue of 100 PRs).
    neighbours = (
        f"CROSS JOIN LATERAL (SELECT c.id, c.position FROM {Commit._meta.db_table} c WHERE {around} "
        "OFFSET 0) c"
        if connection.vendor == "postgresql"
        else f"JOIN {Commit._meta.db_table} c ON {around}"
    )
    sql = f"""
        WITH merges(pull, position, repository_id) AS (VALUES {values}),
        near AS (
            SELECT m.pull, m.repository_id, r.suite_id, r.hardware_class,
                   max(c.position) FILTER (WHERE c.position < m.position) AS before,
                   min(c.position) FILTER (WHERE c.position >= m.position) AS after
            FROM merges m
            {neighbours}
            JOIN {Run._meta.db_table} r ON r.commit_id = c.id AND r.status = %s
            GROUP BY m.pull, m.repository_id, r.suite_id, r.hardware_class
        )
        -- Grouped by suite id, named after: a name per run row made the grouping a third slower.
        SELECT n.pull, n.repository_id, s.name, n.hardware_class, n.before, n.after
        FROM near n JOIN {Suite._meta.db_table} s ON s.id = n.suite_id
    """
    parameters = [value for merge in merges for value in merge]
    with connection.cursor() as cursor:
        cursor.execute(sql, [*parameters, NEIGHBOUR_COMMITS, NEIGHBOUR_COMMITS, RunStatus.SUCCEEDED])
        found = [row for row in cursor.fetchall() if row[4] is not None and row[5] is not None]
    if not found:
        return {}
    wanted = {(repository_id, position) for _, repository_id, _, _, *ends in found for position in ends}
    commits = {
        (repository_id, position): (position, commit_id, sha)
        for commit_id, repository_id, position, sha in Commit.objects.filter(
            repository_id__in={repository_id for repository_id, _ in wanted},
            position__in={position for _, position in wanted},
        ).values_list("id", "repository_id", "position", "sha")
        if position is not None
    }
    return {
        (pull, suite, hardware_class): (commits[(repository_id, before)], commits[(repository_id, after)])
        for pull, repository_id, suite, hardware_class, before, after in found
    }


# Impacts are kept under a digest of what they are computed from, so a write to any of it is a new key
# and the old entries simply age out; a day bounds how long an unused one is kept.
IMPACTS_CACHE_SECONDS = 24 * 3600


def impacts_version() -> str:
    """A digest that changes whenever a PR's impact could: a run succeeding or being stored, a commit
    synced or placed on main, a PR recorded or given its merge commit. Three queries."""
    runs = Run.objects.aggregate(
        succeeded=Count("pk", filter=Q(status=RunStatus.SUCCEEDED)),
        last=Max("pk"),
        finished=Max("finished_at"),
    )
    commits = Commit.objects.aggregate(count=Count("pk"), placed=Count("position"), last=Max("pk"))
    pulls = PullRequest.objects.aggregate(
        count=Count("pk"), merged=Count("merge_commit"), last=Max("pk"), fetched=Max("fetched_at")
    )
    return hashlib.sha1(repr((runs, commits, pulls)).encode()).hexdigest()[:20]


def pull_impacts_stored(*, pulls: Sequence[PullRequest]) -> dict[int, tuple[PullImpact, ...]]:
    """:func:`pull_impacts`, computed once per state of the data they come from and read from the cache
    by every page and figure after that; only PRs not seen since the last write are computed."""
    version = impacts_version()
    keys = {pull_key(pull): f"pull-impacts:{version}:{pull.pk}" for pull in pulls if pull.pk is not None}
    stored = cache.get_many(list(keys.values()))
    missing = [pull for pull in pulls if keys.get(pull_key(pull)) not in stored]
    computed = pull_impacts(pulls=missing) if missing else {}
    cache.set_many(
        {keys[pull_key(pull)]: computed.get(pull_key(pull), ()) for pull in missing if pull.pk is not None},
        IMPACTS_CACHE_SECONDS,
    )
    found = {key: stored[name] for key, name in keys.items() if name in stored} | computed
    return {key: impacts for key, impacts in found.items() if impacts}


def pull_key(pull: PullRequest) -> int:
    return pull.pk if pull.pk is not None else -pull.number


def _level_impacts(
    *,
    before: dict[tuple[int, str], list[float]],
    after: dict[tuple[int, str], list[float]],
    statistics: ScopeStatistics,
) -> tuple[LevelImpact, ...]:
    levels = sorted({concurrency for concurrency, _ in before.keys() & after.keys()})
    return tuple(
        LevelImpact(
            concurrency=concurrency,
            changes=tuple(
                metric_change(
                    metric=metric,
                    estimate=statistics.change(
                        concurrency=concurrency,
                        metric=metric,
                        before=before[(concurrency, metric)],
                        after=after[(concurrency, metric)],
                    ),
                )
                if (concurrency, metric) in before and (concurrency, metric) in after
                else None
                for metric in HEADLINE_METRICS
            ),
        )
        for concurrency in levels
    )

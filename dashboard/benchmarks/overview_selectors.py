"""Reads for the overview: each suite and hardware class with its latest numbers, their sparklines, and
the commits benchmarked last."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from django.db import connection
from django.db.models import Count, Exists, F, Max, OuterRef, Q, Window
from django.db.models.functions import DenseRank

from dashboard.benchmarks.columns import commit_values
from dashboard.benchmarks.models import (
    HEADLINE_METRICS,
    WHOLE_RUN,
    Commit,
    Measurement,
    Run,
    RunStatus,
    Series,
    Suite,
    main_order,
    main_order_key,
)
from dashboard.benchmarks.selectors import commit_value_of


@dataclass(frozen=True)
class SuiteOverview:
    suite: Suite
    hardware_class: str
    latest_commit: Commit | None
    run_count: int
    latest_values: dict[tuple[str, int], float]


@dataclass(frozen=True)
class PairKey:
    """A suite and hardware class with succeeded runs, before anything else is read of it."""

    suite: Suite
    hardware_class: str

    @property
    def key(self) -> tuple[int, str]:
        return (self.suite.pk, self.hardware_class)


@dataclass(frozen=True)
class OverviewPair(PairKey):
    """A suite and hardware class with succeeded runs, with what its card says of them."""

    run_count: int  # every succeeded run of the pair
    newest_position: int | None  # of its commits on main
    unplaced: int  # its succeeded runs on commits not placed on main yet (they count as the newest)


# Every pair with a succeeded run, one index descent each over the runs' (suite, hardware class, status)
# index (a loose index scan): as many steps as there are pairs, however many runs each has.
_PAIR_KEYS_SQL = f"""
    WITH RECURSIVE pairs AS (
        (SELECT suite_id, hardware_class FROM {Run._meta.db_table} WHERE status = %(succeeded)s
         ORDER BY suite_id, hardware_class LIMIT 1)
        UNION ALL
        SELECT next.suite_id, next.hardware_class FROM pairs CROSS JOIN LATERAL (
            SELECT run.suite_id, run.hardware_class FROM {Run._meta.db_table} run
            WHERE run.status = %(succeeded)s
              AND (run.suite_id, run.hardware_class) > (pairs.suite_id, pairs.hardware_class)
            ORDER BY run.suite_id, run.hardware_class LIMIT 1
        ) next
    )
    SELECT suite_id, hardware_class FROM pairs"""

# A pair's newest commit on main is looked for among this many newest commits on main first (a pair in
# use has run one of them); only a pair idle for longer is read from its own runs.
PAIR_NEWEST_WALK = 500

# Per pair: its succeeded runs counted in the same index; its newest commit on main found by walking the
# commits from the newest down until one has such a run (a subplan per commit, so that the planner cannot
# trade the walk for a read of every run), for PAIR_NEWEST_WALK commits at most, then from its own runs
# (each run's commit looked up, rather than every commit hashed);
# its runs on unplaced commits from those commits (few: synced but not yet placed on main).
_PAIR_SUMMARY_SQL = f"""
    SELECT wanted.suite_id, wanted.hardware_class,
        (SELECT COUNT(*) FROM {Run._meta.db_table} run
         WHERE run.suite_id = wanted.suite_id AND run.hardware_class = wanted.hardware_class
           AND run.status = %(succeeded)s),
        COALESCE(
            (SELECT newest.position FROM (
                 SELECT c.id, c.position FROM {Commit._meta.db_table} c
                 WHERE c.position IS NOT NULL ORDER BY c.position DESC LIMIT %(walk)s
             ) newest
             WHERE (SELECT true FROM {Run._meta.db_table} run
                    WHERE run.commit_id = newest.id AND run.suite_id = wanted.suite_id
                      AND run.hardware_class = wanted.hardware_class AND run.status = %(succeeded)s
                    LIMIT 1)
             ORDER BY newest.position DESC LIMIT 1),
            (SELECT MAX((SELECT c.position FROM {Commit._meta.db_table} c WHERE c.id = run.commit_id))
             FROM {Run._meta.db_table} run
             WHERE run.suite_id = wanted.suite_id AND run.hardware_class = wanted.hardware_class
               AND run.status = %(succeeded)s)
        ),
        (SELECT COUNT(*) FROM {Commit._meta.db_table} c
         JOIN {Run._meta.db_table} run ON run.commit_id = c.id
         WHERE c.position IS NULL AND run.suite_id = wanted.suite_id
           AND run.hardware_class = wanted.hardware_class AND run.status = %(succeeded)s)
    FROM unnest(%(suites)s::bigint[], %(hardware)s::text[]) AS wanted(suite_id, hardware_class)"""


def overview_pair_keys() -> list[PairKey]:
    """Every suite and hardware class with a succeeded run, by suite then hardware class: on PostgreSQL a
    step per pair, not a pass over every run."""
    suites_by_id = {row.pk: row for row in Suite.objects.all()}
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(_PAIR_KEYS_SQL, {"succeeded": RunStatus.SUCCEEDED.value})
            found = cursor.fetchall()
    else:
        found = list(Run.objects.succeeded().values_list("suite_id", "hardware_class").distinct().order_by())
    return [
        PairKey(suite=suites_by_id[suite_id], hardware_class=hardware_class)
        for suite_id, hardware_class in sorted(found)
    ]


def overview_pairs(*, among: Sequence[PairKey] | None = None) -> list[OverviewPair]:
    """Every suite and hardware class with a succeeded run (only those of `among`, when given), by suite
    then hardware class, with its run count and newest commit. Every pair in one pass over the runs; the
    pairs of `among`, on PostgreSQL, through the runs' indexes: a page that shows a few pairs reads those
    pairs' index entries, not every run of the history."""
    if among is not None and connection.vendor == "postgresql":
        return _pairs_summarised(among=among)
    suites_by_id = {row.pk: row for row in Suite.objects.all()}
    runs = Run.objects.succeeded()
    wanted = None if among is None else {pair.key for pair in among}
    if wanted is not None:
        runs = runs.filter(suite_id__in={suite_id for suite_id, _ in wanted})
    return [
        OverviewPair(
            suite=suites_by_id[suite_id],
            hardware_class=hardware_class,
            run_count=count,
            newest_position=newest_position,
            unplaced=unplaced,
        )
        for suite_id, hardware_class, count, newest_position, unplaced in sorted(
            runs.values_list("suite_id", "hardware_class")
            .annotate(
                run_count=Count("id"),
                newest_position=Max("commit__position"),
                # Commits not placed on main yet count as the newest (see main_order).
                unplaced=Count("id", filter=Q(commit__position__isnull=True)),
            )
            .order_by()
        )
        if wanted is None or (suite_id, hardware_class) in wanted
    ]


def _pairs_summarised(*, among: Sequence[PairKey]) -> list[OverviewPair]:
    """`overview_pairs` of `among` on PostgreSQL: one statement, a few index reads per pair."""
    if not among:
        return []
    ordered = sorted(among, key=lambda pair: pair.key)
    with connection.cursor() as cursor:
        cursor.execute(
            _PAIR_SUMMARY_SQL,
            {
                "succeeded": RunStatus.SUCCEEDED.value,
                "walk": PAIR_NEWEST_WALK,
                "suites": [pair.suite.pk for pair in ordered],
                "hardware": [pair.hardware_class for pair in ordered],
            },
        )
        found = {(suite_id, hardware): rest for suite_id, hardware, *rest in cursor.fetchall()}
    return [
        OverviewPair(
            suite=pair.suite,
            hardware_class=pair.hardware_class,
            run_count=count,
            newest_position=newest_position,
            unplaced=unplaced,
        )
        for pair in ordered
        for count, newest_position, unplaced in [found[pair.key]]
        if count
    ]


def suites_overview(*, pairs: Sequence[OverviewPair] | None = None) -> list[SuiteOverview]:
    """For each of `pairs` (default: every suite and hardware class with data), in their order: latest
    headline values, and the suite's whole-run headline (such as a load curve's capacity) where it has
    one. A fixed number of queries."""
    pairs = overview_pairs() if pairs is None else pairs
    newest = _newest_on_main(pairs=pairs)
    # The latest commit's value is the median of all its succeeded runs, as on every other page.
    samples: dict[tuple[int, str], dict[tuple[str, int], list[float]]] = defaultdict(
        lambda: defaultdict(list)
    )
    # A suite whose headline is a whole-run figure (a load curve's capacity) has that at level 0 too.
    whole_run = {metric for pair in pairs if (metric := pair.suite.headline_metric) is not None} - set(
        HEADLINE_METRICS
    )
    rows = (
        Measurement.objects.filter(
            Q(series__metric__in=HEADLINE_METRICS)
            | Q(series__metric__in=whole_run, series__concurrency=WHOLE_RUN),
            run_id__in=[pk for found in newest.values() for pk in found.run_ids],
        )
        .values_list("run__suite_id", "run__hardware_class", "series__metric", "series__concurrency", "value")
        .order_by()
    )
    for suite_id, hardware_class, metric, concurrency, value in rows:
        samples[(suite_id, hardware_class)][(metric, concurrency)].append(value)
    return [
        SuiteOverview(
            suite=pair.suite,
            hardware_class=pair.hardware_class,
            latest_commit=newest[pair.key].commit,
            run_count=pair.run_count,
            latest_values={key: commit_value_of(values) for key, values in samples[pair.key].items()},
        )
        for pair in pairs
        if pair.key in newest
    ]


@dataclass(frozen=True)
class _Newest:
    commit: Commit
    run_ids: tuple[int, ...]  # the succeeded runs of the pair on that commit


def _newest_on_main(*, pairs: Sequence[OverviewPair]) -> dict[tuple[int, str], _Newest]:
    """Per pair: the newest commit on main among its succeeded runs (not the one measured last:
    verification and bisection re-run older commits long after newer ones). One query over the runs on
    the pairs' newest commits: a newest-commit subquery per run would sort a pair's whole history once
    for every run of it."""
    by_key = {pair.key: pair for pair in pairs}
    if not by_key:
        return {}
    positions = {pair.newest_position for pair in pairs if not pair.unplaced}
    candidates: dict[tuple[int, str], list[Run]] = defaultdict(list)
    for run in (
        Run.objects.succeeded()
        .filter(suite_id__in={pair.suite.pk for pair in pairs})
        .filter(Q(commit__position__in=positions) | Q(commit__position__isnull=True))
        .select_related("commit__repository")
    ):
        pair = by_key.get((run.suite_id, run.hardware_class))
        if pair is None:
            continue
        if pair.unplaced if run.commit.position is None else run.commit.position == pair.newest_position:
            candidates[pair.key].append(run)
    newest = {}
    for key, runs in candidates.items():
        commit = max(
            (run.commit for run in runs),
            key=lambda c: main_order_key(position=c.position, committed_at=c.committed_at, commit_id=c.pk),
        )
        newest[key] = _Newest(
            commit=commit, run_ids=tuple(run.pk for run in runs if run.commit_id == commit.pk)
        )
    return newest


@dataclass(frozen=True)
class SparklineSeries:
    """A series' recent values in main order, oldest first: all a sparkline draws."""

    metric: str
    concurrency: int
    values: tuple[float, ...]


def suites_sparklines(
    *, metric: str = "output_throughput_tok_s", last: int = 300, pairs: Sequence[OverviewPair] | None = None
) -> dict[tuple[int, str], SparklineSeries]:
    """Per (suite id, hardware class), of `pairs` when given: `metric` at its highest concurrency over the
    last `last` benchmarked commits, oldest first, each the median of its runs. Two queries whatever the
    number of suites (three when a pair was benchmarked too sparsely for its recent commits to hold
    them)."""
    series_rows = Series.objects.filter(metric=metric)
    wanted = None if pairs is None else {pair.key for pair in pairs}
    if wanted is not None:
        series_rows = series_rows.filter(suite_id__in={suite_id for suite_id, _ in wanted})
    highest: dict[tuple[int, str], tuple[int, int]] = {}
    for series_id, suite_id, hardware_class, concurrency in series_rows.values_list(
        "id", "suite_id", "hardware_class", "concurrency"
    ):
        if wanted is not None and (suite_id, hardware_class) not in wanted:
            continue
        if (suite_id, hardware_class) not in highest or concurrency > highest[(suite_id, hardware_class)][1]:
            highest[(suite_id, hardware_class)] = (series_id, concurrency)
    if not highest:
        return {}
    rows = _sparkline_rows(highest=highest, last=last, pairs=pairs)
    # Tens of thousands of points: folded as columns (one rank is one commit), not point by point.
    table = np.array(rows, dtype=np.float64).reshape(len(rows), 3)
    series_ids = table[:, 0].astype(np.int64)
    # Oldest first: the highest rank of a series is its oldest commit.
    keys, values, *_ = commit_values(
        series_ids * (last + 1) + (last - table[:, 1].astype(np.int64)), table[:, 2]
    )
    by_series: dict[int, list[float]] = defaultdict(list)
    for series_id, value in zip((keys // (last + 1)).tolist(), values.tolist(), strict=True):
        by_series[series_id].append(value)
    return {
        key: SparklineSeries(metric=metric, concurrency=concurrency, values=tuple(by_series[series_id]))
        for key, (series_id, concurrency) in highest.items()
    }


# A sparkline reads its series from this many times `last` commits before the pair's newest on main: a pair
# benchmarked at least one commit in SPARKLINE_SPAN reads only those (the same points whatever the
# history's length); one benchmarked more sparsely is read again whole.
SPARKLINE_SPAN = 4


def _sparkline_rows(
    *, highest: dict[tuple[int, str], tuple[int, int]], last: int, pairs: Sequence[OverviewPair] | None
) -> list[tuple[Any, ...]]:
    """The sparkline points (see `_sparkline_points`) of the series in `highest`: those of a long
    history from their pair's recent commits (where `pairs` says where they are), the others, and those
    whose recent commits held fewer than `last` benchmarked ones, whole. Two queries at most."""
    newest = {
        pair.key: pair.newest_position
        for pair in pairs or ()
        if not pair.unplaced and pair.newest_position is not None
    }
    since = {
        series_id: newest[key] - SPARKLINE_SPAN * last
        for key, (series_id, _) in highest.items()
        if newest.get(key, 0) > SPARKLINE_SPAN * last
    }
    rows = []
    if since:
        bounded = list(since)
        rows = _sparkline_points(series_ids=bounded, last=last, since=[since[pk] for pk in bounded])
    deepest: dict[int, int] = defaultdict(int)
    for series_id, recency, _ in rows:
        deepest[series_id] = max(deepest[series_id], recency)
    short = {pk for pk in since if deepest[pk] < last}
    rows = [row for row in rows if row[0] not in short]
    whole = [series_id for series_id, _ in highest.values() if series_id not in since or series_id in short]
    if whole:
        rows += _sparkline_points(series_ids=whole, last=last)
    return rows


def _sparkline_points(
    *, series_ids: list[int], last: int, since: list[int] | None = None, portable: bool = False
) -> list[tuple[Any, ...]]:
    """(series id, recency, value) of every succeeded run's point of the series on its last `last`
    benchmarked commits, recency 1 the newest; `portable` takes the ORM's statement on PostgreSQL too.
    `since` (a position per series) reads only the commits from there on and those not placed yet: the
    same points wherever those hold `last` benchmarked commits of the series."""
    if connection.vendor == "postgresql" and not portable:
        # Each series through its covering index (series, commit): the planner, misjudging how many
        # points 500 series have, otherwise scans the whole measurement table. From `since`, the recent
        # commits (from the earliest `since` on, and those not placed yet) are read once, and each series
        # reads only its index entries from the oldest id among its own recent commits: a superset of
        # their points whatever the ids' order, and no more than them where commits are stored in the
        # order they land on main (as sync stores them), rather than the whole history's points hashed
        # against the commits for 300 of them.
        recent = f"""
            WITH recent AS MATERIALIZED (
                SELECT c.id, c.position, c.committed_at FROM {Commit._meta.db_table} c
                WHERE c.position >= (SELECT MIN(since) FROM unnest(%s::int[]) AS earliest(since))
                   OR c.position IS NULL
            )
            SELECT m.series_id, m.commit_id, m.run_id, m.value, c.position, c.committed_at
            FROM unnest(%s::bigint[], %s::int[]) AS wanted(id, since)
            CROSS JOIN LATERAL (
                SELECT MIN(recent.id) AS id FROM recent
                WHERE recent.position >= wanted.since OR recent.position IS NULL
            ) oldest
            CROSS JOIN LATERAL (
                SELECT m.series_id, m.commit_id, m.run_id, m.value FROM {Measurement._meta.db_table} m
                WHERE m.series_id = wanted.id AND m.commit_id >= oldest.id
                  AND m.value > '-Infinity'::float8 AND m.value < 'Infinity'::float8
                OFFSET 0
            ) m
            JOIN recent c ON c.id = m.commit_id
            WHERE c.position >= wanted.since OR c.position IS NULL"""
        whole = f"""
            SELECT m.series_id, m.commit_id, m.run_id, m.value, c.position, c.committed_at
            FROM unnest(%s::bigint[]) AS wanted(id)
            CROSS JOIN LATERAL (
                SELECT m.series_id, m.commit_id, m.run_id, m.value FROM {Measurement._meta.db_table} m
                WHERE m.series_id = wanted.id
                  AND m.value > '-Infinity'::float8 AND m.value < 'Infinity'::float8
                OFFSET 0
            ) m
            JOIN {Commit._meta.db_table} c ON c.id = m.commit_id"""
        sql = f"""
            SELECT series_id, recency, value FROM (
                SELECT m.series_id, m.value, dense_rank() OVER (
                    PARTITION BY m.series_id
                    ORDER BY m.position DESC NULLS FIRST, m.committed_at DESC NULLS FIRST, m.commit_id DESC
                ) AS recency
                FROM ({whole if since is None else recent}) m
                -- A lookup per point (a few thousand): a join lets the planner hash every run there is.
                WHERE (SELECT r.status FROM {Run._meta.db_table} r WHERE r.id = m.run_id) = %s
            ) ranked
            WHERE recency <= %s
        """
        reads: list[Any] = [series_ids] if since is None else [since, series_ids, since]
        params: Any = [*reads, RunStatus.SUCCEEDED, last]
    else:
        query = (
            Measurement.objects.filter(series_id__in=series_ids, run__status=RunStatus.SUCCEEDED)
            .annotate(
                recency=Window(
                    DenseRank(),
                    partition_by=[F("series_id")],
                    order_by=main_order(prefix="commit__", newest_first=True),
                )
            )
            .filter(recency__lte=last)
            .values_list("series_id", "recency", "value")
        )
        sql, params = query.query.sql_with_params()
    # Straight through the cursor: tens of thousands of rows of three numbers need no converters.
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


@dataclass(frozen=True)
class BenchmarkedCommit:
    commit: Commit
    runs_succeeded: int
    runs_failed: int
    last_finished_at: datetime | None


def commits_recently_benchmarked(*, limit: int = 12) -> list[BenchmarkedCommit]:
    """The newest commits on main with a finished run, newest first. Two queries: the commits, walked
    newest first until `limit` have a finished run (an index scan, not a sort of every run), then their
    run counts."""
    finished = (RunStatus.SUCCEEDED, RunStatus.FAILED)
    commits = list(
        Commit.objects.filter(Exists(Run.objects.filter(commit=OuterRef("pk"), status__in=finished)))
        .select_related("repository")
        .order_by(*main_order(newest_first=True))[:limit]
    )
    counts = {
        row["commit_id"]: row
        for row in Run.objects.filter(commit__in=commits, status__in=finished)
        .values("commit_id")
        .annotate(
            succeeded=Count("pk", filter=Q(status=RunStatus.SUCCEEDED)),
            failed=Count("pk", filter=Q(status=RunStatus.FAILED)),
            last_finished_at=Max("finished_at"),
        )
        .order_by()
    }
    return [
        BenchmarkedCommit(
            commit=commit,
            runs_succeeded=counts[commit.pk]["succeeded"],
            runs_failed=counts[commit.pk]["failed"],
            last_finished_at=counts[commit.pk]["last_finished_at"],
        )
        for commit in commits
    ]

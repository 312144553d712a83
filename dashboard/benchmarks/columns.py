"""A suite's timelines as columns (numpy arrays), read in one query: what charts and the series API draw.

A commit's value is the median of its runs, with their lowest and highest: `commit_values` is
the one place that rule is applied to columns, the vectorised form of
dashboard.benchmarks.statistics.commit_value for whole timelines at once (a test keeps them equal).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

import numpy as np
import numpy.typing as npt
from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import F, Min, Q, QuerySet
from django.db.models.functions import Coalesce, TruncDate

from dashboard.benchmarks.bulk import numbers_read
from dashboard.benchmarks.models import (
    WHOLE_RUN,
    Commit,
    Measurement,
    Run,
    RunStatus,
    Series,
    Suite,
    main_order,
)
from dashboard.benchmarks.statistics import commit_value

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]


@dataclass(frozen=True)
class SeriesColumns:
    """One line of a chart: per benchmarked commit (in main order) its x, value, run count and
    the range of its runs."""

    metric: str
    concurrency: int
    commit_ids: Ints
    x: Floats
    values: Floats
    runs: Ints
    lowest: Floats  # of the commit's runs; the value is their median
    highest: Floats


@dataclass(frozen=True)
class TimelineColumns:
    series: tuple[SeriesColumns, ...]
    # x is the position on main (gaps show unbenchmarked commits) when every commit has one, else a rank.
    by_position: bool


@dataclass(frozen=True)
class CommitFacts:
    sha: str
    subject: str
    pr_number: int | None
    committed_at: datetime | None


def commit_values(groups: Ints, values: Floats) -> tuple[Ints, Floats, Ints, Floats, Floats]:
    """Per distinct `groups` key (rows of one series and commit share one): (key, median of its values,
    how many, lowest, highest). Vectorised: one sort, whatever the number of repeats."""
    if len(groups) == 0:
        empty = np.zeros(0)
        return np.zeros(0, dtype=np.int64), empty, np.zeros(0, dtype=np.int64), empty, empty
    order = np.lexsort((values, groups))
    keys, sorted_values = groups[order], values[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    counts = np.diff(np.r_[starts, len(keys)])
    lower = sorted_values[starts + (counts - 1) // 2]
    upper = sorted_values[starts + counts // 2]
    return (
        keys[starts],
        (lower + upper) / 2,
        counts,
        sorted_values[starts],
        sorted_values[starts + counts - 1],
    )


def _identities(
    *, suite: Suite, hardware_class: str, metrics: tuple[str, ...], concurrencies: tuple[int, ...]
) -> dict[int, tuple[str, int]]:
    """Series id -> (metric, concurrency) of the series a timeline of these filters draws."""
    series_rows = Series.objects.filter(suite=suite, hardware_class=hardware_class, metric__in=metrics)
    if concurrencies:
        # Whole-run metrics (capacity, accuracy) have no level and are drawn whatever levels are picked.
        series_rows = series_rows.filter(concurrency__in=(WHOLE_RUN, *concurrencies))
    return {
        pk: (metric, level) for pk, metric, level in series_rows.values_list("pk", "metric", "concurrency")
    }


def _measurements(
    *, suite: Suite, hardware_class: str, series_ids: list[int], date_from: date | None, date_to: date | None
) -> QuerySet[Measurement]:
    """Measurements of these series by succeeded runs whose commit's UTC day is within the dates.

    A window is a range of commit times, not a test on each row's day: its commits are found first (one
    query, an index range) and the rows asked for by commit."""
    measurements = Measurement.objects.filter(series_id__in=series_ids)
    if date_from or date_to:
        # Each of the window's rows checks its own run, rather than every run of the suite being read.
        return measurements.filter(
            commit_id__in=_window_commits(date_from=date_from, date_to=date_to),
            run__suite=suite,
            run__hardware_class=hardware_class,
            run__status=RunStatus.SUCCEEDED,
        )
    # The whole history: succeeded runs of the suite and class (an index range) rather than a join.
    succeeded = Run.objects.filter(suite=suite, hardware_class=hardware_class, status=RunStatus.SUCCEEDED)
    return measurements.filter(run_id__in=succeeded.values("pk"))


def _window_ids(*, low: int, high: int) -> Q:
    """The commit ids a window of positions [low, high] on main (and the commits not placed yet) can hold,
    as a condition on a measurement's commit id: from the lowest to the highest id in the window, which
    the series' index (series, commit) reads as a range. A superset whatever the ids' order, and little
    more than the window where commits are stored in the order they land on main (as sync stores them),
    rather than the whole history's points joined to the window's commits. One query, of the window's
    commits."""
    found = list(
        Commit.objects.filter(Q(position__gte=low, position__lte=high) | Q(position__isnull=True))
        .order_by()
        .values_list("pk", "position")
    )
    placed = [pk for pk, position in found if position is not None]
    unplaced = [pk for pk, position in found if position is None]
    within = Q(commit_id__gte=min(placed), commit_id__lte=max(placed)) if placed else Q(pk__in=[])
    return within | Q(commit_id__in=unplaced) if unplaced else within


def _utc_midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _rows(
    *,
    suite: Suite,
    hardware_class: str,
    series_ids: list[int],
    date_from: date | None,
    date_to: date | None,
    x_range: tuple[float, float] | None,
) -> Floats:
    """(series id, commit id, position or -1, value) per measurement, as a float array."""
    measurements = _measurements(
        suite=suite,
        hardware_class=hardware_class,
        series_ids=series_ids,
        date_from=date_from,
        date_to=date_to,
    )
    if x_range is not None:
        low, high = int(np.floor(x_range[0])), int(np.ceil(x_range[1]))
        measurements = measurements.filter(
            Q(commit__position__gte=low, commit__position__lte=high) | Q(commit__position__isnull=True)
        ).filter(_window_ids(low=low, high=high))
    query = (
        measurements.order_by()
        .annotate(known_position=Coalesce(F("commit__position"), -1))
        .values_list("series_id", "commit_id", "known_position", "value")
    )
    # Straight into one array: 100,000 rows of four numbers need no model machinery, nor a tuple each.
    try:
        sql, params = query.query.sql_with_params()
    except EmptyResultSet:  # a window without a commit
        return np.empty((0, 4), dtype=np.float64)
    return numbers_read(sql=sql, params=params, width=4)


def _ranks(commit_ids: Iterable[int]) -> dict[int, float]:
    """Rank of each commit in main order (position, then commit time, then arrival), for histories
    whose positions are not all known yet."""
    rows = Commit.objects.filter(pk__in=list(commit_ids)).values_list("pk", "position", "committed_at")
    ordered = sorted(
        rows,
        key=lambda row: (
            row[1] is None,
            row[1] or 0,
            row[2].timestamp() if row[2] else float("inf"),
            row[0],
        ),
    )
    return {pk: float(rank) for rank, (pk, _, _) in enumerate(ordered)}


def timeline_columns(
    *,
    suite: Suite,
    hardware_class: str,
    metrics: tuple[str, ...],
    date_from: date | None = None,
    date_to: date | None = None,
    concurrencies: tuple[int, ...] = (),
    x_range: tuple[float, float] | None = None,
) -> TimelineColumns:
    """Per (metric, concurrency), ordered by metric as given then concurrency: one point per benchmarked
    commit of succeeded runs, repeats folded by `commit_values`. `x_range` keeps the commits whose
    position on main falls in it. Two queries (three when some commit has no position yet)."""
    identities = _identities(
        suite=suite, hardware_class=hardware_class, metrics=metrics, concurrencies=concurrencies
    )
    if not identities:
        return TimelineColumns(series=(), by_position=True)
    table = _rows(
        suite=suite,
        hardware_class=hardware_class,
        series_ids=list(identities),
        date_from=date_from,
        date_to=date_to,
        x_range=x_range,
    )
    if x_range is not None and (table[:, 2] < 0).any():
        # Ranks need the whole history: the range is cut from it below.
        table = _rows(
            suite=suite,
            hardware_class=hardware_class,
            series_ids=list(identities),
            date_from=date_from,
            date_to=date_to,
            x_range=None,
        )
    if not len(table):
        return TimelineColumns(series=(), by_position=True)
    series_ids, commit_ids, positions = (table[:, index].astype(np.int64) for index in range(3))
    values = table[:, 3]
    by_position = bool((positions >= 0).all())
    stride = int(commit_ids.max()) + 1
    keys, medians, counts, lowest, highest = commit_values(series_ids * stride + commit_ids, values)
    key_series, key_commits = keys // stride, keys % stride
    if by_position:
        # Looked up as arrays: a dict of a hundred thousand points would be as many Python objects.
        known, first = np.unique(commit_ids, return_index=True)
        xs = positions[first][np.searchsorted(known, key_commits)].astype(np.float64)
    else:
        x_of_commit = _ranks(set(commit_ids.tolist()))
        xs = np.fromiter((x_of_commit[c] for c in key_commits.tolist()), dtype=np.float64, count=len(keys))
    if x_range is not None and not by_position:
        inside = (xs >= x_range[0]) & (xs <= x_range[1])
        key_series, key_commits, xs = key_series[inside], key_commits[inside], xs[inside]
        medians, counts, lowest, highest = medians[inside], counts[inside], lowest[inside], highest[inside]
    order = np.lexsort((xs, key_series))
    key_series, key_commits, xs = key_series[order], key_commits[order], xs[order]
    medians, counts, lowest, highest = medians[order], counts[order], lowest[order], highest[order]
    bounds = np.flatnonzero(np.r_[True, key_series[1:] != key_series[:-1], True])
    result = []
    for start, end in itertools.pairwise(bounds.tolist()):
        metric, level = identities[int(key_series[start])]
        result.append(
            SeriesColumns(
                metric=metric,
                concurrency=level,
                commit_ids=key_commits[start:end],
                x=xs[start:end],
                values=medians[start:end],
                runs=counts[start:end],
                lowest=lowest[start:end],
                highest=highest[start:end],
            )
        )
    result.sort(key=lambda item: (metrics.index(item.metric), item.concurrency))
    return TimelineColumns(series=tuple(result), by_position=by_position)


def _array_literal(ids: list[int]) -> str:
    """Whole numbers as one PostgreSQL array literal: the driver adapts a list of ten thousand numbers
    one element at a time, slower than the query that reads them."""
    return "{" + ",".join(map(str, ids)) + "}"


def commits_facts(*, commit_ids: Iterable[int]) -> dict[int, CommitFacts]:
    """What a chart's hover says about each commit. One query."""
    ids = sorted(set(commit_ids))
    fields = ("pk", "sha", "subject", "pr_number", "committed_at")
    if connection.vendor == "postgresql":
        # One array parameter: ten thousand IN placeholders cost more to parse and plan than to read.
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT id, sha, subject, pr_number, committed_at FROM {Commit._meta.db_table} "
                "WHERE id = ANY(%s::bigint[])",
                [_array_literal(ids)],
            )
            found = cursor.fetchall()
    else:
        found = list(Commit.objects.filter(pk__in=ids).values_list(*fields))
    return {
        pk: CommitFacts(sha=sha, subject=subject, pr_number=pr_number, committed_at=committed_at)
        for pk, sha, subject, pr_number, committed_at in found
    }


def iso_utc_sql(column: str) -> str:
    """PostgreSQL text of a timestamp `column` as datetime.isoformat() writes it in UTC (microseconds
    only when there are some): formatted by the server, which costs less than a datetime per row."""
    utc = f"{column} AT TIME ZONE 'UTC'"
    return (
        f"to_char({utc}, 'YYYY-MM-DD\"T\"HH24:MI:SS') || CASE WHEN date_trunc('second', {column}) = "
        f"{column} THEN '' ELSE to_char({utc}, '.US') END || '+00:00'"
    )


# (commit sha, commit time in ISO 8601, PR number, value, runs): one point of the series API.
PointRow = tuple[str, str | None, int | None, float, int]


@dataclass(frozen=True)
class SeriesPoints:
    metric: str
    concurrency: int
    points: list[PointRow]


def _window_commits(*, date_from: date | None, date_to: date | None) -> list[int]:
    """The commits whose UTC day lies within the dates: an index range over commit times."""
    window = Commit.objects.all()
    if date_from:
        window = window.filter(committed_at__gte=datetime.combine(date_from, time.min, tzinfo=UTC))
    if date_to:
        window = window.filter(
            committed_at__lt=datetime.combine(date_to + timedelta(days=1), time.min, tzinfo=UTC)
        )
    return list(window.values_list("pk", flat=True))


def _series_rows_sql(
    *, suite: Suite, hardware_class: str, series_ids: list[int], date_from: date | None, date_to: date | None
) -> list[tuple]:
    """(series id, commit id, sha, PR number, value, committed_at text) of each measurement of these series
    by a succeeded run of the suite on the class, ordered by series and main's order: one statement, the
    time formatted by the server. A window reads each of its commits' rows through the index, one commit
    at a time (a LATERAL join), and nothing outside it."""
    commit_table, run_table = Commit._meta.db_table, Run._meta.db_table
    measurement_table = Measurement._meta.db_table
    parameters: dict[str, int | str | list[int] | list[str]] = {
        "series": series_ids,
        "suite": suite.pk,
        "hardware": hardware_class,
    }
    if date_from or date_to:
        parameters["commits"] = _window_commits(date_from=date_from, date_to=date_to)
        source = (
            "unnest(%(commits)s::bigint[]) AS w(commit_id) CROSS JOIN LATERAL ("
            f"SELECT * FROM {measurement_table} one "
            # OFFSET 0 keeps the subquery a subquery: flattened, the planner may hash the series' every row.
            "WHERE one.series_id = ANY(%(series)s) AND one.commit_id = w.commit_id OFFSET 0) m"
        )
    else:
        source = f"{measurement_table} m"
    # A series' rows are all of its suite and class: what is left to check is that their run succeeded.
    # The few runs of the scope that did not are excluded by id (once, as an init plan), so each row is
    # judged on the covering index alone rather than by a join to its run.
    parameters["unfinished"] = [status for status in RunStatus.values if status != RunStatus.SUCCEEDED]
    sql = (
        f"SELECT m.series_id, m.commit_id, c.sha, c.pr_number, m.value, {iso_utc_sql('c.committed_at')} "
        f"FROM {source} JOIN {commit_table} c ON c.id = m.commit_id "
        "WHERE m.series_id = ANY(%(series)s) AND m.run_id <> ALL(ARRAY("
        f"SELECT r.id FROM {run_table} r WHERE r.suite_id = %(suite)s AND r.hardware_class = %(hardware)s "
        "AND r.status = ANY(%(unfinished)s))) "
        "ORDER BY m.series_id, c.position NULLS LAST, c.committed_at NULLS LAST, c.id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, parameters)
        return cursor.fetchall()


def series_points(
    *,
    suite: Suite,
    hardware_class: str,
    metrics: tuple[str, ...],
    date_from: date | None = None,
    date_to: date | None = None,
    concurrencies: tuple[int, ...] = (),
) -> list[SeriesPoints]:
    """The points of timeline_columns with the commit each names, for the series API: one per benchmarked
    commit of succeeded runs in main order, repeats folded by the median. Two queries: the series, then
    their measurements with their commits, in order, so that one pass over the rows shapes them."""
    identities = _identities(
        suite=suite, hardware_class=hardware_class, metrics=metrics, concurrencies=concurrencies
    )
    if not identities:
        return []
    if connection.vendor == "postgresql":
        rows = _series_rows_sql(
            suite=suite,
            hardware_class=hardware_class,
            series_ids=list(identities),
            date_from=date_from,
            date_to=date_to,
        )
    else:
        measurements = _measurements(
            suite=suite,
            hardware_class=hardware_class,
            series_ids=list(identities),
            date_from=date_from,
            date_to=date_to,
        ).order_by("series_id", *main_order(prefix="commit__"))
        rows = [
            (*row, at.isoformat() if at else None)
            for *row, at in measurements.values_list(
                "series_id", "commit_id", "commit__sha", "commit__pr_number", "value", "commit__committed_at"
            )
        ]
    # Rows of one series and commit (a commit's runs) are neighbours: a repeat folds into the point before.
    points: dict[int, list[PointRow]] = {}
    shown: list[PointRow] = []
    previous: tuple[int, int] = (-1, -1)
    runs: list[float] = []
    for series_id, commit_id, sha, pr_number, value, at in rows:
        if commit_id == previous[1] and series_id == previous[0]:
            runs.append(value)
            shown[-1] = (sha, at, pr_number, commit_value(runs).value, len(runs))
            continue
        if series_id != previous[0]:
            shown = points.setdefault(series_id, [])
        previous, runs = (series_id, commit_id), [value]
        shown.append((sha, at, pr_number, value, 1))
    result = [
        SeriesPoints(metric=identities[pk][0], concurrency=identities[pk][1], points=found)
        for pk, found in points.items()
    ]
    result.sort(key=lambda item: (metrics.index(item.metric), item.concurrency))
    return result


def commit_days(*, commit_id: int, low: float, high: float) -> list[tuple[float, date]]:
    """(position, day) of the first commit of each day between positions `low` and `high` on the main
    branch of `commit_id`'s repository: what a thinned chart labels its axis with. One query."""
    rows = (
        Commit.objects.filter(
            repository_id__in=Commit.objects.filter(pk=commit_id).values("repository_id"),
            position__gte=int(np.floor(low)),
            position__lte=int(np.ceil(high)),
            committed_at__isnull=False,
        )
        .annotate(day=TruncDate("committed_at"))
        .values("day")
        .annotate(first=Min("position"))
        .order_by("first")
        .values_list("first", "day")
    )
    return [(float(first), day) for first, day in rows]


def commit_positions(*, shas: Iterable[str]) -> dict[str, float]:
    """Position on main of each of these commits that has one. One query."""
    rows = Commit.objects.filter(sha__in=sorted(set(shas)), position__isnull=False).values_list(
        "sha", "position"
    )
    return {sha: float(position or 0) for sha, position in rows}

"""Reads for detection: the window of benchmarked commits around a run, and every series' values over it.

A commit's value is the median of its succeeded runs (`statistics.commit_value`), the one rule every
page and the detector use.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from django.conf import settings
from django.db import connection
from django.db.models import Exists, OuterRef, Q

from dashboard.benchmarks.models import (
    Commit,
    Measurement,
    Run,
    RunStatus,
    Series,
    main_order,
    main_order_key,
)
from dashboard.benchmarks.statistics import CommitValue, commit_value


@dataclass(frozen=True)
class WindowCommit:
    commit_id: int
    position: int | None


@dataclass(frozen=True)
class CommitWindow:
    """Benchmarked commits of a suite on a hardware class, in main order; whether the window reaches the
    oldest and the newest of them."""

    commits: tuple[WindowCommit, ...]
    at_start: bool
    at_end: bool


@dataclass(frozen=True)
class SeriesPoint:
    """One benchmarked commit of a series: the median of its runs, and how many there were."""

    commit_id: int
    position: int | None
    value: float
    runs: int = 1


@dataclass(frozen=True)
class SeriesWindow:
    points: tuple[SeriesPoint, ...]
    at_series_start: bool
    at_series_end: bool


def commit_window(
    *, suite_id: int, hardware_class: str, commit_id: int | None = None, size: int | None = None
) -> CommitWindow:
    """At most `size` benchmarked commits around `commit_id`: up to half of them after it, the rest up to
    it; without a commit (or for the newest) the trailing window.

    Only the window is read: each side is an index walk in main order from the commit that stops after
    the commits it needs, so the cost does not grow with the history. Every series of the suite and
    hardware class is analysed over this one list, so a run's series all see the same commits even
    while other runs are being stored.
    """
    size = size or settings.PERFWATCH_DETECTION_WINDOW
    benchmarked = Commit.objects.filter(
        Exists(
            Run.objects.filter(
                commit_id=OuterRef("pk"),
                suite_id=suite_id,
                hardware_class=hardware_class,
                status=RunStatus.SUCCEEDED,
            )
        )
    )
    fields = ("pk", "position", "committed_at")
    target = benchmarked.filter(pk=commit_id).values_list(*fields).first() if commit_id is not None else None
    if target is None:
        # The trailing window: the newest commits, and one more to tell whether it reaches the oldest.
        newest = benchmarked.order_by(*main_order(newest_first=True)).values_list(*fields)[: size + 1]
        ordered = list(reversed(newest))
        return _window_around(ordered=ordered, target=len(ordered) - 1, size=size)
    if target[1] is None:
        # A commit off main's history sorts after all of it: rare, so the whole list is read.
        ordered = list(benchmarked.order_by(*main_order()).values_list(*fields))
        return _window_around(ordered=ordered, target=ordered.index(target), size=size)
    position = target[1]
    # Strictly before and strictly after the commit's position, each one beyond what a window can hold,
    # so that a side cut short here is one the window does not reach the end of. Commits of another
    # repository can share the position: they are ordered among themselves in Python.
    older = benchmarked.filter(position__lt=position).order_by(*main_order(newest_first=True))
    newer = benchmarked.filter(Q(position__gt=position) | Q(position__isnull=True)).order_by(*main_order())
    level = sorted(benchmarked.filter(position=position).values_list(*fields), key=_main_key)
    ordered = [
        *reversed(older.values_list(*fields)[: size + 1]),
        *level,
        *newer.values_list(*fields)[: size // 2 + 1],
    ]
    return _window_around(ordered=ordered, target=ordered.index(target), size=size)


def _main_key(commit: tuple[int, int | None, datetime | None]) -> tuple[bool, int, float, int]:
    return main_order_key(position=commit[1], committed_at=commit[2], commit_id=commit[0])


def _window_around(
    *, ordered: Sequence[tuple[int, int | None, datetime | None]], target: int, size: int
) -> CommitWindow:
    """The window of `size` around `ordered[target]` (up to half of it after), from benchmarked commits in
    main order that hold at least the window and, where there are any, one more on each side."""
    if not ordered:
        return CommitWindow(commits=(), at_start=True, at_end=True)
    newer = min(size // 2, len(ordered) - 1 - target)
    end = target + newer + 1
    start = max(0, end - size)
    return CommitWindow(
        commits=tuple(
            WindowCommit(commit_id=pk, position=position) for pk, position, _ in ordered[start:end]
        ),
        at_start=start == 0,
        at_end=end == len(ordered),
    )


# From this many commits on, a window is read as its series' whole history (see `_succeeded_runs`).
WHOLE_HISTORY_COMMITS = 2_000


def _window_rows(
    *, series_ids: Sequence[int], commit_ids: Sequence[int]
) -> tuple[list[tuple[int, int, int, float]], set[int]]:
    """(series, commit, run, value) of the series' points at the commits (a whole history's read also
    holds the series' other commits), and which of their runs succeeded.

    Two queries whatever the number of series: the points from the covering index of measurements
    (no table rows read), then the status of the few runs behind them, so the thousands of points of a
    window are not each joined to their run.
    """
    fields = ("series_id", "commit_id", "run_id", "value")
    if connection.vendor == "postgresql":
        # Array parameters: with IN lists the planner scans every point of the series and filters the
        # commits, instead of descending the index to each (series, commit) pair. For a whole history the
        # series' own points are read and the commits kept here: one index range per series rather than
        # one descent per point (a rescan of 10,000 commits: 0.5 s against 2.9 s).
        whole = len(commit_ids) >= WHOLE_HISTORY_COMMITS
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {', '.join(fields)} FROM {Measurement._meta.db_table} WHERE series_id = ANY(%s)"
                + ("" if whole else " AND commit_id = ANY(%s)"),
                [list(series_ids)] if whole else [list(series_ids), list(commit_ids)],
            )
            rows = cursor.fetchall()
            # An array parameter again: the runs of a whole history are thousands, which an IN list
            # binds one at a time.
            cursor.execute(
                f"SELECT id FROM {Run._meta.db_table} WHERE id = ANY(%s) AND status = %s",
                [list({run_id for _, _, run_id, _ in rows}), RunStatus.SUCCEEDED],
            )
            return rows, {run_id for (run_id,) in cursor.fetchall()}
    rows = list(
        Measurement.objects.filter(series_id__in=series_ids, commit_id__in=commit_ids).values_list(*fields)
    )
    succeeded = set(
        Run.objects.filter(
            pk__in={run_id for _, _, run_id, _ in rows}, status=RunStatus.SUCCEEDED
        ).values_list("pk", flat=True)
    )
    return rows, succeeded


def _succeeded_runs(
    *, series_ids: Sequence[int], commit_ids: Sequence[int]
) -> dict[tuple[int, int], list[float]]:
    """Per (series, commit), the values of its succeeded runs, in the order read."""
    rows, succeeded = _window_rows(series_ids=series_ids, commit_ids=commit_ids)
    wanted = set(commit_ids)  # a whole history's read holds the series' other commits too
    runs: dict[tuple[int, int], list[float]] = defaultdict(list)
    for series_id, commit_id, run_id, value in rows:
        if run_id in succeeded and commit_id in wanted:
            runs[(series_id, commit_id)].append(value)
    return runs


def commit_values(
    *, series_ids: Sequence[int], commit_ids: Sequence[int]
) -> dict[int, dict[int, CommitValue]]:
    """Each series' value at each of the commits that has one: the median of its succeeded runs, with
    their spread (:func:`statistics.commit_value`, the one rule every page and the detector use)."""
    values: dict[int, dict[int, CommitValue]] = defaultdict(dict)
    for (series_id, commit_id), measured in _succeeded_runs(
        series_ids=series_ids, commit_ids=commit_ids
    ).items():
        values[series_id][commit_id] = commit_value(measured)
    return values


@dataclass(frozen=True)
class WindowValues:
    """One series over a window's commits, in their order: NaN and one run where it has no value."""

    values: list[float]
    runs: list[int]


def window_values(*, series_ids: Sequence[int], commit_ids: Sequence[int]) -> dict[int, WindowValues]:
    """Every series over the commits, as detection reads them: the value of each commit is
    :func:`commit_values`' (the median of its runs, to the bit), built as columns rather than an object
    per point (a whole history is hundreds of thousands of points)."""
    rows, succeeded = _window_rows(series_ids=series_ids, commit_ids=commit_ids)
    width = len(commit_ids)
    values = np.full(len(series_ids) * width, math.nan)
    runs = np.ones(len(series_ids) * width, dtype=np.int64)
    if len(rows):
        table = np.array(rows, dtype=np.float64)
        series_of, commit_of, run_of, measured = (table[:, column] for column in range(4))
        # Ids are whole numbers far below 2**53: exact as floats, looked up through sorted arrays.
        series_order = np.array(series_ids, dtype=np.float64)
        commit_order = np.array(commit_ids, dtype=np.float64)
        keep = np.isin(run_of, np.fromiter(succeeded, dtype=np.float64, count=len(succeeded)))
        keep &= np.isin(commit_of, commit_order) & np.isin(series_of, series_order)
        series_sorted, commit_sorted = np.argsort(series_order), np.argsort(commit_order)
        series_index = series_sorted[np.searchsorted(series_order[series_sorted], series_of[keep])]
        commit_index = commit_sorted[np.searchsorted(commit_order[commit_sorted], commit_of[keep])]
        cells, kept = series_index * width + commit_index, measured[keep]
    else:
        cells, kept = np.zeros(0, dtype=np.int64), np.zeros(0)
    if len(cells):
        finite = np.isfinite(kept)
        # Sorted by cell, then value: a cell's runs in order, its median from the middle one or two.
        order = np.lexsort((kept, cells))
        cells, kept, finite = cells[order], kept[order], finite[order]
        starts = np.flatnonzero(np.r_[True, cells[1:] != cells[:-1]])
        counts = np.diff(np.r_[starts, len(cells)])
        lower, upper = kept[starts + (counts - 1) // 2], kept[starts + counts // 2]
        values[cells[starts]] = np.where(counts % 2 == 1, upper, (lower + upper) / 2)
        runs[cells[starts]] = counts
        # A commit with several runs, one of them not finite, takes the one rule's own path (commit_value).
        unusual = (counts > 1) & (np.add.reduceat(~finite, starts) > 0)
        if unusual.any():
            runs_of = _succeeded_runs(series_ids=series_ids, commit_ids=commit_ids)
            for cell in cells[starts][unusual].tolist():
                key = (series_ids[cell // width], commit_ids[cell % width])
                values[cell] = commit_value(runs_of[key]).value
    # Commits without a value hold math.nan itself, as they always have (lists of it compare equal).
    values_list = [value if value == value else math.nan for value in values.tolist()]
    runs_list = runs.tolist()
    return {
        series_id: WindowValues(
            values=values_list[row * width : (row + 1) * width],
            runs=runs_list[row * width : (row + 1) * width],
        )
        for row, series_id in enumerate(series_ids)
    }


def series_points(*, series_id: int, commits: Sequence[WindowCommit]) -> list[SeriesPoint]:
    """The series' values at `commits` (the median of each commit's runs), in their order; commits it
    lacks are left out."""
    return many_series_points(series_ids=[series_id], commits=commits)[series_id]


def many_series_points(
    *, series_ids: Sequence[int], commits: Sequence[WindowCommit]
) -> dict[int, list[SeriesPoint]]:
    """`series_points` of many series over the same commits, by series id, in one read."""
    values = commit_values(series_ids=series_ids, commit_ids=[commit.commit_id for commit in commits])
    points: dict[int, list[SeriesPoint]] = {}
    for series_id in series_ids:
        own = values.get(series_id, {})
        points[series_id] = [
            SeriesPoint(
                commit_id=commit.commit_id,
                position=commit.position,
                value=own[commit.commit_id].value,
                runs=own[commit.commit_id].runs,
            )
            for commit in commits
            if commit.commit_id in own
        ]
    return points


def series_window(*, series: Series, commit_id: int | None = None, size: int | None = None) -> SeriesWindow:
    """A series' points in the commit window of its suite and hardware class around `commit_id`."""
    window = commit_window(
        suite_id=series.suite_id, hardware_class=series.hardware_class, commit_id=commit_id, size=size
    )
    return SeriesWindow(
        points=tuple(series_points(series_id=series.pk, commits=window.commits)),
        at_series_start=window.at_start,
        at_series_end=window.at_end,
    )

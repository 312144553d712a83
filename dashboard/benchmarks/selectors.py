"""Reads: commits, timelines, suites and their overview, as the pages draw them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Count, Exists, F, Max, Min, OuterRef, Q, Window
from django.db.models.functions import DenseRank

from dashboard.benchmarks.models import (
    Commit,
    Measurement,
    Repository,
    Run,
    RunStatus,
    Series,
    Suite,
)
from dashboard.benchmarks.statistics import NoiseEstimate, commit_value, noise_estimate, noise_from_runs


def commit_value_of(values: Iterable[float]) -> float:
    """A commit's value on a series: the median of its runs (:func:`statistics.commit_value`, which also
    gives their spread: the rule of every page, compare and the detector)."""
    return commit_value(list(values)).value


@dataclass(frozen=True)
class MeasurementRow:
    suite: str
    hardware: str
    concurrency: int
    metric: str
    value: float
    run_id: int


@dataclass(frozen=True)
class TimelinePoint:
    commit_sha: str
    subject: str
    pr_number: int | None
    committed_at: datetime | None
    position: int | None
    value: float  # the median of the commit's runs
    runs: int
    low: float | None = None  # the lowest and highest run, when there are several
    high: float | None = None


def timeline_point(
    *,
    sha: str,
    subject: str,
    pr_number: int | None,
    committed_at: datetime | None,
    position: int | None,
    samples: Sequence[float],
) -> TimelinePoint:
    """A commit's point on a timeline: the median of its runs, with their spread (one rule everywhere)."""
    value = commit_value(samples)
    repeated = value.runs > 1
    return TimelinePoint(
        commit_sha=sha,
        subject=subject,
        pr_number=pr_number,
        committed_at=committed_at,
        position=position,
        value=value.value,
        runs=value.runs,
        low=value.low if repeated else None,
        high=value.high if repeated else None,
    )


@dataclass(frozen=True)
class TimelineSeries:
    metric: str
    concurrency: int
    points: tuple[TimelinePoint, ...]


def repository_default_find() -> Repository | None:
    """The configured repository's row, or None while nothing has created it: a read never inserts it."""
    return Repository.objects.filter(full_name=settings.PERFWATCH_GITHUB_REPOSITORY).first()


def commit_get(*, sha: str) -> Commit | None:
    """A commit by full sha or unique prefix (7+ characters)."""
    sha = sha.lower()
    exact = Commit.objects.select_related("repository").filter(sha=sha).first()
    if exact is not None or len(sha) < 7:
        return exact
    candidates = list(Commit.objects.select_related("repository").filter(sha__startswith=sha)[:2])
    return candidates[0] if len(candidates) == 1 else None


def commit_measurements(*, commit: Commit, suite: str = "", hardware_class: str = "") -> list[MeasurementRow]:
    """Every measurement of a commit's succeeded runs (of one suite and hardware class, when given),
    ordered for reading. Values, not model instances: a commit run by 500 suites has thousands."""
    rows = Measurement.objects.filter(commit=commit, run__status=RunStatus.SUCCEEDED)
    if suite:
        rows = rows.filter(series__suite__name=suite, series__hardware_class=hardware_class)
    return [
        MeasurementRow(
            suite=name, hardware=hardware, concurrency=concurrency, metric=metric, value=value, run_id=run_id
        )
        for name, hardware, concurrency, metric, value, run_id in rows.order_by(
            "series__suite__name", "series__hardware_class", "series__concurrency", "series__metric", "run_id"
        ).values_list(
            "series__suite__name",
            "series__hardware_class",
            "series__concurrency",
            "series__metric",
            "value",
            "run_id",
        )
    ]


def measurement_rows(rows: Iterable[Measurement]) -> list[MeasurementRow]:
    return [
        MeasurementRow(
            suite=row.series.suite.name,
            hardware=row.series.hardware_class,
            concurrency=row.series.concurrency,
            metric=row.series.metric,
            value=row.value,
            run_id=row.run_id,
        )
        for row in rows
    ]


def commit_runs(*, commit: Commit, limit: int | None = None, offset: int = 0) -> list[Run]:
    """A commit's runs, newest queued first (`limit` of them from `offset`, when given)."""
    runs = commit.runs.select_related("suite", "runner").order_by("-queued_at", "-pk")
    return list(runs[offset : offset + limit] if limit is not None else runs[offset:])


def suite_hardware_classes(*, suite: Suite) -> list[str]:
    return sorted(set(Series.objects.filter(suite=suite).values_list("hardware_class", flat=True)))


def suite_metrics(*, suite: Suite, hardware_class: str) -> set[str]:
    """Every metric `suite` has series of on `hardware_class`."""
    return set(
        Series.objects.filter(suite=suite, hardware_class=hardware_class).values_list("metric", flat=True)
    )


@dataclass(frozen=True)
class HardwareFacet:
    """What a suite's timeline can be filtered by on one hardware class."""

    hardware_class: str
    concurrencies: tuple[int, ...]
    run_count: int
    first_commit_at: datetime | None
    last_commit_at: datetime | None


def suite_facets(*, suite: Suite) -> list[HardwareFacet]:
    """Hardware classes with data for `suite`, their concurrency levels and commit date span. Two queries."""
    levels: dict[str, set[int]] = defaultdict(set)
    for hardware_class, concurrency in Series.objects.filter(suite=suite).values_list(
        "hardware_class", "concurrency"
    ):
        levels[hardware_class].add(concurrency)
    spans = {
        row["hardware_class"]: row
        for row in Run.objects.succeeded()
        .filter(suite=suite)
        .values("hardware_class")
        .annotate(
            run_count=Count("id"), first_at=Min("commit__committed_at"), last_at=Max("commit__committed_at")
        )
        .order_by("hardware_class")
    }
    return [
        HardwareFacet(
            hardware_class=hardware_class,
            concurrencies=tuple(sorted(levels[hardware_class])),
            run_count=spans[hardware_class]["run_count"] if hardware_class in spans else 0,
            first_commit_at=spans[hardware_class]["first_at"] if hardware_class in spans else None,
            last_commit_at=spans[hardware_class]["last_at"] if hardware_class in spans else None,
        )
        for hardware_class in sorted(levels)
    ]


@dataclass(frozen=True)
class TimelineSpan:
    """What a timeline shows under its filters: succeeded runs, the commits they measured, their dates."""

    run_count: int
    commit_count: int
    first_commit_at: datetime | None
    last_commit_at: datetime | None


def timeline_span(
    *, suite: Suite, hardware_class: str, date_from: date | None, date_to: date | None
) -> TimelineSpan:
    """Runs and commits of `suite` on `hardware_class` whose commit date lies in [date_from, date_to], as the
    charts filter them (the UTC day of the commit). One query."""
    runs = Run.objects.succeeded().for_suite(suite, hardware_class)
    if date_from:
        runs = runs.filter(commit__committed_at__date__gte=date_from)
    if date_to:
        runs = runs.filter(commit__committed_at__date__lte=date_to)
    row = runs.aggregate(
        run_count=Count("id"),
        commit_count=Count("commit", distinct=True),
        first_at=Min("commit__committed_at"),
        last_at=Max("commit__committed_at"),
    )
    return TimelineSpan(
        run_count=row["run_count"],
        commit_count=row["commit_count"],
        first_commit_at=row["first_at"],
        last_commit_at=row["last_at"],
    )


def commit_neighbours(*, commit: Commit) -> tuple[Commit | None, Commit | None]:
    """The closest older and newer commits on main with a succeeded run; unknown without a position."""
    if commit.position is None:
        return None, None
    benchmarked = Commit.objects.filter(repository_id=commit.repository_id).filter(
        Exists(Run.objects.succeeded().filter(commit=OuterRef("pk")))
    )
    older = benchmarked.filter(position__lt=commit.position).order_by("-position").first()
    newer = benchmarked.filter(position__gt=commit.position).order_by("position").first()
    return older, newer


def suite_get(*, name: str) -> Suite | None:
    return Suite.objects.filter(name=name).first()


def suites_list() -> list[Suite]:
    return list(Suite.objects.order_by("-is_active", "name"))


def series_noise(
    *, suite_id: int, hardware_class: str, size: int | None = None
) -> dict[tuple[int, str], NoiseEstimate]:
    """Run-to-run noise of every series of a suite on a hardware class, keyed (concurrency, metric), from
    its latest `size` benchmarked commits (the detection window): from repeated runs of a commit where
    there are any, else from the commits' values (:func:`statistics.noise_estimate`). Two queries."""
    return series_noises(scopes=[(suite_id, hardware_class)], size=size).get((suite_id, hardware_class), {})


Scope = tuple[int, str]  # (suite id, hardware class)


def scopes_condition(scopes: Iterable[Scope], *, prefix: str = "") -> Q:
    """Rows of these suites on these hardware classes (through `prefix`, e.g. ``"series__"``): every
    pairing of them, so callers keep the scopes they asked for. Two IN lists use the indexes; an OR of a
    condition per scope is evaluated row by row, and a commit run by 500 suites made that a minute."""
    scopes = list(scopes)
    return Q(
        **{
            f"{prefix}suite_id__in": sorted({suite_id for suite_id, _ in scopes}),
            f"{prefix}hardware_class__in": sorted({hardware_class for _, hardware_class in scopes}),
        }
    )


# series_noises reads the newest `size` x this many commits of main first: a scope benchmarked at least
# every few commits finds its latest `size` among them, so the read does not grow with history; a scope
# that does not, and has older runs, is read whole.
NOISE_RECENT_FACTOR = 4
# Up to this many scopes the recent read probes each scope on each commit; beyond, each commit's runs.
FEW_SCOPES = 16
SCOPE_JOIN = "JOIN wanted w ON w.suite_id = r.suite_id AND w.hardware_class = r.hardware_class"


def series_noises(
    *,
    scopes: Iterable[Scope],
    size: int | None = None,
    metrics: Sequence[str] | None = None,
    recent: int | None = None,
) -> dict[Scope, dict[tuple[int, str], NoiseEstimate]]:
    """:func:`series_noise` of many suites and hardware classes (of only `metrics`, when given), in three
    statements whatever their number (two on SQLite). `recent` (default `size` x NOISE_RECENT_FACTOR) is
    how many of main's newest commits the first read looks at; the result does not depend on it."""
    scopes = sorted(set(scopes))
    if not scopes:
        return {}
    size = size or settings.PERFWATCH_DETECTION_WINDOW
    if connection.vendor != "postgresql":
        return _series_noises_portable(scopes=scopes, size=size, metrics=metrics)
    recent = recent or size * NOISE_RECENT_FACTOR
    floor = (
        Commit.objects.filter(position__isnull=False)
        .order_by("-position", "-id")
        .values_list("position", "id")[recent - 1 : recent]
        .first()
    )
    if floor is None:  # main is shorter than the recent window: one read of everything
        return _series_noises_read(scopes=scopes, size=size, metrics=metrics, recent=None)[0]
    noises, seen = _series_noises_read(scopes=scopes, size=size, metrics=metrics, recent=recent)
    # A scope with a series on `size` commits has them all; only the others may reach further back.
    unsure = [scope for scope in scopes if seen.get(scope, 0) < size]
    short = _scopes_short_of_window(scopes=unsure, size=size, recent=recent, floor=floor) if unsure else []
    if short:
        noises |= _series_noises_read(scopes=short, size=size, metrics=metrics, recent=None)[0]
    return noises


def _series_noises_read(
    *, scopes: Sequence[Scope], size: int, metrics: Sequence[str] | None, recent: int | None
) -> tuple[dict[Scope, dict[tuple[int, str], NoiseEstimate]], dict[Scope, int]]:
    """One statement: the latest `size` benchmarked commits of each scope (among main's newest `recent`
    commits, when given: read from the commits down, so the cost follows `recent`, not history), and each
    series' values on them as two arrays in main's order; what is left here is numpy on those arrays.
    Also, per scope, the most commits any of its series was read on."""
    metric_condition = "AND s.metric = ANY(%(metrics)s)" if metrics is not None else ""
    if recent is None:
        # Every run of the scopes, found through their (suite, hardware class, status) index.
        runs = f"""
            FROM {Run._meta.db_table} r
            {SCOPE_JOIN}
            JOIN {Commit._meta.db_table} c ON c.id = r.commit_id
            WHERE r.status = %(succeeded)s AND c.position IS NOT NULL"""
    else:
        # Main's newest commits, each probing run_commit_scope (for a few scopes, each scope on each
        # commit). OFFSET 0 keeps them probes: the planner, misjudging the scopes' size, would otherwise
        # read every run of theirs and hash them.
        few = len(scopes) <= FEW_SCOPES
        probe = "AND r.suite_id = w.suite_id AND r.hardware_class = w.hardware_class" if few else ""
        runs = f"""
            FROM (
                SELECT id, position FROM {Commit._meta.db_table} WHERE position IS NOT NULL
                ORDER BY position DESC, id DESC LIMIT %(recent)s
            ) c
            {"CROSS JOIN wanted w" if few else ""} CROSS JOIN LATERAL (
                SELECT r.id, r.commit_id, r.suite_id, r.hardware_class FROM {Run._meta.db_table} r
                WHERE r.commit_id = c.id AND r.status = %(succeeded)s {probe}
                OFFSET 0
            ) r
            {"" if few else SCOPE_JOIN}"""
    sql = f"""
        WITH wanted AS (
            SELECT * FROM unnest(%(suite_ids)s::bigint[], %(hardware)s::text[]) AS w(suite_id, hardware_class)
        ), ranked AS (
            SELECT r.suite_id, r.hardware_class, r.id AS run_id, r.commit_id, c.position,
                   dense_rank() OVER (
                       PARTITION BY r.suite_id, r.hardware_class ORDER BY c.position DESC, r.commit_id DESC
                   ) AS rank
            {runs}
        ), latest AS (
            SELECT * FROM ranked WHERE rank <= %(size)s
        )
        SELECT s.suite_id, s.hardware_class, s.concurrency, s.metric,
               array_agg(m.value ORDER BY l.position, l.commit_id),
               array_agg(l.commit_id ORDER BY l.position, l.commit_id)
        FROM latest l
        JOIN {Series._meta.db_table} s
          ON s.suite_id = l.suite_id AND s.hardware_class = l.hardware_class {metric_condition}
        CROSS JOIN LATERAL (
            SELECT m.value FROM {Measurement._meta.db_table} m
            WHERE m.series_id = s.id AND m.commit_id = l.commit_id AND m.run_id = l.run_id
            OFFSET 0
        ) m
        GROUP BY s.suite_id, s.hardware_class, s.concurrency, s.metric
    """
    with connection.cursor() as cursor:
        cursor.execute(
            sql, {**_scope_arrays(scopes), "size": size, "metrics": list(metrics or ()), "recent": recent}
        )
        found = cursor.fetchall()
    noises: dict[Scope, dict[tuple[int, str], NoiseEstimate]] = defaultdict(dict)
    seen: dict[Scope, int] = defaultdict(int)
    for suite_id, hardware_class, concurrency, metric, values, commit_ids in found:
        noises[(suite_id, hardware_class)][(concurrency, metric)] = noise_from_runs(
            values=values, commits=commit_ids
        )
        seen[(suite_id, hardware_class)] = max(seen[(suite_id, hardware_class)], len(set(commit_ids)))
    return dict(noises), dict(seen)


def _scope_arrays(scopes: Sequence[Scope]) -> dict[str, Any]:
    return {
        "suite_ids": [suite_id for suite_id, _ in scopes],
        "hardware": [hardware_class for _, hardware_class in scopes],
        "succeeded": RunStatus.SUCCEEDED,
    }


def _scopes_short_of_window(
    *, scopes: Sequence[Scope], size: int, recent: int, floor: tuple[int | None, int]
) -> list[Scope]:
    """The scopes with fewer than `size` benchmarked commits among main's newest `recent` and a succeeded
    run on an older commit of main: their latest `size` reach past the recent window."""
    sql = f"""
        WITH wanted AS (
            SELECT * FROM unnest(%(suite_ids)s::bigint[], %(hardware)s::text[]) AS w(suite_id, hardware_class)
        ), commits AS MATERIALIZED (
            SELECT id FROM {Commit._meta.db_table} WHERE position IS NOT NULL
            ORDER BY position DESC, id DESC LIMIT %(recent)s
        )
        SELECT w.suite_id, w.hardware_class FROM wanted w
        WHERE (
            SELECT count(DISTINCT r.commit_id)
            FROM {Run._meta.db_table} r JOIN commits c ON c.id = r.commit_id
            WHERE r.suite_id = w.suite_id AND r.hardware_class = w.hardware_class AND r.status = %(succeeded)s
        ) < %(size)s
        AND EXISTS (
            SELECT 1 FROM {Run._meta.db_table} r JOIN {Commit._meta.db_table} c ON c.id = r.commit_id
            WHERE r.suite_id = w.suite_id AND r.hardware_class = w.hardware_class AND r.status = %(succeeded)s
              AND c.position IS NOT NULL AND (c.position, c.id) < (%(floor_position)s, %(floor_id)s)
        )
    """
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            {
                **_scope_arrays(scopes),
                "size": size,
                "recent": recent,
                "floor_position": floor[0],
                "floor_id": floor[1],
            },
        )
        return [(suite_id, hardware_class) for suite_id, hardware_class in cursor.fetchall()]


def _series_noises_portable(
    *, scopes: list[Scope], size: int, metrics: Sequence[str] | None
) -> dict[Scope, dict[tuple[int, str], NoiseEstimate]]:
    """series_noises in two ORM queries, for the demo's SQLite."""
    ranked = (
        Run.objects.succeeded()
        .filter(scopes_condition(scopes), commit__position__isnull=False)
        .annotate(
            rank=Window(
                DenseRank(),
                partition_by=[F("suite_id"), F("hardware_class")],
                order_by=[F("commit__position").desc(), F("commit_id").desc()],
            )
        )
        .filter(rank__lte=size)
        .values_list("suite_id", "hardware_class", "commit_id", "commit__position")
    )
    positions: dict[Scope, dict[int, int]] = {scope: {} for scope in scopes}
    for suite_id, hardware_class, commit_id, order in ranked:
        if (suite_id, hardware_class) in positions:
            positions[(suite_id, hardware_class)][commit_id] = order or 0
    points = Measurement.objects.filter(
        scopes_condition(scopes, prefix="series__"),
        run__status=RunStatus.SUCCEEDED,
        commit_id__in={commit_id for latest in positions.values() for commit_id in latest},
    )
    if metrics is not None:
        points = points.filter(series__metric__in=metrics)
    runs: dict[Scope, dict[tuple[int, str], dict[int, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    for suite_id, hardware_class, concurrency, metric, commit_id, value in points.values_list(
        "series__suite_id",
        "series__hardware_class",
        "series__concurrency",
        "series__metric",
        "commit_id",
        "value",
    ):
        if commit_id in positions.get((suite_id, hardware_class), {}):
            runs[(suite_id, hardware_class)][(concurrency, metric)][commit_id].append(value)
    return {
        scope: {
            key: noise_estimate(
                runs_by_commit=[by_commit[cid] for cid in sorted(by_commit, key=positions[scope].__getitem__)]
            )
            for key, by_commit in by_key.items()
        }
        for scope, by_key in runs.items()
    }

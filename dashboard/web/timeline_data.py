"""A suite's timeline charts in one response: columns read once, decimated to the charts' pixel width
(full resolution inside a zoomed range), markers added, and a version that changes with the data."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from django.db.models import Count, Max, Q

from dashboard.benchmarks.columns import commit_days, commit_positions, commits_facts, timeline_columns
from dashboard.benchmarks.models import Run, RunStatus, Suite
from dashboard.benchmarks.run_selectors import DisturbedRun, runs_disturbed
from dashboard.github.models import Tag, TrackingIssue, TrackingIssueItem
from dashboard.github.selectors import timeline_markers
from dashboard.regressions.models import AlertGroup
from dashboard.regressions.timeline import alert_markers_by_metric, alert_markers_traces
from dashboard.web.decimation import buckets_for
from dashboard.web.figures import (
    CommitUrl,
    commits_table,
    day_ticks,
    drawn_points,
    facts_days,
    series_thin,
    timeline_figure,
)
from dashboard.web.filters import TimelineFilters
from dashboard.web.markers import markers_traces

# A zoomed response also holds this share of the range on each side, so a small pan has data to show.
ZOOM_MARGIN_SHARE = 0.25


@dataclass(frozen=True)
class TimelineVersion:
    """What changes whenever a suite's charts would: its results, alert groups and markers."""

    etag: str
    last_modified: datetime | None


def timeline_version(*, suite: Suite, hardware_class: str) -> TimelineVersion:
    """A digest of the succeeded runs, alert groups, tracking issues and items, and tags. Five queries."""
    runs = Run.objects.filter(
        suite=suite, hardware_class=hardware_class, status=RunStatus.SUCCEEDED
    ).aggregate(count=Count("pk"), last=Max("pk"), finished=Max("finished_at"))
    groups = AlertGroup.objects.filter(
        alerts__series__suite=suite, alerts__series__hardware_class=hardware_class
    ).aggregate(count=Count("pk", distinct=True), updated=Max("updated_at"))
    items = TrackingIssueItem.objects.aggregate(count=Count("pk"), last=Max("pk"))
    issues = TrackingIssue.objects.aggregate(
        active=Count("pk", filter=Q(is_active=True)), synced=Max("last_synced_at")
    )
    tags = Tag.objects.aggregate(count=Count("pk"), last=Max("pk"))
    state = repr((suite.pk, hardware_class, runs, groups, items, issues, tags))
    moments = [
        moment for moment in (runs["finished"], groups["updated"], issues["synced"]) if moment is not None
    ]
    return TimelineVersion(
        etag=hashlib.sha1(state.encode()).hexdigest()[:20], last_modified=max(moments, default=None)
    )


def disturbed_runs_traces(
    *, runs: Sequence[DisturbedRun], x_of: dict[str, float], run_url: Any
) -> list[dict[str, Any]]:
    """One trace flagging, along the top of the plot, each commit whose runs a busy node or a shared GPU
    may have slowed; clicking one opens the run. customdata: (run url, why)."""
    drawn = [run for run in runs if run.commit_sha in x_of]
    if not drawn:
        return []
    return [
        {
            "type": "scatter",
            "x": [x_of[run.commit_sha] for run in drawn],
            "y": [0.97] * len(drawn),
            "yaxis": "y2",
            "mode": "markers",
            "marker": {"symbol": "x-thin-open", "color": "#b45309", "size": 9, "line": {"width": 2}},
            "name": "disturbed runs",
            "customdata": [[run_url(run.run_id), run.why] for run in drawn],
            "hovertemplate": "<b>Measured on a disturbed node</b><br>%{customdata[1]}<br>"
            "click to open the run<extra></extra>",
            "cliponaxis": False,
            "meta": {"kind": "disturbed"},
        }
    ]


def _marker_x(
    shas: set[str], *, by_position: bool, drawn_x: dict[str, float], span: tuple[float, float]
) -> dict[str, float]:
    """x of each marker commit: its position on main (when x is the position), else where it is drawn;
    only those inside the drawn span, so a marker never stretches the axis."""
    found = (
        commit_positions(shas=shas) if by_position else {sha: drawn_x[sha] for sha in shas if sha in drawn_x}
    )
    return {sha: x for sha, x in found.items() if span[0] <= x <= span[1]}


def timeline_payload(
    *,
    suite: Suite,
    filters: TimelineFilters,
    metrics: Sequence[str],
    width_px: int,
    x_range: tuple[float, float] | None,
    commit_url: CommitUrl,
) -> dict[str, Any]:
    """`{"figures": {metric: figure}, "commits": table, "x_range", "decimated"}`: every chart of the
    timeline, each series thinned to min/max buckets of `width_px` over `x_range` (the whole history
    when None), so a zoomed range comes at full resolution once it holds few enough points."""
    read_range = None
    if x_range is not None:
        margin = (x_range[1] - x_range[0]) * ZOOM_MARGIN_SHARE
        read_range = (x_range[0] - margin, x_range[1] + margin)
    columns = timeline_columns(
        suite=suite,
        hardware_class=filters.hardware_class,
        metrics=tuple(metrics),
        date_from=filters.date_from,
        date_to=filters.date_to,
        concurrencies=filters.concurrencies,
        x_range=read_range,
    )
    buckets = buckets_for(width_px=width_px)
    if read_range is not None:
        buckets = int(buckets * (1 + 2 * ZOOM_MARGIN_SHARE))
    drawn = series_thin(columns.series, buckets=buckets, x_range=read_range)
    decimated = any(len(item.indexes) < len(item.series.x) for item in drawn)
    points = drawn_points(drawn)
    # Thinned, a chart shows no commit's details (hover says the day; a click zooms in): only a view at
    # full resolution carries the commits table, so the payload stays the chart's width, not the history's.
    with_commits = not decimated or not columns.by_position
    facts = commits_facts(commit_ids={commit_id for _, commit_id in points}) if with_commits else {}
    ordered = [(x, commit_id) for x, commit_id in points if commit_id in facts]
    span = (points[0][0], points[-1][0]) if points else (0.0, 0.0)
    if with_commits:
        days = day_ticks(facts_days(ordered, facts))
    else:
        days = day_ticks(commit_days(commit_id=points[0][1], low=span[0], high=span[1]))
    commit_ticks = [(x, facts[commit_id].sha[:8]) for x, commit_id in ordered]
    drawn_x = {facts[commit_id].sha: x for x, commit_id in ordered}
    markers = timeline_markers(
        suite=suite,
        hardware_class=filters.hardware_class,
        tracking=filters.tracking,
        # The benchmarked commits are those of the points read: on main, their x is their position.
        benchmarked=np.unique(np.concatenate([item.x for item in columns.series])).astype(int).tolist()
        if columns.by_position and columns.series
        else None,
    )
    alerts = alert_markers_by_metric(
        suite=suite,
        hardware_class=filters.hardware_class,
        metrics=metrics,
        # Zoomed on positions, only the window's groups can be drawn.
        positions=(int(np.floor(span[0])), int(np.ceil(span[1])))
        if read_range is not None and columns.by_position
        else None,
    )
    disturbed = runs_disturbed(suite_id=suite.pk, hardware_class=filters.hardware_class)
    shas = (
        {marker.drawn_at_sha for marker in markers}
        | {marker.commit_sha for found in alerts.values() for marker in found}
        | {run.commit_sha for run in disturbed}
    )
    x_of = _marker_x(shas, by_position=columns.by_position, drawn_x=drawn_x, span=span) if shas else {}
    marker_traces = [
        *markers_traces(markers=markers, x_of=x_of),
        *disturbed_runs_traces(runs=disturbed, x_of=x_of, run_url=lambda run_id: f"/runs/{run_id}/"),
    ]
    figures = {
        metric: timeline_figure(
            metric=metric,
            drawn=drawn,
            days=days,
            commit_ticks=commit_ticks,
            by_position=columns.by_position,
            markers=[*marker_traces, *alert_markers_traces(markers=alerts[metric], x_of=x_of)],
        )
        for metric in metrics
    }
    return {
        "figures": figures,
        "commits": commits_table([(x, facts[commit_id]) for x, commit_id in ordered], commit_url),
        "x_range": list(x_range) if x_range is not None else None,
        "decimated": decimated,
        "points": int(np.sum([len(item.indexes) for item in drawn])),
    }

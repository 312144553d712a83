"""The PR page's charts: a suite's timeline zoomed around one PR's merge, its marker highlighted."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from dashboard.benchmarks.columns import commit_days, commit_positions, commits_facts, timeline_columns
from dashboard.benchmarks.models import Suite
from dashboard.github.selectors import Marker, PullDetail, timeline_markers
from dashboard.web.decimation import buckets_for
from dashboard.web.figures import (
    CommitUrl,
    DrawnSeries,
    commits_table,
    day_ticks,
    drawn_points,
    facts_days,
    series_thin,
    timeline_figure,
)
from dashboard.web.markers import markers_traces

# The charts open on this many benchmarked commits either side of the merge.
ZOOM_COMMITS = 8
MAX_TICKS = 8
DEFAULT_WIDTH_PX = 1200


def zoom_window(
    *, positions: Sequence[int], merge_position: int, commits: int = ZOOM_COMMITS
) -> tuple[int, int]:
    """Indexes into the sorted ``positions`` of the first and last benchmarked commit to show: ``commits``
    before the first one containing the merge, and as many from it on."""
    after = next(
        (index for index, position in enumerate(positions) if position >= merge_position), len(positions) - 1
    )
    return max(0, after - commits), min(len(positions) - 1, after + commits - 1)


def _ticks_in(ticks: Sequence[tuple[float, str]], x0: float, x1: float) -> list[tuple[float, str]]:
    visible = [tick for tick in ticks if x0 <= tick[0] <= x1]
    return visible[:: max(1, -(-len(visible) // MAX_TICKS))]


def _merge_window(*, positions: Sequence[int], merge_position: int | None) -> tuple[float, float] | None:
    """The x range the chart opens on: the benchmarked commits either side of the merge, or None when the
    history does not reach it."""
    if not positions or merge_position is None or positions[-1] < merge_position:
        return None
    first, last = zoom_window(positions=positions, merge_position=merge_position)
    return positions[first] - 0.5, positions[last] + 0.5


def _drawn(series: Sequence[Any], *, window: tuple[float, float] | None, width_px: int) -> list[DrawnSeries]:
    """Each series thinned to the chart's width, with every point inside the window kept."""
    drawn = []
    for item in series_thin(series, buckets=buckets_for(width_px=width_px)):
        if window is not None:
            inside = np.flatnonzero((item.series.x >= window[0]) & (item.series.x <= window[1]))
            item = DrawnSeries(series=item.series, indexes=np.union1d(item.indexes, inside))
        drawn.append(item)
    return drawn


def _own_marker(*, detail: PullDetail, x_of: dict[str, float]) -> Marker | None:
    """The PR's own marker, at the first drawn commit from its merge on: drawn even when no tracking issue
    lists it, and highlighted."""
    merge, number = detail.pull.merge_commit, detail.pull.number
    if merge is None:
        return None
    drawn_at = next(
        (sha for sha, x in sorted(x_of.items(), key=lambda item: item[1]) if x >= (merge.position or 0)), None
    )
    if drawn_at is None:
        return None
    return Marker(
        kind="pr",
        drawn_at_sha=drawn_at,
        commit_sha=merge.sha,
        label=f"#{number}",
        title=detail.pull.title,
        author=detail.pull.author,
        url=detail.pull.url,
        pr_number=number,
        tracking=f"PR #{number}",
        exact=drawn_at == merge.sha,
    )


def _zoom(
    *,
    figure: dict[str, Any],
    window: tuple[float, float],
    drawn: Sequence[DrawnSeries],
    days: Sequence[tuple[float, str]],
    x_of: dict[str, float],
) -> None:
    """Open the figure on the window: its x range with day (or, when too few, commit) ticks, and a y range
    fitted to the points inside it."""
    x0, x1 = window
    visible = [
        float(value)
        for item in drawn
        for x, value in zip(item.series.x.tolist(), item.series.values.tolist(), strict=True)
        if x0 <= x <= x1
    ]
    pad = (max(visible) - min(visible)) * 0.1 or abs(max(visible)) * 0.05 or 1.0
    ticks = _ticks_in(days, x0, x1)
    ticks = ticks if len(ticks) >= 3 else _ticks_in(sorted((x, sha[:8]) for sha, x in x_of.items()), x0, x1)
    figure["layout"]["xaxis"].update(
        {
            "range": [x0, x1],
            "autorange": False,
            "tickmode": "array",
            "tickvals": [x for x, _ in ticks],
            "ticktext": [label for _, label in ticks],
        }
    )
    figure["layout"]["yaxis"].update({"range": [min(visible) - pad, max(visible) + pad], "autorange": False})


def pull_request_figure(
    *,
    detail: PullDetail,
    suite: Suite,
    hardware_class: str,
    metric: str,
    tracking: Collection[str] | None,
    commit_url: CommitUrl,
    width_px: int = DEFAULT_WIDTH_PX,
) -> dict[str, Any]:
    """``metric`` of ``suite`` along main with the tracking-issue markers, zoomed on the PR's merge: the
    window around it at full resolution, the rest of the history thinned to the chart's width."""
    columns = timeline_columns(suite=suite, hardware_class=hardware_class, metrics=(metric,))
    number = detail.pull.number
    merge = detail.pull.merge_commit
    window = (
        _merge_window(
            positions=sorted({int(x) for item in columns.series for x in item.x.tolist()}),
            merge_position=merge.position if merge is not None else None,
        )
        if columns.by_position
        else None
    )
    drawn = _drawn(columns.series, window=window, width_px=width_px)
    points = drawn_points(drawn)
    # The window is drawn at full resolution with each commit's details; the rest of the history thinned.
    detailed = [(x, c) for x, c in points if window is None or window[0] <= x <= window[1]]
    facts = commits_facts(commit_ids={commit_id for _, commit_id in detailed})
    x_of = {facts[commit_id].sha: x for x, commit_id in detailed if commit_id in facts}
    markers = timeline_markers(suite=suite, hardware_class=hardware_class, tracking=tracking)
    own = _own_marker(detail=detail, x_of=x_of) if window is not None else None
    if own is not None:
        markers = [own, *(marker for marker in markers if marker.pr_number != number)]
    marker_x = dict(x_of)
    if columns.by_position:
        marker_x |= commit_positions(shas={marker.drawn_at_sha for marker in markers})
    days = day_ticks(
        commit_days(commit_id=points[0][1], low=points[0][0], high=points[-1][0])
        if columns.by_position and points
        else facts_days(detailed, facts)
    )
    figure = timeline_figure(
        metric=metric,
        drawn=drawn,
        days=days,
        commit_ticks=sorted((x, sha[:8]) for sha, x in x_of.items()),
        by_position=columns.by_position,
        markers=markers_traces(markers=markers, x_of=marker_x, highlight_pr=number if window else None),
    )
    figure["commits"] = commits_table(
        [(x, facts[commit_id]) for x, commit_id in detailed if commit_id in facts], commit_url
    )
    if window is not None:
        _zoom(figure=figure, window=window, drawn=drawn, days=days, x_of=x_of)
    return figure

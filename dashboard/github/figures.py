"""The PR page's charts: a suite's timeline zoomed around one PR's merge, its marker highlighted."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import plotly.graph_objects as go

from dashboard.benchmarks import selectors as benchmark_selectors
from dashboard.benchmarks.models import Suite
from dashboard.github.selectors import Marker, PullDetail, timeline_markers
from dashboard.github.timeline import markers_draw
from dashboard.web.figures import CommitUrl, timeline_figure

# The charts open on this many benchmarked commits either side of the merge.
ZOOM_COMMITS = 8
MAX_TICKS = 8


def zoom_window(
    *, positions: Sequence[int], merge_position: int, commits: int = ZOOM_COMMITS
) -> tuple[int, int]:
    """Indexes into the sorted ``positions`` of the first and last benchmarked commit to show: ``commits``
    before the first one containing the merge, and as many from it on."""
    after = next(
        (index for index, position in enumerate(positions) if position >= merge_position), len(positions) - 1
    )
    return max(0, after - commits), min(len(positions) - 1, after + commits - 1)


def _ticks_in(meta: dict[str, list[list[float | str]]], x0: float, x1: float) -> list[list[float | str]]:
    # As the chart script does when zoomed: days while three are in view, else short shas.
    def visible(kind: str) -> list[list[float | str]]:
        return [tick for tick in meta.get(kind, []) if x0 <= float(tick[0]) <= x1]

    ticks = visible("day_ticks")
    ticks = ticks if len(ticks) >= 3 else visible("commit_ticks")
    return ticks[:: max(1, -(-len(ticks) // MAX_TICKS))]


def pull_request_figure(
    *,
    detail: PullDetail,
    suite: Suite,
    hardware_class: str,
    metric: str,
    tracking: Collection[str] | None,
    commit_url: CommitUrl,
) -> go.Figure:
    """``metric`` of ``suite`` along main with the tracking-issue markers, zoomed on the PR's merge."""
    series = benchmark_selectors.timeline_series(
        suite=suite, hardware_class=hardware_class, metrics=(metric,)
    )
    drawn = [point for item in series for point in item.points]
    number = detail.pull.number
    markers = timeline_markers(
        suite=suite,
        hardware_class=hardware_class,
        commit_order=[point.commit_sha for point in drawn],
        tracking=tracking,
    )
    merge = detail.pull.merge_commit
    shas_at = {point.position: point.commit_sha for point in drawn if point.position is not None}
    positions = sorted(shas_at)
    drawn_at = next(
        (shas_at[p] for p in positions if merge and merge.position is not None and p >= merge.position), None
    )
    # Zoom only where x is the position on main (timeline_figure falls back to ranks without positions).
    if (
        merge is None
        or merge.position is None
        or drawn_at is None
        or len(shas_at) < len({p.commit_sha for p in drawn})
    ):
        return timeline_figure(metric=metric, series=series, commit_url=commit_url, markers=markers)
    figure = timeline_figure(metric=metric, series=series, commit_url=commit_url)
    first, last = zoom_window(positions=positions, merge_position=merge.position)
    x0, x1 = positions[first] - 0.5, positions[last] + 0.5
    ticks = _ticks_in(figure.layout.meta or {}, x0, x1)
    visible = [point.value for point in drawn if point.position is not None and x0 <= point.position <= x1]
    pad = (max(visible) - min(visible)) * 0.1 or abs(max(visible)) * 0.05 or 1.0
    figure.update_xaxes(
        range=[x0, x1],
        autorange=False,
        tickmode="array",
        tickvals=[tick[0] for tick in ticks],
        ticktext=[tick[1] for tick in ticks],
    )
    figure.update_yaxes(range=[min(visible) - pad, max(visible) + pad], autorange=False)
    # The PR's own marker is drawn even when no tracking issue lists it, and highlighted.
    own = Marker(
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
    others = [marker for marker in markers if marker.pr_number != number]
    x_of = {sha: float(position) for position, sha in shas_at.items()}
    markers_draw(figure=figure, markers=[own, *others], x_of=x_of, highlight_pr=number)
    return figure

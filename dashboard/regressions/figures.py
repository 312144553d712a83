"""The chart of one alert in its family: the family's statistics at the alert's level zoomed around the
change, those that moved emphasised with their before/after means drawn as lines, the culprit range shaded.
Built in Python and served as JSON; the web app's charts.js draws it."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import plotly.graph_objects as go

from dashboard.benchmarks.compare import change_pct_format
from dashboard.benchmarks.metrics import metric_display, statistic_rank
from dashboard.chart_style import FONT, GRID, MUTED
from dashboard.regressions.models import AlertKind
from dashboard.regressions.selectors import ChartCommit, FamilyChartData

REGRESSION_COLOR = "#dc2626"
IMPROVEMENT_COLOR = "#16a34a"
LINE_COLOR = "#2563eb"
# A statistic keeps its colour on every chart; none of them is the red or green of a change.
STATISTIC_COLORS = {"": LINE_COLOR, "mean": "#475569", "p50": LINE_COLOR, "p90": "#7c3aed", "p99": "#db2777"}
OTHER_COLORS = ("#0d9488", "#ca8a04", "#0891b2", "#ea580c")
# The statistics that moved are drawn as they were; the others lighter, behind them.
MOVED_LINE = {"width": 2.2, "marker": 6, "opacity": 1.0}
QUIET_LINE = {"width": 1.2, "marker": 4, "opacity": 0.4}


def family_figure(
    *,
    chart: FamilyChartData,
    base_sha: str,
    head_sha: str,
    commit_url: Callable[[str], str],
) -> go.Figure:
    """A metric family at one level around the range (base, head]: one trace per statistic, named as
    pages name metrics ("TTFT p99"), those with an alert in the group emphasised and their means before
    and after drawn; clicking a point opens its commit.

    The means are drawn only as far as they hold: up to the other changes of the same series (each
    trace's `neighbour_ranges`) when those fall inside the chart.
    """
    commits = chart.commits
    # Positions on main show unbenchmarked commits as spacing; without them, benchmarked order.
    by_position = bool(commits) and all(commit.position is not None for commit in commits)
    xs = [
        float(commit.position if by_position and commit.position is not None else index)
        for index, commit in enumerate(commits)
    ]
    x_of = {commit.sha: x for commit, x in zip(commits, xs, strict=True)}
    customdata = [
        [
            commit_url(commit.sha),
            commit.sha[:8],
            (commit.subject or "")[:90],
            f"PR #{commit.pr_number}" if commit.pr_number else "no PR",
        ]
        for commit in commits
    ]
    base_x, head_x = x_of.get(base_sha), x_of.get(head_sha)
    figure = go.Figure()
    # The quiet statistics first, so the ones that moved are drawn over them; the legend keeps the
    # statistics' order (mean, p50, p90, p99) whatever the drawing order.
    ranks = {trace.metric: rank for rank, trace in enumerate(chart.traces)}
    for trace in sorted(chart.traces, key=lambda trace: trace.alert is not None):
        display = metric_display(metric=trace.metric)
        unit = f" {display.unit}" if display.unit else ""
        color = _statistic_color(display.statistic)
        style = MOVED_LINE if trace.alert is not None else QUIET_LINE
        shown = [index for index, value in enumerate(trace.values) if value is not None]
        name = display.short_label
        moved = (
            f"alert {change_pct_format(trace.alert.change_pct)}" if trace.alert is not None else "no alert"
        )
        figure.add_trace(
            go.Scatter(
                x=[xs[index] for index in shown],
                y=[trace.values[index] for index in shown],
                customdata=[customdata[index] for index in shown],
                mode="lines+markers",
                name=name,
                legendgroup=trace.metric,
                legendrank=ranks[trace.metric],
                opacity=style["opacity"],
                line={"color": color, "width": style["width"]},
                marker={"color": color, "size": style["marker"]},
                hovertemplate=(
                    f"{name} ({moved})<br><b>%{{customdata[1]}}</b>  %{{customdata[3]}}<br>"
                    "%{customdata[2]}<br>"
                    f"<b>%{{y:,.{display.decimals}f}}{unit}</b><extra></extra>"
                ),
            )
        )
    for trace in chart.traces:
        alert = trace.alert
        if alert is None or base_x is None or head_x is None or not xs:
            continue
        display = metric_display(metric=trace.metric)
        unit = f" {display.unit}" if display.unit else ""
        color = REGRESSION_COLOR if alert.kind == AlertKind.REGRESSION else IMPROVEMENT_COLOR
        earlier_heads = [x_of[head] for _, head in trace.neighbour_ranges if x_of.get(head, head_x) < base_x]
        later_bases = [x_of[base] for base, _ in trace.neighbour_ranges if x_of.get(base, base_x) > head_x]
        for start, end, value, side in (
            (max(earlier_heads, default=xs[0]), base_x, alert.before_value, "before"),
            (head_x, min(later_bases, default=xs[-1]), alert.after_value, "after"),
        ):
            figure.add_trace(
                go.Scatter(
                    x=[start, end],
                    y=[value, value],
                    mode="lines",
                    name=f"{display.short_label}, mean {side}",
                    legendgroup=trace.metric,
                    showlegend=False,
                    line={"color": color, "width": 2, "dash": "solid" if side == "after" else "dot"},
                    hovertemplate=(
                        f"{display.short_label}, mean {side}: "
                        f"%{{y:,.{display.decimals}f}}{unit}<extra></extra>"
                    ),
                )
            )
    if base_x is not None and head_x is not None and xs:
        kinds = {trace.alert.kind for trace in chart.traces if trace.alert is not None}
        band = REGRESSION_COLOR if AlertKind.REGRESSION in kinds else IMPROVEMENT_COLOR
        figure.add_vrect(
            x0=base_x,
            x1=head_x,
            fillcolor=band,
            opacity=0.12,
            line_width=0,
            annotation_text="range",
            annotation_position="top left",
            annotation_font={"color": band, "size": 11},
        )
    units = {metric_display(metric=trace.metric).unit for trace in chart.traces}
    several = len(chart.traces) > 1
    figure.update_layout(
        template="none",
        height=290 if several else 260,
        margin={"l": 64, "r": 16, "t": 40 if several else 16, "b": 48},
        font={"family": FONT, "size": 12, "color": "#1e293b"},
        paper_bgcolor="rgba(0,0,0,0)",
        plot_bgcolor="#ffffff",
        hovermode="closest",
        # One statistic needs no legend: the card's title names it.
        showlegend=several,
        legend={"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"},
        xaxis={
            "showgrid": True,
            "gridcolor": GRID,
            "zeroline": False,
            "tickfont": {"color": MUTED},
            # A triager reads commits by date and sha: a few ticks, each "Aug 28 / 85d83731".
            **_commit_ticks(commits=commits, xs=xs),
        },
        yaxis={
            "showgrid": True,
            "gridcolor": GRID,
            "zeroline": False,
            "tickfont": {"color": MUTED},
            "title": {"text": " / ".join(sorted(units - {""})), "font": {"color": MUTED}},
        },
    )
    return figure


def _statistic_color(statistic: str) -> str:
    if statistic in STATISTIC_COLORS:
        return STATISTIC_COLORS[statistic]
    return OTHER_COLORS[statistic_rank(statistic) % len(OTHER_COLORS)]


AXIS_TICKS = 6


def _commit_ticks(*, commits: Sequence[ChartCommit], xs: Sequence[float]) -> dict[str, object]:
    """Tick values and labels for about AXIS_TICKS commits spread over the chart: date and short sha."""
    if not commits:
        return {}
    step = max(1, math.ceil(len(commits) / AXIS_TICKS))
    chosen = list(range(0, len(commits), step))
    return {
        "tickmode": "array",
        "tickvals": [xs[index] for index in chosen],
        "ticktext": [
            (f"{commits[index].committed_at:%b %d}<br>" if commits[index].committed_at else "")
            + commits[index].sha[:8]
            for index in chosen
        ],
    }

"""Plotly figures built in Python and sent as JSON; static/perfwatch/charts.js draws them.

A point's `customdata[0]` is the page it opens when clicked (the JS knows no URLs), and a timeline's
`layout.meta` carries the tick candidates the JS re-picks from when the x range is zoomed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import plotly.graph_objects as go

from dashboard.benchmarks.metrics import MetricDisplay, metric_display
from dashboard.benchmarks.models import main_order_key
from dashboard.benchmarks.selectors import TimelinePoint, TimelineSeries
from dashboard.chart_style import FONT, GRID, HOVER_LABEL, MUTED, PALETTE
from dashboard.github.selectors import Marker
from dashboard.github.timeline import markers_draw
from dashboard.regressions.selectors import AlertMarker
from dashboard.regressions.timeline import alert_markers_draw

MAX_TICKS = 8
SUBJECT_CHARS = 90

CommitUrl = Callable[[str], str]


def chart_layout(*, unit: str, height: int) -> dict[str, Any]:
    """The house style of a PerfWatch chart (fonts, grid, hover label, y title in `unit`); a figure
    builder passes it to `update_layout` and adds its own legend, ticks and shapes."""
    axis = {"showgrid": True, "gridcolor": GRID, "zeroline": False, "tickfont": {"color": MUTED}}
    return {
        "template": "none",
        "height": height,
        "margin": {"l": 64, "r": 16, "t": 12, "b": 36},
        "font": {"family": FONT, "size": 12, "color": "#1e293b"},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "#ffffff",
        "hovermode": "closest",
        "hoverlabel": HOVER_LABEL,
        "xaxis": {**axis, "linecolor": "#cbd5e1"},
        "yaxis": {**axis, "title": {"text": unit, "font": {"color": MUTED}}},
    }


def concurrency_color(*, concurrency: int) -> str:
    return PALETTE[(max(concurrency, 1).bit_length() - 1) % len(PALETTE)]


def _x_positions(series: Sequence[TimelineSeries]) -> tuple[dict[str, float], bool]:
    """x per commit sha: its position on main when every point has one (gaps then show as spacing),
    else its rank among the figure's commits."""
    points = [point for item in series for point in item.points]
    if points and all(point.position is not None for point in points):
        return {point.commit_sha: float(point.position or 0) for point in points}, True
    ranked: dict[str, float] = {}
    # Every series is already in main order; merging them keeps that order for the union of commits.
    for point in sorted(
        points, key=lambda p: main_order_key(position=p.position, committed_at=p.committed_at)
    ):
        ranked.setdefault(point.commit_sha, float(len(ranked)))
    return ranked, False


def _date_label(moment: datetime, *, with_year: bool) -> str:
    return moment.strftime("%b %-d %Y" if with_year else "%b %-d")


def _tick_candidates(
    series: Sequence[TimelineSeries], x_of: dict[str, float]
) -> tuple[list[tuple[float, str]], list[tuple[float, str]]]:
    """(first commit of each day, every commit) as (x, label): the JS labels a zoomed axis with days,
    or with short shas once fewer than three days are in view."""
    commits: dict[float, TimelinePoint] = {}
    for item in series:
        for point in item.points:
            commits.setdefault(x_of[point.commit_sha], point)
    ordered = sorted(commits.items())
    dated = [(x, point.committed_at) for x, point in ordered if point.committed_at is not None]
    with_year = len({moment.year for _, moment in dated}) > 1
    days: dict[str, float] = {}
    for x, moment in dated:
        days.setdefault(_date_label(moment, with_year=with_year), x)
    day_ticks = sorted((x, label) for label, x in days.items())
    commit_ticks = [(x, point.commit_sha[:8]) for x, point in ordered]
    return day_ticks, commit_ticks


def _spread(candidates: list[tuple[float, str]], count: int) -> list[tuple[float, str]]:
    if len(candidates) <= count:
        return candidates
    step = len(candidates) / count
    return [candidates[int(index * step)] for index in range(count)]


def _customdata(point: TimelinePoint, commit_url: CommitUrl) -> list[str]:
    subject = point.subject or "(subject not synced yet)"
    if len(subject) > SUBJECT_CHARS:
        subject = subject[: SUBJECT_CHARS - 1] + "…"
    return [
        commit_url(point.commit_sha),
        point.commit_sha[:8],
        subject,
        f"PR #{point.pr_number}" if point.pr_number else "no PR",
        point.committed_at.strftime("%Y-%m-%d %H:%M UTC") if point.committed_at else "date unknown",
        f" · median of {point.runs} runs" if point.runs > 1 else "",
    ]


def _translucent(hex_color: str, *, alpha: float) -> str:
    red, green, blue = (int(hex_color[index : index + 2], 16) for index in (1, 3, 5))
    return f"rgba({red}, {green}, {blue}, {alpha})"


def _value_format(display: MetricDisplay) -> str:
    return f",.{display.decimals}f"


def timeline_figure(
    *,
    metric: str,
    series: Sequence[TimelineSeries],
    commit_url: CommitUrl,
    markers: Sequence[Marker] = (),
    alerts: Sequence[AlertMarker] = (),
) -> go.Figure:
    """One line per concurrency level of `metric` along main; clicking a point opens its commit. `markers`
    (tracking-issue PRs, release tags) are drawn at the benchmarked commits they name."""
    display = metric_display(metric=metric)
    series = [item for item in series if item.metric == metric and item.points]
    x_of, by_position = _x_positions(series)
    unit = f" {display.unit}" if display.unit else ""
    # Markers make a point easy to hover and click, but hundreds of them would hide the line.
    marker_size = 5 if max((len(item.points) for item in series), default=0) <= 120 else 3
    figure = go.Figure()
    for item in sorted(series, key=lambda s: s.concurrency):
        color = concurrency_color(concurrency=item.concurrency)
        figure.add_trace(
            go.Scatter(
                x=[x_of[point.commit_sha] for point in item.points],
                y=[point.value for point in item.points],
                customdata=[_customdata(point, commit_url) for point in item.points],
                name=f"c={item.concurrency}" if item.concurrency else "run",
                mode="lines+markers",
                line={"color": color, "width": 1.6},
                marker={"color": color, "size": marker_size},
                hovertemplate=(
                    "<b>%{customdata[1]}</b>  %{customdata[3]}  ·  %{customdata[4]}<br>"
                    "%{customdata[2]}<br>"
                    f"<b>%{{y:{_value_format(display)}}}{unit}</b>"
                    + (f" at concurrency {item.concurrency}" if item.concurrency else "")
                    + "%{customdata[5]}<extra></extra>"
                ),
            )
        )
    day_ticks, commit_ticks = _tick_candidates(series, x_of)
    initial_ticks = _spread(day_ticks, MAX_TICKS) if len(day_ticks) >= 3 else _spread(commit_ticks, MAX_TICKS)
    figure.update_layout(
        chart_layout(unit=display.unit, height=300),
        dragmode="zoom",
        showlegend=bool(series),
        legend={
            "orientation": "h",
            # Left, so that Plotly's mode bar (top right) never covers it.
            "x": 0,
            "xanchor": "left",
            "y": 1.02,
            "yanchor": "bottom",
            "title": {"text": "concurrency "},
            "font": {"size": 12},
        },
        meta={"metric": metric, "day_ticks": day_ticks, "commit_ticks": commit_ticks},
    )
    figure.update_xaxes(
        tickmode="array" if initial_ticks else "auto",
        tickvals=[x for x, _ in initial_ticks],
        ticktext=[label for _, label in initial_ticks],
        title_text="" if by_position else "benchmarked commits, oldest → newest",
    )
    markers_draw(figure=figure, markers=markers, x_of=x_of)
    alert_markers_draw(figure=figure, markers=alerts, x_of=x_of)
    if not series:
        figure.add_annotation(
            text="No measurements for these filters",
            showarrow=False,
            font={"color": MUTED, "size": 14},
            xref="paper",
            yref="paper",
            x=0.5,
            y=0.5,
        )
        figure.update_xaxes(visible=False)
        figure.update_yaxes(visible=False)
    return figure


def sparkline_figure(*, series: TimelineSeries, commit_url: CommitUrl) -> go.Figure:
    """A tiny line of one series, its latest point marked; hover names the commit, a click opens it."""
    display = metric_display(metric=series.metric)
    color = concurrency_color(concurrency=series.concurrency)
    points = series.points
    unit = f" {display.unit}" if display.unit else ""
    figure = go.Figure(
        go.Scatter(
            x=list(range(len(points))),
            y=[point.value for point in points],
            customdata=[_customdata(point, commit_url) for point in points],
            mode="lines",
            line={"color": color, "width": 1.5, "shape": "linear"},
            fill="tozeroy",
            fillcolor=_translucent(color, alpha=0.08),
            hovertemplate=(
                f"<b>%{{customdata[1]}}</b>  %{{customdata[4]}}<br>"
                f"<b>%{{y:{_value_format(display)}}}{unit}</b><extra></extra>"
            ),
        )
    )
    if points:
        figure.add_trace(
            go.Scatter(
                x=[len(points) - 1],
                y=[points[-1].value],
                customdata=[_customdata(points[-1], commit_url)],
                mode="markers",
                marker={"color": color, "size": 6},
                hoverinfo="skip",
            )
        )
    values = [point.value for point in points] or [0.0]
    low, high = min(values), max(values)
    pad = (high - low) * 0.15 or abs(high) * 0.05 or 1.0
    figure.update_layout(
        template="none",
        height=72,
        margin={"l": 2, "r": 6, "t": 6, "b": 2},
        paper_bgcolor="rgba(0,0,0,0)",
        plot_bgcolor="rgba(0,0,0,0)",
        showlegend=False,
        hovermode="closest",
        hoverlabel={**HOVER_LABEL, "font": {"color": "#f8fafc", "size": 11}},
        font={"family": FONT, "size": 11},
        xaxis={"visible": False, "fixedrange": True},
        yaxis={"visible": False, "fixedrange": True, "range": [low - pad, high + pad]},
    )
    return figure

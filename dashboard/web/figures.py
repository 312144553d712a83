"""Plotly figures built in Python and sent as JSON; static/perfwatch/charts.js draws them.

A point's `customdata[0]` is the page it opens when clicked (the JS knows no URLs), and a timeline's
`layout.meta` carries the tick candidates the JS re-picks from when the x range is zoomed.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

import numpy as np
import numpy.typing as npt
from django.utils.safestring import mark_safe

from dashboard.benchmarks.columns import CommitFacts, SeriesColumns
from dashboard.benchmarks.metrics import MetricDisplay, metric_display
from dashboard.benchmarks.overview_selectors import SparklineSeries
from dashboard.chart_style import FONT, GRID, HOVER_LABEL, MUTED, PALETTE
from dashboard.web.decimation import decimate_minmax

MAX_TICKS = 8
# Lines with more points than this are drawn without a marker per point.
MARKERS_UP_TO_POINTS = 400
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


def typed_array(values: npt.NDArray[Any]) -> dict[str, str]:
    """A column as plotly.js's base64 typed array: whole numbers as int32, others as float32 (seven
    significant digits, more than any chart shows)."""
    array = np.asarray(values)
    whole = array.dtype.kind in "iu" or bool(np.array_equal(array, np.round(array)))
    if whole and (not len(array) or abs(array).max() < 2**31):
        return {"dtype": "i4", "bdata": base64.b64encode(array.astype("<i4").tobytes()).decode()}
    data = array.astype("<f4")
    return {"dtype": "f4", "bdata": base64.b64encode(data.tobytes()).decode()}


def _date_label(moment: date, *, with_year: bool) -> str:
    return moment.strftime("%b %-d %Y" if with_year else "%b %-d")


def day_ticks(days: Sequence[tuple[float, date]]) -> list[tuple[float, str]]:
    """(x, label) of the first commit of each day, from (x, day) of commits in any order: the JS labels
    a zoomed axis with these, or with short shas once fewer than three days are in view."""
    with_year = len({day.year for _, day in days}) > 1
    first: dict[date, float] = {}
    for x, day in days:
        first[day] = min(x, first.get(day, x))
    return sorted((x, _date_label(day, with_year=with_year)) for day, x in first.items())


def facts_days(
    points: Sequence[tuple[float, int]], facts: Mapping[int, CommitFacts]
) -> list[tuple[float, date]]:
    """(x, day) of the (x, commit id) points whose commit time is known."""
    return [
        (x, moment.date())
        for x, commit_id in points
        if commit_id in facts and (moment := facts[commit_id].committed_at) is not None
    ]


def _spread(candidates: list[tuple[float, str]], count: int) -> list[tuple[float, str]]:
    if len(candidates) <= count:
        return candidates
    step = len(candidates) / count
    return [candidates[int(index * step)] for index in range(count)]


def commits_table(commits: Sequence[tuple[float, CommitFacts]], commit_url: CommitUrl) -> dict[str, Any]:
    """The drawn commits as columns, once per response: the chart script turns them into each point's
    hover and click target (a point finds its commit by x), so no point carries text of its own."""
    return {
        "x": typed_array(np.array([x for x, _ in commits], dtype=np.float64)),
        "url": commit_url("{sha}"),
        "sha": [facts.sha for _, facts in commits],
        "subject": [_short(facts.subject or "(subject not synced yet)") for _, facts in commits],
        "pr": [facts.pr_number or 0 for _, facts in commits],
        "time": [
            facts.committed_at.strftime("%Y-%m-%d %H:%M UTC") if facts.committed_at else "date unknown"
            for _, facts in commits
        ],
    }


def _short(subject: str) -> str:
    return subject if len(subject) <= SUBJECT_CHARS else subject[: SUBJECT_CHARS - 1] + "…"


def _translucent(hex_color: str, *, alpha: float) -> str:
    red, green, blue = (int(hex_color[index : index + 2], 16) for index in (1, 3, 5))
    return f"rgba({red}, {green}, {blue}, {alpha})"


def _value_format(display: MetricDisplay) -> str:
    return f",.{display.decimals}f"


@dataclass(frozen=True)
class DrawnSeries:
    """The points of one series a chart draws (all of them, or its min/max buckets)."""

    series: SeriesColumns
    indexes: npt.NDArray[np.intp]

    @property
    def commit_ids(self) -> npt.NDArray[np.int64]:
        return self.series.commit_ids[self.indexes]


def drawn_points(drawn: Sequence[DrawnSeries]) -> list[tuple[float, int]]:
    """(x, commit id) of every commit the drawn series show, oldest first, each once."""
    return sorted(
        {
            (x, commit_id)
            for item in drawn
            for x, commit_id in zip(
                item.series.x[item.indexes].tolist(), item.commit_ids.tolist(), strict=True
            )
        }
    )


def series_thin(
    series: Sequence[SeriesColumns], *, buckets: int | None, x_range: tuple[float, float] | None = None
) -> list[DrawnSeries]:
    """Each series decimated to `buckets` min/max buckets over `x_range` (None: every point)."""
    return [
        DrawnSeries(
            series=item,
            indexes=np.arange(len(item.x), dtype=np.intp)
            if buckets is None
            else decimate_minmax(item.x, item.values, buckets=buckets, x_range=x_range),
        )
        for item in series
    ]


def _repeats_spread(item: DrawnSeries, *, name: str, color: str) -> dict[str, Any]:
    """A commit measured more than once shows its runs' lowest to highest as a bar through the median (none
    for a single run), drawn by a trace of its own that holds only the repeated commits (`meta.kind`
    "spread", in its line's legend group). The bars are one line broken between commits (x, x, gap; lowest,
    highest, gap), drawn as they are by any Plotly client; the chart script draws them instead as one
    filled outline of bars a pixel and a half wide (chart-labels.js, `spreadBars`): as error bars or as a
    broken line, Plotly makes an SVG element per bar and styles each one, a sixth of a zoom's redraw of
    five charts. The run count and spread of every point go with the line, for its hover."""
    runs = item.series.runs[item.indexes]
    repeated = runs > 1
    xs = item.series.x[item.indexes][repeated]
    lowest = item.series.lowest[item.indexes][repeated]
    highest = item.series.highest[item.indexes][repeated]
    gaps = np.full(len(xs), np.nan)
    return {
        "type": "scatter",
        "mode": "lines",
        "x": typed_array(np.column_stack([xs, xs, gaps]).ravel()),
        "y": typed_array(np.column_stack([lowest, highest, gaps]).ravel()),
        "line": {"color": _translucent(color, alpha=0.6), "width": 1.5},
        "connectgaps": False,
        "name": name,
        "legendgroup": name,
        "showlegend": False,
        "hoverinfo": "skip",
        "meta": {"kind": "spread"},
    }


# The share of a timeline's plot height kept above its lines for marker symbols and labels.
LANE_SHARE = 0.32


def timeline_figure(
    *,
    metric: str,
    drawn: Sequence[DrawnSeries],
    days: Sequence[tuple[float, str]],
    by_position: bool,
    commit_ticks: Sequence[tuple[float, str]] = (),
    markers: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """One line per concurrency level of `metric` along main, as plotly JSON (plain data: no figure
    objects). x and y travel as typed arrays; hover facts come from the response's commits table.
    `days` label the axis (see day_ticks), `commit_ticks` (x, short sha) when fewer than three days are
    shown; `markers` are finished traces (PRs, tags, alerts) drawn over the lines."""
    display = metric_display(metric=metric)
    drawn = sorted(
        (item for item in drawn if item.series.metric == metric and len(item.indexes)),
        key=lambda item: item.series.concurrency,
    )
    unit = f" {display.unit}" if display.unit else ""
    # Markers make a point easy to hover and click, but hundreds of them would hide the line.
    most = max((len(item.indexes) for item in drawn), default=0)
    marker_size = 5 if most <= 120 else 3
    # A marker is one SVG element: a thousand per line take most of a chart's drawing time and, a pixel or
    # two apart, show nothing the line does not (hover still finds each point of a line).
    mode = "lines+markers" if most <= MARKERS_UP_TO_POINTS else "lines"
    data: list[dict[str, Any]] = []
    for item in drawn:
        color = concurrency_color(concurrency=item.series.concurrency)
        name = f"c={item.series.concurrency}" if item.series.concurrency else "run"
        trace: dict[str, Any] = {
            "type": "scatter",
            "x": typed_array(item.series.x[item.indexes]),
            "y": typed_array(item.series.values[item.indexes]),
            "name": name,
            "legendgroup": name,
            "mode": mode,
            "line": {"color": color, "width": 1.6},
            "marker": {"color": color, "size": marker_size},
            "hovertemplate": (
                "<b>%{customdata[1]}</b>  %{customdata[3]}  ·  %{customdata[4]}<br>"
                "%{customdata[2]}<br>"
                f"<b>%{{y:{_value_format(display)}}}{unit}</b>"
                + (f" at concurrency {item.series.concurrency}" if item.series.concurrency else "")
                + "%{customdata[5]}<extra></extra>"
            ),
        }
        runs = item.series.runs[item.indexes]
        data.append(trace)
        # A thinned line's points are its buckets' extremes, not commits: like the rest of a commit's
        # details (its hover, its click), its runs' spread is shown once the chart shows commits.
        thinned = len(item.indexes) < len(item.series.x)
        if (runs > 1).any() and not thinned:
            trace["repeats"] = {
                "runs": typed_array(runs),
                "spread": typed_array(item.series.highest[item.indexes] - item.series.lowest[item.indexes]),
            }
            data.append(_repeats_spread(item, name=name, color=color))
    initial_ticks = _spread(list(days if len(days) >= 3 else commit_ticks), MAX_TICKS)
    layout = chart_layout(unit=display.unit, height=300)
    layout["xaxis"].update(
        {
            "tickmode": "array" if initial_ticks else "auto",
            "tickvals": [x for x, _ in initial_ticks],
            "ticktext": [label for _, label in initial_ticks],
            "title": {"text": "" if by_position else "benchmarked commits, oldest → newest"},
            # The chart script drops the x labels that would run past the chart's edges before it draws
            # (chart-axes.js, ticksInside): Plotly's own rule measures every label after each draw.
            "ticklabeloverflow": "allow",
        }
    )
    # Its labels are numbers, which fit the left margin.
    layout["yaxis"]["ticklabeloverflow"] = "allow"
    layout.update(
        {
            "dragmode": "zoom",
            "showlegend": bool(drawn),
            "legend": {
                "orientation": "h",
                # Left, so that Plotly's mode bar (top right) never covers it.
                "x": 0,
                "xanchor": "left",
                "y": 1.02,
                "yanchor": "bottom",
                "title": {"text": "concurrency "},
                "font": {"size": 12},
            },
            "meta": {"metric": metric, "day_ticks": list(days)},
        }
    )
    if markers and drawn:
        data.extend(markers)
        layout["yaxis2"] = {"overlaying": "y", "range": [0, 1], "visible": False, "fixedrange": True}
        # The lines keep below the lane the markers and their labels take at the top: the chart script
        # fits every y range to the lines with this share of the plot left free above them.
        layout["meta"]["lane"] = LANE_SHARE
    if not drawn:
        layout["annotations"] = [
            {
                "text": "No measurements for these filters",
                "showarrow": False,
                "font": {"color": MUTED, "size": 14},
                "xref": "paper",
                "yref": "paper",
                "x": 0.5,
                "y": 0.5,
            }
        ]
        layout["xaxis"]["visible"] = False
        layout["yaxis"]["visible"] = False
    return {"data": data, "layout": layout}


SPARK_WIDTH = 1000
SPARK_HEIGHT = 72


@dataclass(frozen=True)
class SparklineShape:
    """A sparkline as SVG geometry in a SPARK_WIDTH x SPARK_HEIGHT box: drawn by the page itself, so
    hundreds of them cost no script and no chart library."""

    line: str  # polyline points
    area: str  # polygon points: the line closed down to the bottom edge
    last_x: float
    last_y: float
    color: str
    fill: str


def sparkline_shape(*, series: SparklineSeries) -> SparklineShape:
    """The line of one series scaled into the box with a margin above and below, its latest point marked."""
    values = list(series.values) or [0.0]
    low, high = min(values), max(values)
    pad = (high - low) * 0.15 or abs(high) * 0.05 or 1.0
    low, high = low - pad, high + pad
    step = SPARK_WIDTH / max(len(values) - 1, 1)
    coordinates = [
        (index * step, SPARK_HEIGHT - (value - low) / (high - low) * SPARK_HEIGHT)
        for index, value in enumerate(values)
    ]
    # Whole units across (a thousand of them span the card) and tenths up: hundreds of cards' worth of
    # points are most of the overview's HTML.
    # Numbers only, so safe in a page as they are: hundreds of cards' points need no escaping pass.
    line = mark_safe(" ".join(f"{x:.0f},{y:.1f}" for x, y in coordinates))
    color = concurrency_color(concurrency=series.concurrency)
    return SparklineShape(
        line=line,
        area=mark_safe(f"0,{SPARK_HEIGHT} {line} {coordinates[-1][0]:.1f},{SPARK_HEIGHT}"),
        last_x=round(coordinates[-1][0], 1),
        last_y=round(coordinates[-1][1], 1),
        color=color,
        fill=_translucent(color, alpha=0.08),
    )

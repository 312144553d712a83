"""The chart of one alert: its series zoomed around the change, the before/after means drawn as lines and
the culprit range shaded. Built in Python and served as JSON; the web app's charts.js draws it."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import plotly.graph_objects as go

from dashboard.benchmarks.metrics import metric_display
from dashboard.chart_style import FONT, GRID, MUTED
from dashboard.regressions.models import Alert, AlertKind
from dashboard.regressions.selectors import ChartPoint

REGRESSION_COLOR = "#dc2626"
IMPROVEMENT_COLOR = "#16a34a"
LINE_COLOR = "#2563eb"


def alert_figure(
    *,
    alert: Alert,
    points: Sequence[ChartPoint],
    base_sha: str,
    head_sha: str,
    commit_url: Callable[[str], str],
    neighbour_ranges: Sequence[tuple[str, str]] = (),
) -> go.Figure:
    """An alert's series around its range (base, head]; clicking a point opens its commit.

    The means are drawn only as far as they hold: up to the other changes of the same series
    (`neighbour_ranges`, as (base sha, head sha)) when those fall inside the chart.
    """
    display = metric_display(metric=alert.series.metric)
    unit = f" {display.unit}" if display.unit else ""
    # Positions on main show unbenchmarked commits as spacing; without them, benchmarked order.
    by_position = bool(points) and all(point.position is not None for point in points)
    xs = [
        float(point.position if by_position and point.position is not None else index)
        for index, point in enumerate(points)
    ]
    x_of = {point.commit_sha: x for point, x in zip(points, xs, strict=True)}
    base_x, head_x = x_of.get(base_sha), x_of.get(head_sha)
    color = REGRESSION_COLOR if alert.kind == AlertKind.REGRESSION else IMPROVEMENT_COLOR
    figure = go.Figure(
        go.Scatter(
            x=xs,
            y=[point.value for point in points],
            customdata=[
                [
                    commit_url(point.commit_sha),
                    point.commit_sha[:8],
                    (point.subject or "")[:90],
                    f"PR #{point.pr_number}" if point.pr_number else "no PR",
                ]
                for point in points
            ],
            mode="lines+markers",
            name=f"c={alert.series.concurrency}",
            line={"color": LINE_COLOR, "width": 1.4},
            marker={"color": LINE_COLOR, "size": 5},
            hovertemplate=(
                "<b>%{customdata[1]}</b>  %{customdata[3]}<br>%{customdata[2]}<br>"
                f"<b>%{{y:,.{display.decimals}f}}{unit}</b><extra></extra>"
            ),
        )
    )
    if base_x is not None and head_x is not None and xs:
        earlier_heads = [x_of[head] for _, head in neighbour_ranges if x_of.get(head, head_x) < base_x]
        later_bases = [x_of[base] for base, _ in neighbour_ranges if x_of.get(base, base_x) > head_x]
        for start, end, value, name in (
            (max(earlier_heads, default=xs[0]), base_x, alert.before_value, "before"),
            (head_x, min(later_bases, default=xs[-1]), alert.after_value, "after"),
        ):
            figure.add_trace(
                go.Scatter(
                    x=[start, end],
                    y=[value, value],
                    mode="lines",
                    name=f"mean {name}",
                    line={"color": color, "width": 2.4, "dash": "solid" if name == "after" else "dot"},
                    hovertemplate=f"mean {name}: %{{y:,.{display.decimals}f}}{unit}<extra></extra>",
                )
            )
        figure.add_vrect(
            x0=base_x,
            x1=head_x,
            fillcolor=color,
            opacity=0.12,
            line_width=0,
            annotation_text="range",
            annotation_position="top left",
            annotation_font={"color": color, "size": 11},
        )
    figure.update_layout(
        template="none",
        height=260,
        margin={"l": 64, "r": 16, "t": 16, "b": 48},
        font={"family": FONT, "size": 12, "color": "#1e293b"},
        paper_bgcolor="rgba(0,0,0,0)",
        plot_bgcolor="#ffffff",
        hovermode="closest",
        showlegend=False,
        xaxis={
            "showgrid": True,
            "gridcolor": GRID,
            "zeroline": False,
            "tickfont": {"color": MUTED},
            # A triager reads commits by date and sha: a few ticks, each "Aug 28 / 85d83731".
            **_commit_ticks(points=points, xs=xs),
        },
        yaxis={
            "showgrid": True,
            "gridcolor": GRID,
            "zeroline": False,
            "tickfont": {"color": MUTED},
            "title": {"text": display.unit, "font": {"color": MUTED}},
        },
    )
    return figure


AXIS_TICKS = 6


def _commit_ticks(*, points: Sequence[ChartPoint], xs: Sequence[float]) -> dict[str, object]:
    """Tick values and labels for about AXIS_TICKS commits spread over the chart: date and short sha."""
    if not points:
        return {}
    step = max(1, math.ceil(len(points) / AXIS_TICKS))
    chosen = list(range(0, len(points), step))
    return {
        "tickmode": "array",
        "tickvals": [xs[index] for index in chosen],
        "ticktext": [
            (f"{points[index].committed_at:%b %d}<br>" if points[index].committed_at else "")
            + points[index].commit_sha[:8]
            for index in chosen
        ],
    }

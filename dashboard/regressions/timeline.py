"""Alert markers on a timeline figure: one symbol per alert group at the head of its culprit range."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dashboard.regressions.selectors import AlertMarker

# On the overlay axis (0 to 1 over the plot): the lowest row of the lane the lines leave free.
ALERT_ROW_Y = 0.71
KIND_COLORS = {"regression": "#dc2626", "improvement": "#16a34a", "trade_off": "#d97706"}


def alert_markers_traces(
    *, markers: Sequence[AlertMarker], x_of: Mapping[str, float]
) -> list[dict[str, Any]]:
    """One trace drawing each alert group as a symbol at the bottom of the label lane, above the lines
    (the chart keeps the top of its plot for labels); clicking it opens the group. customdata: (group
    url, hover text, the PR label "#51830" the chart script places above the marker where there is room,
    or "", the group's kind: regressions are labelled first)."""
    drawn = [marker for marker in markers if marker.commit_sha in x_of]
    if not drawn:
        return []
    return [
        {
            "type": "scatter",
            "x": [x_of[marker.commit_sha] for marker in drawn],
            "y": [ALERT_ROW_Y] * len(drawn),
            "yaxis": "y2",
            "mode": "markers",
            "marker": {
                # Colour says good or bad; the triangle points the way the metric moved.
                "symbol": ["triangle-up" if marker.moved_up else "triangle-down" for marker in drawn],
                "color": [KIND_COLORS.get(marker.kind, "#64748b") for marker in drawn],
                "size": 11,
                "line": {"color": "#ffffff", "width": 1},
            },
            "name": "alerts",
            "customdata": [
                [marker.url, marker.label, f"#{marker.pr_number}" if marker.pr_number else "", marker.kind]
                for marker in drawn
            ],
            "hovertemplate": "<b>Alert</b> %{customdata[1]}<br>click to open<extra></extra>",
            "cliponaxis": False,
            "meta": {"kind": "alerts"},
        }
    ]

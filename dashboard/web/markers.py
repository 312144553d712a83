"""Tracking-issue PRs and release tags on the timeline charts: the toggles in the query string and the
markers drawn on a Plotly figure. The timeline pages and figures of dashboard.web call these."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.http import QueryDict
from django.urls import reverse

from dashboard.github.models import TrackingIssue
from dashboard.github.selectors import Marker

TRACKING_PARAM = "tracking"
PR_COLOR = "#7c3aed"
TAG_COLOR = "#475569"
HIGHLIGHT_COLOR = "#f59e0b"
# Markers are placed in rows from the top of the plot down, each in the first row whose last label is far
# enough to the left (a share of the x span), so that labels of close PRs do not print over each other.
# Rows of the label lane at the top of a timeline's plot (above LANE_BOTTOM on the overlay axis, which the
# lines never reach): PR and tag symbols with their labels, above the row of alert labels.
_ROW_TOP = 0.97
_ROW_STEP = 0.06
_ROWS = 3
_LABEL_GAP_SHARE = 0.06
_TITLE_CHARS = 90


@dataclass(frozen=True)
class TrackingToggle:
    label: str
    title: str
    checked: bool


def tracking_selection_parse(*, query: QueryDict) -> frozenset[str] | None:
    """The tracking issues to draw: None (all of them, the default) when the query has no ``tracking``;
    else the labels listed (``tracking=owner/name#N``, repeated; an empty value selects none)."""
    if TRACKING_PARAM not in query:
        return None
    return frozenset(value.strip() for value in query.getlist(TRACKING_PARAM) if value.strip())


def tracking_query_pairs(*, selection: frozenset[str] | None) -> list[tuple[str, str]]:
    """Query-string pairs that carry ``selection`` to a figure URL (nothing for the default)."""
    if selection is None:
        return []
    return [(TRACKING_PARAM, "")] + [(TRACKING_PARAM, label) for label in sorted(selection)]


def tracking_toggles(
    *, issues: Sequence[TrackingIssue], selection: frozenset[str] | None
) -> list[TrackingToggle]:
    return [
        TrackingToggle(
            label=issue.label,
            title=issue.title or issue.label,
            checked=selection is None or issue.label in selection,
        )
        for issue in issues
    ]


def pull_page_url(number: int) -> str:
    return reverse("web:pull-request", args=[number])


def _hover(marker: Marker) -> str:
    title = marker.title if len(marker.title) <= _TITLE_CHARS else marker.title[: _TITLE_CHARS - 1] + "…"
    where = (
        f"merged in {marker.commit_sha[:8]}"
        if marker.exact
        else f"merged in {marker.commit_sha[:8]}, first benchmarked in {marker.drawn_at_sha[:8]}"
    )
    if marker.kind == "tag":
        return f"<b>{marker.label}</b>  release tag<br>{where.replace('merged', 'tagged')}<br>{marker.url}"
    author = f"by {marker.author}<br>" if marker.author else ""
    return f"<b>PR {marker.label}</b>  {marker.tracking}<br>{title}<br>{author}{where}<br>{marker.url}"


def _line_trace(xs: Sequence[float], *, name: str, color: str, highlighted: bool) -> dict[str, Any]:
    # Every vertical line of a group in one trace: x, x, gap for each, spanning the overlay axis.
    return {
        "type": "scatter",
        "x": [value for x in xs for value in (x, x, None)],
        "y": [y for _ in xs for y in (0, 1, None)],
        "yaxis": "y2",
        "mode": "lines",
        "line": {
            "color": color,
            "width": 2.5 if highlighted else 1,
            "dash": "solid" if highlighted else "dot",
        },
        "opacity": 0.9 if highlighted else 0.45,
        "hoverinfo": "skip",
        "showlegend": False,
        "legendgroup": name,
        "meta": {"kind": "marker-lines", "tracking": name},
    }


def markers_traces(
    *,
    markers: Sequence[Marker],
    x_of: Mapping[str, float],
    highlight_pr: int | None = None,
) -> list[dict[str, Any]]:
    """Traces that draw each marker: a dotted vertical line at its commit's x and, at the top, a symbol
    whose hover names the PR (or tag) and whose click opens the PR's page. One legend entry per tracking
    issue and one for release tags, so each can be hidden from the legend too; a few traces whatever
    the number of markers."""
    drawn = [marker for marker in markers if marker.drawn_at_sha in x_of]
    if not drawn:
        return []
    groups: dict[str, list[tuple[Marker, float, float]]] = defaultdict(list)
    drawn.sort(key=lambda marker: x_of[marker.drawn_at_sha])
    xs = [x_of[marker.drawn_at_sha] for marker in drawn]
    span = max(xs) - min(xs)
    row_ends: list[float] = [float("-inf")] * _ROWS
    for marker, x in zip(drawn, xs, strict=True):
        row = next(
            (index for index, end in enumerate(row_ends) if x - end > span * _LABEL_GAP_SHARE),
            min(range(_ROWS), key=row_ends.__getitem__),
        )
        row_ends[row] = x
        groups[marker.tracking or "release tags"].append((marker, x, _ROW_TOP - _ROW_STEP * row))
    traces: list[dict[str, Any]] = []
    for name, entries in sorted(groups.items(), key=lambda group: group[0] == "release tags"):
        is_tags = name == "release tags"
        color = TAG_COLOR if is_tags else PR_COLOR

        def lit(marker: Marker) -> bool:
            return highlight_pr is not None and marker.pr_number == highlight_pr

        plain = [x for marker, x, _ in entries if not lit(marker)]
        if plain:
            traces.append(_line_trace(plain, name=name, color=color, highlighted=False))
        highlighted = [x for marker, x, _ in entries if lit(marker)]
        if highlighted:
            traces.append(_line_trace(highlighted, name=name, color=HIGHLIGHT_COLOR, highlighted=True))
        traces.append(
            {
                "type": "scatter",
                "x": [x for _, x, _ in entries],
                "y": [y for _, _, y in entries],
                "yaxis": "y2",
                "mode": "markers+text",
                "text": [marker.label for marker, _, _ in entries],
                "textposition": "middle right",
                "textfont": {"size": 10, "color": color},
                "marker": {
                    "symbol": "diamond" if is_tags else "triangle-down",
                    "size": 10,
                    "color": [HIGHLIGHT_COLOR if lit(m) else color for m, _, _ in entries],
                    "line": {"color": "#ffffff", "width": 1},
                },
                "name": name,
                "legendgroup": name,
                "customdata": [
                    [
                        marker.url if marker.pr_number is None else pull_page_url(marker.pr_number),
                        marker.label,
                    ]
                    for marker, _, _ in entries
                ],
                "hovertext": [_hover(marker) for marker, _, _ in entries],
                "hovertemplate": "%{hovertext}<extra></extra>",
                "cliponaxis": False,
                "meta": {"kind": "markers", "tracking": name},
            }
        )
    return traces

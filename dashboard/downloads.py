"""Every table and chart as data: the same rows a page shows, as CSV or JSON (`?format=csv|json`)."""

from __future__ import annotations

import base64
import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

FORMATS = ("csv", "json")
Row = Mapping[str, object]


def download_format(request: HttpRequest) -> str | None:
    """The data format a request asks for, or None for the page itself."""
    fmt = request.GET.get("format", "")
    return fmt if fmt in FORMATS else None


def _cell(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def table_response(*, rows: Sequence[Row], fmt: str, filename: str) -> HttpResponse:
    """`rows` (dicts with the same keys) as a CSV file or a JSON list, named `filename`.csv/.json."""
    if fmt == "json":
        response: HttpResponse = JsonResponse(
            [{key: _cell(value) for key, value in row.items()} for row in rows], safe=False
        )
    else:
        out = io.StringIO()
        fields = list(dict.fromkeys(key for row in rows for key in row))
        writer = csv.DictWriter(out, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({key: _cell(value) for key, value in row.items()})
        response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}.{fmt}"'
    return response


def _values(data: Any) -> list[Any]:
    """A trace's x or y: a list, or a base64 typed array as the timeline API sends them."""
    if isinstance(data, Mapping) and "bdata" in data:
        import numpy as np

        return np.frombuffer(base64.b64decode(data["bdata"]), dtype=data.get("dtype", "f8")).tolist()
    return list(data) if isinstance(data, list | tuple) else []


def figure_rows(figure: Mapping[str, Any]) -> list[dict[str, object]]:
    """A chart's points as rows: its title, each trace's name, x and y (one row per point)."""
    layout = figure.get("layout") or {}
    title = layout.get("title")
    title_text = title.get("text", "") if isinstance(title, Mapping) else (title or "")
    rows: list[dict[str, object]] = []
    for trace in figure.get("data") or ():
        xs, ys = _values(trace.get("x")), _values(trace.get("y"))
        for x, y in zip(xs, ys, strict=False):
            if y is None:
                continue
            rows.append({"chart": title_text, "series": trace.get("name", ""), "x": x, "y": y})
    return rows


def figure_response(*, figure: Mapping[str, Any], request: HttpRequest, filename: str) -> HttpResponse:
    """A figure endpoint's answer: the Plotly figure, or with `?format=` its points as CSV or JSON."""
    fmt = download_format(request)
    if fmt is None:
        return JsonResponse(figure)
    return table_response(rows=figure_rows(figure), fmt=fmt, filename=filename)


def json_dumps(rows: Sequence[Row]) -> str:
    return json.dumps(list(rows))

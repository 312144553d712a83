"""JSON the pages fetch: Plotly figures built in Python."""

from __future__ import annotations

import gzip
import hashlib
import json
import math

import orjson
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.utils.cache import get_conditional_response, patch_vary_headers
from django.utils.http import http_date
from django.views.decorators.http import require_GET

from dashboard.benchmarks.columns import series_points
from dashboard.benchmarks.models import HEADLINE_METRICS, Suite
from dashboard.downloads import download_format, table_response
from dashboard.web.filters import FilterInvalid, timeline_filters_parse
from dashboard.web.timeline_data import timeline_payload, timeline_version
from dashboard.web.views import commit_url_builder

DEFAULT_WIDTH_PX = 1200
WIDTH_LIMITS_PX = (100, 4000)
CACHE_SECONDS = 600
MAX_METRICS = 30
# The series API's bounds: metrics per request, and points per series (the newest; a year of main is
# about 10,000 commits, so a window of `from`/`to` reads the rest).
SERIES_MAX_METRICS = 10
SERIES_MAX_POINTS = 5000


def _view_params(query: QueryDict) -> tuple[int, tuple[float, float] | None]:
    """The chart's pixel width (`width`) and the zoomed x range (`x0`, `x1`), if any."""
    try:
        width = int(query.get("width") or DEFAULT_WIDTH_PX)
    except ValueError:
        raise FilterInvalid(f"'width' must be a whole number of pixels, not {query.get('width')!r}") from None
    if not WIDTH_LIMITS_PX[0] <= width <= WIDTH_LIMITS_PX[1]:
        raise FilterInvalid(
            f"'width' must be between {WIDTH_LIMITS_PX[0]} and {WIDTH_LIMITS_PX[1]}, not {width}"
        )
    if not query.get("x0") and not query.get("x1"):
        return width, None
    try:
        x0, x1 = float(query.get("x0", "")), float(query.get("x1", ""))
    except ValueError:
        raise FilterInvalid("'x0' and 'x1' must both be numbers") from None
    if not (math.isfinite(x0) and math.isfinite(x1) and x0 < x1):
        raise FilterInvalid(f"'x0' must be below 'x1', not {x0} and {x1}")
    return width, (x0, x1)


def _timeline_response(
    request: HttpRequest, suite: str, metrics: tuple[str, ...], *, one: bool
) -> HttpResponse:
    """The charts' JSON, cached per suite, filters and view, and answered 304 while the data is unchanged."""
    suite_row = Suite.objects.filter(name=suite).first()
    if suite_row is None:
        return JsonResponse({"error": f"unknown suite {suite!r}"}, status=404)
    try:
        filters = timeline_filters_parse(query=request.GET, default_hardware=suite_row.hardware_class)
        width, x_range = _view_params(request.GET)
    except FilterInvalid as error:
        return JsonResponse({"error": str(error)}, status=400)
    version = timeline_version(suite=suite_row, hardware_class=filters.hardware_class)
    view = repr((version.etag, metrics, one, filters.query_string(), width, x_range))
    etag = f'"{hashlib.sha1(view.encode()).hexdigest()[:24]}"'
    last_modified = int(version.last_modified.timestamp()) if version.last_modified else None
    unchanged = get_conditional_response(request, etag=etag, last_modified=last_modified)
    if unchanged is not None:
        return unchanged
    key = f"timeline:{etag}"
    body = cache.get(key)
    if body is None:
        payload = timeline_payload(
            suite=suite_row,
            filters=filters,
            metrics=metrics,
            width_px=width,
            x_range=x_range,
            commit_url=commit_url_builder(),
        )
        if one:
            payload = {**payload.pop("figures")[metrics[0]], **payload}
        # Compressed once and kept compressed: a fast level, since it is done on the request path.
        body = gzip.compress(json.dumps(payload, separators=(",", ":")).encode(), compresslevel=5)
        cache.set(key, body, CACHE_SECONDS)
    if "gzip" in request.headers.get("Accept-Encoding", ""):
        response = HttpResponse(body, content_type="application/json")
        response["Content-Encoding"] = "gzip"
    else:
        response = HttpResponse(gzip.decompress(body), content_type="application/json")
    response["ETag"] = etag
    if last_modified is not None:
        response["Last-Modified"] = http_date(last_modified)
    response["Cache-Control"] = "no-cache"
    patch_vary_headers(response, ("Accept-Encoding",))
    return response


@require_GET
def suite_timeline(request: HttpRequest, suite: str) -> HttpResponse:
    """Every chart of a suite's timeline page in one response: `{"figures": {metric: {"data", "layout"}},
    "commits": {...}}`; same filters as the page, plus `metric` (repeatable; the headline metrics by
    default), `width` (pixels) and the zoomed `x0`/`x1`."""
    metrics = tuple(dict.fromkeys(m.strip() for m in request.GET.getlist("metric") if m.strip()))
    if len(metrics) > MAX_METRICS or any(len(metric) > 50 for metric in metrics):
        return JsonResponse({"error": f"at most {MAX_METRICS} 'metric' names of 50 characters"}, status=400)
    return _timeline_response(request, suite, metrics or HEADLINE_METRICS, one=False)


@require_GET
def suite_figure(request: HttpRequest, suite: str, metric: str) -> HttpResponse:
    """`{"data": [...], "layout": {...}, "commits": {...}}` of one timeline chart; as suite_timeline."""
    return _timeline_response(request, suite, (metric,), one=True)


@require_GET
def suite_series(request: HttpRequest, suite: str) -> HttpResponse:
    """Raw points of a suite's timelines, with the timeline's filters and `metric` (repeatable)."""
    suite_row = Suite.objects.filter(name=suite).first()
    if suite_row is None:
        return JsonResponse({"error": f"unknown suite {suite!r}"}, status=404)
    try:
        filters = timeline_filters_parse(query=request.GET, default_hardware=suite_row.hardware_class)
    except FilterInvalid as error:
        return JsonResponse({"error": str(error)}, status=400)
    metrics = tuple(dict.fromkeys(m.strip() for m in request.GET.getlist("metric") if m.strip()))
    if not metrics or len(metrics) > SERIES_MAX_METRICS or any(len(metric) > 50 for metric in metrics):
        return JsonResponse(
            {"error": f"name 1 to {SERIES_MAX_METRICS} metrics with 'metric=' (e.g. metric=ttft_ms_p50)"},
            status=400,
        )
    found = series_points(
        suite=suite_row,
        hardware_class=filters.hardware_class,
        metrics=metrics,
        date_from=filters.date_from,
        date_to=filters.date_to,
        concurrencies=filters.concurrencies,
    )
    body = {
        "suite": suite_row.name,
        "hardware": filters.hardware_class,
        "series": [
            {
                "metric": item.metric,
                "concurrency": item.concurrency,
                # The newest points when there are more: `truncated`, and `to=` reads further back.
                "truncated": len(item.points) > SERIES_MAX_POINTS,
                "points": [
                    {"commit": sha, "committed_at": at, "pr_number": pr_number, "value": value, "runs": runs}
                    for sha, at, pr_number, value, runs in item.points[-SERIES_MAX_POINTS:]
                ],
            }
            for item in found
        ],
    }
    fmt = download_format(request)
    if fmt == "csv":
        rows = [
            {
                "suite": suite_row.name,
                "hardware": filters.hardware_class,
                "metric": item.metric,
                "concurrency": item.concurrency,
                "commit": sha,
                "committed_at": at,
                "pr_number": pr_number,
                "value": value,
                "runs": runs,
            }
            for item in found
            for sha, at, pr_number, value, runs in item.points
        ]
        return table_response(rows=rows, fmt=fmt, filename=f"{suite_row.name}-series")
    # orjson: ten thousand points encode in a few milliseconds, where json.dumps takes tens.
    return HttpResponse(orjson.dumps(body), content_type="application/json")

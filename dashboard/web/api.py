"""JSON the pages fetch: Plotly figures built in Python."""

from __future__ import annotations

import plotly.io
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET

from dashboard.benchmarks import selectors
from dashboard.benchmarks.models import HEADLINE_METRICS
from dashboard.github.selectors import timeline_markers
from dashboard.regressions.selectors import alert_markers
from dashboard.web.figures import timeline_figure
from dashboard.web.filters import FilterInvalid, timeline_filters_parse
from dashboard.web.views import commit_url_builder


@require_GET
def suite_figure(request: HttpRequest, suite: str, metric: str) -> HttpResponse:
    """`{"data": [...], "layout": {...}}` of one timeline chart; same filters as the timeline page."""
    suite_row = selectors.suite_get(name=suite)
    if suite_row is None:
        return JsonResponse({"error": f"unknown suite {suite!r}"}, status=404)
    try:
        filters = timeline_filters_parse(query=request.GET, default_hardware=suite_row.hardware_class)
    except FilterInvalid as error:
        return JsonResponse({"error": str(error)}, status=400)
    series = selectors.timeline_series(
        suite=suite_row,
        hardware_class=filters.hardware_class,
        metrics=(metric,),
        date_from=filters.date_from,
        date_to=filters.date_to,
        concurrencies=filters.concurrencies,
    )
    markers = timeline_markers(
        suite=suite_row,
        hardware_class=filters.hardware_class,
        commit_order=[point.commit_sha for item in series for point in item.points],
        tracking=filters.tracking,
    )
    alerts = alert_markers(suite=suite_row, hardware_class=filters.hardware_class, metric=metric)
    figure = timeline_figure(
        metric=metric, series=series, commit_url=commit_url_builder(), markers=markers, alerts=alerts
    )
    return HttpResponse(plotly.io.to_json(figure), content_type="application/json")


@require_GET
def suite_series(request: HttpRequest, suite: str) -> JsonResponse:
    """Raw points of a suite's timelines, with the timeline's filters and `metric` (repeatable)."""
    suite_row = selectors.suite_get(name=suite)
    if suite_row is None:
        return JsonResponse({"error": f"unknown suite {suite!r}"}, status=404)
    try:
        filters = timeline_filters_parse(query=request.GET, default_hardware=suite_row.hardware_class)
    except FilterInvalid as error:
        return JsonResponse({"error": str(error)}, status=400)
    series = selectors.timeline_series(
        suite=suite_row,
        hardware_class=filters.hardware_class,
        metrics=tuple(m for m in request.GET.getlist("metric") if m) or HEADLINE_METRICS,
        date_from=filters.date_from,
        date_to=filters.date_to,
        concurrencies=filters.concurrencies,
    )
    return JsonResponse(
        {
            "suite": suite_row.name,
            "hardware": filters.hardware_class,
            "series": [
                {
                    "metric": item.metric,
                    "concurrency": item.concurrency,
                    "points": [
                        {
                            "commit": point.commit_sha,
                            "committed_at": point.committed_at.isoformat() if point.committed_at else None,
                            "pr_number": point.pr_number,
                            "value": point.value,
                            "runs": point.runs,
                        }
                        for point in item.points
                    ],
                }
                for item in series
            ],
        }
    )

"""JSON of alert groups for scripts and other dashboards."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from dashboard.regressions.alerts_query import AlertsQueryInvalid, alerts_export, alerts_query_parse


@require_GET
def alerts_list(request: HttpRequest) -> JsonResponse:
    """`{"groups": [...]}` filtered by suite, hardware, kind, state, status and since; 400 on a bad value."""
    try:
        groups = alerts_export(filters=alerts_query_parse(query=request.GET))
    except AlertsQueryInvalid as error:
        return JsonResponse({"error": str(error)}, status=400)
    return JsonResponse({"groups": groups})

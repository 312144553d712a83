"""A PR's page (its impact and the charts zoomed around its merge) and its chart figures."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from dashboard.benchmarks import selectors as benchmark_selectors
from dashboard.benchmarks.metrics import metric_display
from dashboard.benchmarks.models import HEADLINE_METRICS
from dashboard.downloads import download_format, figure_response, table_response
from dashboard.github import selectors
from dashboard.github.impact import NEIGHBOUR_COMMITS
from dashboard.regressions.selectors import alert_groups_naming
from dashboard.web.impact_tables import impact_rows
from dashboard.web.markers import tracking_query_pairs, tracking_selection_parse
from dashboard.web.pages import not_found
from dashboard.web.pull_figures import pull_request_figure as pull_request_figure_build
from dashboard.web.tables import HEADLINE_DISPLAYS
from dashboard.web.views import commit_url_builder


@require_GET
def pull_request(request: HttpRequest, number: int) -> HttpResponse:
    detail = selectors.pull_request_detail(number=number)
    if detail is None:
        return not_found(
            request, f"PR #{number} is in no tracking issue and no synced commit on main names it."
        )
    fmt = download_format(request)
    if fmt is not None:
        return table_response(
            rows=[
                {
                    "pr": number,
                    "suite": impact.suite,
                    "hardware": impact.hardware_class,
                    "before": impact.before.sha,
                    "after": impact.after.sha,
                    "concurrency": level.concurrency,
                    "metric": change.metric,
                    "before_value": change.before,
                    "after_value": change.after,
                    "change_pct": change.change_pct,
                    "low_pct": change.estimate.low_pct if change.estimate else None,
                    "high_pct": change.estimate.high_pct if change.estimate else None,
                    "p_value": change.estimate.p_value if change.estimate else None,
                }
                for impact in detail.impacts
                for level in impact.levels
                for change in level.changes
                if change is not None
            ],
            fmt=fmt,
            filename=f"pr-{number}",
        )
    scope_options = [f"{impact.suite}/{impact.hardware_class}" for impact in detail.impacts]
    scope = request.GET.get("scope", "")
    scope = scope if scope in scope_options else (scope_options[0] if scope_options else "")
    charts = []
    if scope:
        suite, hardware = scope.split("/", 1)
        selection = tracking_selection_parse(query=request.GET)
        query = urlencode([("hardware", hardware), *tracking_query_pairs(selection=selection)])
        charts = [
            {
                "display": metric_display(metric=metric),
                "figure_url": reverse("web:pull-request-figure", args=[number, suite, metric]) + f"?{query}",
            }
            for metric in HEADLINE_METRICS
        ]
    return render(
        request,
        "github/pull_request.html",
        {
            "detail": detail,
            "pull": detail.pull,
            "rows": impact_rows(impacts=detail.impacts),
            "neighbour_commits": NEIGHBOUR_COMMITS,
            "headline": HEADLINE_DISPLAYS,
            "scope": scope,
            "scope_options": scope_options,
            "charts": charts,
            "groups": alert_groups_naming(commit=detail.pull.merge_commit)
            if detail.pull.merge_commit
            else [],
            # The chosen suite's before and after the merge, side by side.
            "compare": next(
                (impact for impact in detail.impacts if f"{impact.suite}/{impact.hardware_class}" == scope),
                None,
            ),
        },
    )


@require_GET
def pull_request_figure(request: HttpRequest, number: int, suite: str, metric: str) -> HttpResponse:
    """A timeline of ``suite`` zoomed around the PR's merge, its marker highlighted."""
    suite_row = benchmark_selectors.suite_get(name=suite)
    detail = selectors.pull_request_detail(number=number)
    if suite_row is None or detail is None:
        return JsonResponse({"error": f"unknown suite {suite!r} or PR #{number}"}, status=404)
    figure = pull_request_figure_build(
        detail=detail,
        suite=suite_row,
        hardware_class=request.GET.get("hardware", "").strip() or suite_row.hardware_class,
        metric=metric,
        tracking=tracking_selection_parse(query=request.GET),
        commit_url=commit_url_builder(),
    )
    return figure_response(figure=figure, request=request, filename=f"pr-{number}-{suite}-{metric}")

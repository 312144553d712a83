"""GitHub pages (tracking issues, PRs, compare), their chart figures, and the webhook. Thin: parse the
request, call a selector or service, shape with dashboard.github.tables, render."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from dashboard.benchmarks import selectors as benchmark_selectors
from dashboard.benchmarks.capacity_selectors import commit_load_curve
from dashboard.benchmarks.compare import compare_markdown
from dashboard.benchmarks.comparison import Comparison, ComparisonInvalid, comparison_get, metric_columns
from dashboard.benchmarks.metrics import metric_display
from dashboard.benchmarks.models import HEADLINE_METRICS
from dashboard.github import selectors
from dashboard.github.figures import pull_request_figure as pull_request_figure_build
from dashboard.github.signatures import signature_verify
from dashboard.github.tables import compare_table, impact_rows, impact_sort_parse
from dashboard.github.timeline import tracking_query_pairs, tracking_selection_parse
from dashboard.github.webhook import WEBHOOK_EVENTS, WebhookPayloadInvalid, webhook_delivery_handle
from dashboard.web.load_curves import LoadCurveSection, load_curve_section
from dashboard.web.tables import HEADLINE_DISPLAYS
from dashboard.web.views import commit_url_builder

# GitHub's delivery ids are GUIDs; anything else is not from GitHub.
_DELIVERY_ID = re.compile(r"[A-Za-z0-9-]{1,100}")


def _not_found(request: HttpRequest, message: str) -> HttpResponse:
    return render(request, "404.html", {"exception": message}, status=404)


@csrf_exempt
@require_POST
def webhook(request: HttpRequest) -> HttpResponse:
    """GitHub's deliveries: 403 unless signed with GITHUB_WEBHOOK_SECRET; 204 for events not listened to;
    202 when work was queued, 200 when there was none to do."""
    if not signature_verify(
        secret=settings.GITHUB_WEBHOOK_SECRET.encode(),
        body=request.body,
        header=request.headers.get("X-Hub-Signature-256"),
    ):
        return JsonResponse({"error": "missing or invalid X-Hub-Signature-256"}, status=403)
    event = request.headers.get("X-GitHub-Event", "")
    if event == "ping":
        return JsonResponse({"pong": True})
    if event not in WEBHOOK_EVENTS:
        return HttpResponse(status=204)
    delivery_id = request.headers.get("X-GitHub-Delivery", "")
    if not _DELIVERY_ID.fullmatch(delivery_id):
        return JsonResponse({"error": "missing or malformed X-GitHub-Delivery"}, status=400)
    try:
        payload = json.loads(request.body)
        if not isinstance(payload, dict):
            raise WebhookPayloadInvalid("the payload is not a JSON object")
        outcome = webhook_delivery_handle(
            delivery_id=delivery_id,
            event=event,
            payload=payload,
            body_sha256=hashlib.sha256(request.body).hexdigest(),
        )
    except (ValueError, TypeError) as error:  # WebhookPayloadInvalid and malformed JSON or values
        return JsonResponse({"error": f"unreadable {event} payload: {error}"}, status=400)
    if outcome.duplicate:
        return JsonResponse({"queued": [], "duplicate": True})
    return JsonResponse({"queued": list(outcome.queued)}, status=202 if outcome.queued else 200)


@require_GET
def tracking_issues(request: HttpRequest) -> HttpResponse:
    return render(request, "github/tracking_issues.html", {"rows": selectors.tracking_issues_list()})


@require_GET
def tracking_issue(request: HttpRequest, owner: str, repo: str, number: int) -> HttpResponse:
    issue = selectors.tracking_issue_get(repo=f"{owner}/{repo}", number=number)
    if issue is None:
        return _not_found(request, f"{owner}/{repo}#{number} is not a configured tracking issue.")
    detail = selectors.tracking_issue_detail(issue=issue)
    sort = impact_sort_parse(query=request.GET, scopes=detail.scopes)
    pulls: Sequence[selectors.TrackedPull] = detail.pulls
    if sort.by_impact and sort.concurrency is not None:
        pulls = selectors.tracked_pulls_sort(
            pulls=pulls,
            suite=sort.suite,
            hardware_class=sort.hardware_class,
            concurrency=sort.concurrency,
            metric=sort.metric,
        )
    return render(
        request,
        "github/tracking_issue.html",
        {
            "issue": issue,
            "pulls": [(tracked, impact_rows(impacts=tracked.impacts)) for tracked in pulls],
            "headline": HEADLINE_DISPLAYS,
            "sort": sort,
            "impact_query": sort.query(by_impact=True),
            "order_query": sort.query(by_impact=False),
            "merged_count": sum(1 for tracked in detail.pulls if tracked.pull.merge_commit_id),
            "sync": selectors.commit_sync_state(repository=issue.repository),
        },
    )


@require_GET
def pull_request(request: HttpRequest, number: int) -> HttpResponse:
    detail = selectors.pull_request_detail(number=number)
    if detail is None:
        return _not_found(
            request, f"PR #{number} is in no tracking issue and no synced commit on main names it."
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
                "figure_url": reverse("github:pull-request-figure", args=[number, suite, metric])
                + f"?{query}",
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
            "headline": HEADLINE_DISPLAYS,
            "scope": scope,
            "scope_options": scope_options,
            "charts": charts,
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
    return JsonResponse(figure)


def _compare_load_curves(*, comparison: Comparison) -> list[LoadCurveSection]:
    """Both commits' load curves of the compared suite on one set of charts, when they have curves."""
    curves = [
        (commit.short_sha, curve)
        for commit in (comparison.base, comparison.head)
        if (
            curve := commit_load_curve(
                commit=commit, suite=comparison.suite, hardware_class=comparison.hardware_class
            )
        )
        is not None
        and len(curve.points) > 1
    ]
    return [load_curve_section(curves=curves, element_prefix="compare-load-curve")] if curves else []


@require_GET
def compare(request: HttpRequest) -> HttpResponse:
    """Two commits or tags of one suite side by side; the address is the permalink."""
    suites = benchmark_selectors.suites_list()
    base_ref, head_ref = request.GET.get("base", "").strip(), request.GET.get("head", "").strip()
    suite_name = request.GET.get("suite", "").strip() or (suites[0].name if suites else "")
    hardware = request.GET.get("hardware", "").strip()
    context: dict[str, object] = {
        "suites": suites,
        "suite_name": suite_name,
        # Kept in the selector, marked, rather than shown as the first suite.
        "suite_unknown": bool(suite_name) and suite_name not in {suite.name for suite in suites},
        "hardware": hardware,
        "base_ref": base_ref,
        "head_ref": head_ref,
        "tags": selectors.release_tags(),
    }
    status = 200
    if base_ref and head_ref:
        try:
            comparison = comparison_get(
                base_ref=base_ref, head_ref=head_ref, suite_name=suite_name, hardware_class=hardware or None
            )
        except ComparisonInvalid as error:
            context["error"], status = str(error), 400
        else:
            columns, levels = compare_table(rows=comparison.rows)
            context.update(
                comparison=comparison,
                headers=[metric_display(metric=column.metric) for column in columns],
                levels=levels,
                markdown=compare_markdown(rows=comparison.rows, columns=metric_columns()),
                swap_query=urlencode(
                    {
                        "base": head_ref,
                        "head": base_ref,
                        "suite": suite_name,
                        "hardware": comparison.hardware_class,
                    }
                ),
                hardware_classes=benchmark_selectors.suite_hardware_classes(suite=comparison.suite),
                load_curves=_compare_load_curves(comparison=comparison),
            )
    return render(request, "github/compare.html", context, status=status)

"""The runs, run and runners pages, the small JSON they poll, and the staff's retry and cancel."""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import plotly.io
from django.conf import settings
from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET, require_POST

from dashboard.benchmarks import run_selectors
from dashboard.benchmarks import runs as run_lifecycle
from dashboard.benchmarks.models import Run
from dashboard.benchmarks.runs import RunActionRefused
from dashboard.github import selectors as github_selectors
from dashboard.regressions.sheriff.budget import suites_budget_use
from dashboard.web.filters import FilterInvalid
from dashboard.web.run_figures import telemetry_figure
from dashboard.web.run_pages import (
    RunFilters,
    environment_facts,
    run_actions,
    run_command_blocks,
    run_filters_parse,
    run_log_blocks,
    run_stage_bars,
    runner_rows,
    server_metrics_table,
    telemetry_note,
)
from dashboard.web.tables import HEADLINE_DISPLAYS, commit_measurement_blocks

PAGE_SIZE = 50
# What the page shows of each section before linking to the whole list: every running run, a glance
# at the rest.
OVERVIEW_SECTIONS = {"running": 50, "queued": 10, "failed": 10, "succeeded": 10}
RECENT_DAYS = 7
LIVE_INTERVAL_S = 10
RUNNERS_REFRESH_S = 30
ACCEPTS_GZIP = re.compile(r"\bgzip\b")
SECTION_TITLES = {
    "running": "Running",
    "queued": "Queued",
    "failed": "Recent failures",
    "succeeded": "Recent successes",
    "cancelled": "Cancelled",
}
# The views where something changes while one looks at them, so the page follows along.
LIVE_VIEWS = ("", "running", "queued")


@dataclass(frozen=True)
class RunSection:
    view: str
    title: str
    runs: list[Run]
    total: int
    more_url: str


@dataclass(frozen=True)
class Tab:
    label: str
    url: str
    count: int | None
    active: bool


def _overview_sections(filters: RunFilters, counts: dict[str, int]) -> list[RunSection]:
    sections = []
    for view, limit in OVERVIEW_SECTIONS.items():
        shown = list(run_selectors.runs_list(view=view, **filters.selector_arguments())[:limit])
        more_url = f"?{filters.query_string(view=view)}" if counts[view] > len(shown) else ""
        sections.append(RunSection(view, SECTION_TITLES[view], shown, counts[view], more_url))
    return sections


def _tabs(filters: RunFilters, counts: dict[str, int]) -> list[Tab]:
    return [Tab("All", f"?{filters.query_string(view='')}", None, not filters.view)] + [
        Tab(view.capitalize(), f"?{filters.query_string(view=view)}", counts[view], filters.view == view)
        for view in run_selectors.RUN_VIEWS
    ]


@require_GET
def runs(request: HttpRequest) -> HttpResponse:
    status, filter_error = 200, ""
    try:
        filters = run_filters_parse(query=request.GET)
    except FilterInvalid as error:
        filters, status, filter_error = RunFilters(), 400, str(error)
    arguments = filters.selector_arguments()
    counts = run_selectors.runs_counts(**arguments)
    page = None
    if filters.view:
        found = run_selectors.runs_list(view=filters.view, **arguments)
        page = Paginator(found, PAGE_SIZE).get_page(request.GET.get("page"))
        title = SECTION_TITLES[filters.view].removeprefix("Recent ").capitalize()
        sections = [RunSection(filters.view, title, list(page.object_list), counts[filters.view], "")]
    else:
        sections = _overview_sections(filters, counts)
    choices = run_selectors.runs_filter_choices()
    live = filters.view in LIVE_VIEWS and not filter_error
    live_query = filters.query_string(view="")
    context = {
        "filters": filters,
        "filter_error": filter_error,
        "counts": counts,
        "sections": sections,
        "page": page,
        "page_query": filters.query_string(),
        "tabs": _tabs(filters, counts),
        "selects": [
            ("suite", "Suite", "every suite", choices.suites, filters.suite),
            ("hardware", "Hardware", "any hardware", choices.hardware_classes, filters.hardware_class),
            ("runner", "Runner", "any runner", choices.runners, filters.runner),
        ],
        "live_url": (reverse("web:runs-live") + (f"?{live_query}" if live_query else "")) if live else "",
        "live_signature": run_selectors.runs_live_signature(**arguments) if live else "",
        "live_interval_s": LIVE_INTERVAL_S,
        "now": timezone.now(),
    }
    return render(request, "web/runs/runs.html", context, status=status)


@require_GET
def runs_live(request: HttpRequest) -> HttpResponse:
    """`{"signature": "..."}`: changes whenever a run under the page's filters moves on."""
    try:
        filters = run_filters_parse(query=request.GET)
    except FilterInvalid as error:
        return JsonResponse({"error": str(error)}, status=400)
    return JsonResponse({"signature": run_selectors.runs_live_signature(**filters.selector_arguments())})


@require_GET
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    detail = run_selectors.run_detail(run_id=run_id)
    if detail is None:
        raise Http404(f"No run #{run_id} is known here.")
    run = detail.run
    now = timezone.now()
    context = {
        "run": run,
        "has_report": detail.has_report,
        "now": now,
        "stages": run_stage_bars(run=run, now=now),
        "queue_position": run_selectors.run_queue_position(run=run),
        "environment": environment_facts(run=run),
        "warnings": (run.environment or {}).get("warnings") or [],
        "server_metrics": server_metrics_table(server_metrics=run.server_metrics or {}),
        "logs": run_log_blocks(run=run),
        "commands": run_command_blocks(run=run),
        "blocks": commit_measurement_blocks(rows=run_selectors.run_measurements(run=run)),
        "invalid_values": run_selectors.run_invalid_value_count(run=run),
        "headline": HEADLINE_DISPLAYS,
        "actions": run_actions(run=run) if request.user.is_staff else None,
        "telemetry_url": reverse("web:run-telemetry", args=[run.pk]) if detail.has_telemetry else "",
        "telemetry_note": "" if detail.has_telemetry else telemetry_note(run=run),
        "live_url": "" if run.is_final else reverse("web:run-live", args=[run.pk]),
        "live_signature": run_selectors.run_signature(run=run),
        "live_interval_s": LIVE_INTERVAL_S,
    }
    return render(request, "web/runs/run.html", context)


@require_GET
def run_live(request: HttpRequest, run_id: int) -> HttpResponse:
    """`{"signature": "..."}`: changes when the run changes status, stage or attempt."""
    signature = run_selectors.run_live_signature(run_id=run_id)
    if signature is None:
        return JsonResponse({"error": f"no run {run_id}"}, status=404)
    return JsonResponse({"signature": signature})


@require_GET
def run_telemetry(request: HttpRequest, run_id: int) -> HttpResponse:
    """`{"data": [...], "layout": {...}}` of a run's GPU telemetry chart."""
    samples = run_selectors.run_telemetry(run_id=run_id)
    if samples is None:
        return JsonResponse({"error": f"no run {run_id}"}, status=404)
    return HttpResponse(plotly.io.to_json(telemetry_figure(samples=samples)), content_type="application/json")


@require_GET
def run_report(request: HttpRequest, run_id: int) -> HttpResponse:
    """The raw guidellm report the run stored, as it was written; sent as stored (gzip) to a client that
    accepts it, a fifth of the bytes."""
    packed = run_selectors.run_report_gzip(run_id=run_id)
    if packed is None:
        raise Http404(f"Run #{run_id} stored no report.")
    if ACCEPTS_GZIP.search(request.headers.get("Accept-Encoding", "")):
        response = HttpResponse(packed, content_type="application/json")
        response["Content-Encoding"] = "gzip"
    else:
        response = HttpResponse(gzip.decompress(packed), content_type="application/json")
    patch_vary_headers(response, ["Accept-Encoding"])
    response["Content-Disposition"] = f'attachment; filename="perfwatch-run-{run_id}-report.json"'
    return response


def _staff_action(request: HttpRequest, run_id: int, action: Callable[..., Run], done: str) -> HttpResponse:
    """Apply a lifecycle action for the signed-in staff member; a refusal becomes a message, nothing else."""
    try:
        action(run_id=run_id, user=request.user)
    except RunActionRefused as error:
        messages.error(request, f"Nothing changed: {error}.")
    else:
        messages.success(request, done)
    return redirect("web:run", run_id=run_id)


@staff_member_required
@require_POST
def run_retry(request: HttpRequest, run_id: int) -> HttpResponse:
    return _staff_action(request, run_id, run_lifecycle.run_retry, f"Run #{run_id} is queued again.")


@staff_member_required
@require_POST
def run_cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    done = f"Run #{run_id} is cancelled; a runner holding it stops at its next step."
    return _staff_action(request, run_id, run_lifecycle.run_cancel, done)


@require_GET
def runners(request: HttpRequest) -> HttpResponse:
    now = timezone.now()
    overviews = run_selectors.runners_overview(since=now - timedelta(days=RECENT_DAYS))
    rows = runner_rows(overviews=overviews, now=now, stale_after_s=settings.PERFWATCH_RUN_LEASE_S)
    budgets = suites_budget_use()
    return render(
        request,
        "web/runs/runners.html",
        {
            "rows": rows,
            "now": now,
            "recent_days": RECENT_DAYS,
            "stale_after_s": settings.PERFWATCH_RUN_LEASE_S,
            "refresh_s": RUNNERS_REFRESH_S,
            "commit_sync": github_selectors.commit_sync_failing(),
            "budgets": budgets,
        },
    )

"""Alert pages: the list (and its feed), a group's page with its charts and triage, detector precision."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import plotly.io
from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import login_required
from django.contrib.syndication.views import Feed
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.feedgenerator import Atom1Feed
from django.views.decorators.http import require_GET, require_POST

from dashboard.downloads import download_format, figure_response
from dashboard.regressions import selectors
from dashboard.regressions.figures import family_figure
from dashboard.regressions.forms import AlertFilterForm, CommentForm, GroupTriageForm
from dashboard.regressions.models import GroupKind, TriageStatus
from dashboard.regressions.notifications import group_message, notification_retry, notification_silence_reason
from dashboard.regressions.sheriff.profiles import group_profile
from dashboard.regressions.triage import (
    TriageChange,
    TriageRefused,
    comment_allowed,
    group_comment_add,
    group_triage,
)

PAGE_SIZE = 25
# The alerts list's keys for a group's status, as Perfherder's: one letter each, u to start over.
STATUS_KEYS = (
    ("u", TriageStatus.UNTRIAGED),
    ("i", TriageStatus.INVESTIGATING),
    ("a", TriageStatus.ACKNOWLEDGED),
    ("f", TriageStatus.FIXED),
    ("w", TriageStatus.WONT_FIX),
    ("x", TriageStatus.INVALID),
    ("e", TriageStatus.EXPECTED),
    ("n", TriageStatus.INFRASTRUCTURE),
)
FEED_SIZE = 50
MAX_CHARTS = 12
# "What got slower" lists the ops of largest change; the API has them all.
PROFILE_ROWS = 15


def _commit_url(sha: str) -> str:
    return reverse("web:commit", args=[sha])


@require_GET
def alerts(request: HttpRequest) -> HttpResponse:
    form = AlertFilterForm(request.GET)
    filters = form.filters()
    page = Paginator(selectors.alert_groups(filters=filters), PAGE_SIZE).get_page(request.GET.get("page"))
    suites, hardware_classes = selectors.alert_filter_choices()
    # Every link on the page keeps the other filters: the address is the view.
    kept = {key: value for key, value in request.GET.items() if key != "page" and value}
    return render(
        request,
        "regressions/alerts.html",
        {
            "form": form,
            "filters": filters,
            "page": page,
            "rows": selectors.alert_group_rows(groups=list(page.object_list)),
            "restored": selectors.regressions_restored(),
            "suites": suites,
            "hardware_classes": hardware_classes,
            "unknown": {
                problem.name: problem
                for problem in form.unknown(suites=suites, hardware_classes=hardware_classes)
            },
            "statuses": TriageStatus.choices,
            "kinds": GroupKind.choices,
            "status_keys": [(key, status.value, status.label) for key, status in STATUS_KEYS],
            "query": urlencode(kept),
            "feed_url": reverse("regressions:alerts-feed") + (f"?{urlencode(kept)}" if kept else ""),
        },
    )


@require_GET
def alert_group(request: HttpRequest, group_id: int) -> HttpResponse:
    detail = selectors.alert_group_detail(group_id=group_id)
    if detail is None:
        raise Http404(f"no alert group {group_id}")
    group = detail.group
    form = comment_form = None
    if request.user.is_staff:
        form = GroupTriageForm(
            group_id=group.pk, initial={"status": group.status, "assignee": group.assignee_id}
        )
    if comment_allowed(user=request.user):
        comment_form = CommentForm()
    # One summary line per metric family; one chart per family and level, its statistics as traces.
    families = selectors.alert_families(alerts=detail.alerts)
    charts = [
        (chart, reverse("regressions:alert-figure", args=[chart.headline.pk]))
        for chart in selectors.family_charts(families=families, limit=MAX_CHARTS)
    ]
    profile = group_profile(group=group, alerts=detail.alerts)
    return render(
        request,
        "regressions/alert_group.html",
        {
            "detail": detail,
            "group": group,
            "charts": charts,
            "families": families,
            "form": form,
            "comment_form": comment_form,
            "culprit": detail.commits[0] if len(detail.commits) == 1 else None,
            "commit_rows": [
                (commit, detail.pull_requests.get(commit.pr_number) if commit.pr_number else None)
                for commit in detail.commits
            ],
            "statuses": TriageStatus.choices,
            "related": selectors.alert_groups_related(group=group, commits=detail.commits),
            "restored": selectors.regressions_restored().get(group.pk),
            "silence_reason": notification_silence_reason(group=group),
            "message": group_message(group=group),
            "compare_suite": detail.alerts[0].series.suite.name if detail.alerts else "",
            "compare_hardware": detail.alerts[0].series.hardware_class if detail.alerts else "",
            "profile": profile,
            "profile_rows": profile.comparison.rows(limit=PROFILE_ROWS) if profile else [],
        },
    )


@staff_member_required
@require_POST
def alert_group_triage(request: HttpRequest, group_id: int) -> HttpResponse:
    form = GroupTriageForm(request.POST, group_id=group_id)
    if not form.is_valid():
        messages.error(request, f"Nothing changed: {form.errors.as_text()}")
        return redirect("regressions:alert-group", group_id=group_id)
    try:
        events = group_triage(group_id=group_id, user=request.user, change=form.change())
    except TriageRefused as error:
        messages.error(request, str(error))
    else:
        messages.success(request, f"Saved {len(events)} change(s)." if events else "Nothing to change.")
    return redirect("regressions:alert-group", group_id=group_id)


@require_POST
def alert_group_status(request: HttpRequest, group_id: int) -> JsonResponse:
    """Set a group's status from the alerts list's keyboard shortcuts: `{"status": ..., "label": ...}`, or
    `{"error": ...}` with 400 (unknown status) or 403 (not staff, no such group)."""
    status = request.POST.get("status", "")
    if status not in TriageStatus.values:
        return JsonResponse({"error": f"unknown status {status!r}"}, status=400)
    try:
        group_triage(group_id=group_id, user=request.user, change=TriageChange(status=status))
    except TriageRefused as error:
        return JsonResponse({"error": str(error)}, status=403)
    return JsonResponse({"status": status, "label": TriageStatus(status).label})


@login_required
@require_POST
def alert_group_comment(request: HttpRequest, group_id: int) -> HttpResponse:
    form = CommentForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"No comment added: {form.errors.as_text()}")
        return redirect("regressions:alert-group", group_id=group_id)
    try:
        group_comment_add(group_id=group_id, user=request.user, text=form.cleaned_data["text"])
    except TriageRefused as error:
        messages.error(request, str(error))
    return redirect(reverse("regressions:alert-group", args=[group_id]) + "#comments")


@staff_member_required
@require_POST
def notification_resend(request: HttpRequest, group_id: int, notification_id: int) -> HttpResponse:
    notification = notification_retry(notification_id=notification_id, group_id=group_id)
    if notification is None:
        raise Http404("no such notification on this group")
    messages.success(request, f"The {notification.get_channel_display()} notification is queued again.")
    return redirect("regressions:alert-group", group_id=group_id)


@require_GET
def alert_figure_json(request: HttpRequest, alert_id: int) -> HttpResponse:
    """`{"data": [...], "layout": {...}}` of one alert's chart: its metric family at its level."""
    alert = selectors.alert_get(alert_id=alert_id)
    if alert is None:
        return JsonResponse({"error": f"no alert {alert_id}"}, status=404)
    figure = family_figure(
        chart=selectors.alert_family_chart(alert=alert),
        base_sha=alert.group.base_commit.sha,
        head_sha=alert.group.head_commit.sha,
        commit_url=_commit_url,
    )
    if download_format(request) is not None:
        return figure_response(
            figure=json.loads(plotly.io.to_json(figure)), request=request, filename=f"alert-{alert.pk}"
        )
    return HttpResponse(plotly.io.to_json(figure), content_type="application/json")


@require_GET
def precision(request: HttpRequest) -> HttpResponse:
    rows = selectors.detector_precision()
    decided = sum(row.decided for row in rows)
    false_positives = sum(row.false_positives for row in rows)
    return render(
        request,
        "regressions/precision.html",
        {
            "rows": rows,
            "decided": decided,
            "false_positives": false_positives,
            "overall": (decided - false_positives) / decided if decided else None,
        },
    )


class AlertsFeed(Feed):
    """The alerts page as an Atom feed; the same query-string filters apply."""

    feed_type = Atom1Feed
    title = "PerfWatch alerts"
    subtitle = "Performance changes detected on vLLM main, one entry per suspected culprit range."

    def get_object(self, request: HttpRequest, *args: object, **kwargs: object) -> selectors.AlertFilters:
        return AlertFilterForm(request.GET).filters()

    def link(self) -> str:
        return reverse("regressions:alerts")

    def items(self, obj: selectors.AlertFilters) -> list[selectors.AlertGroupRow]:
        groups = selectors.alert_groups(filters=obj)[:FEED_SIZE]
        return selectors.alert_group_rows(groups=list(groups))

    def item_title(self, item: selectors.AlertGroupRow) -> str:
        return item.title

    def item_description(self, item: selectors.AlertGroupRow) -> str:
        return "\n".join(
            f"{a.series.suite.name} {a.series.hardware_class} c={a.series.concurrency} {a.series.metric}: "
            f"{a.change_pct:+.1f} %"
            for a in item.alerts
        )

    def item_link(self, item: selectors.AlertGroupRow) -> str:
        return reverse("regressions:alert-group", args=[item.group.pk])

    def item_pubdate(self, item: selectors.AlertGroupRow) -> object:
        return item.group.created_at

    def item_updateddate(self, item: selectors.AlertGroupRow) -> object:
        return item.group.updated_at

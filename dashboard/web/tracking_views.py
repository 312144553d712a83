"""The tracking-issue pages: every configured issue, and one issue's PRs with what each changed."""

from __future__ import annotations

from collections.abc import Sequence

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from dashboard.github import selectors
from dashboard.github.impact import NEIGHBOUR_COMMITS
from dashboard.web.impact_tables import changelog_rows, impact_sort_parse
from dashboard.web.pages import not_found
from dashboard.web.tables import HEADLINE_DISPLAYS


@require_GET
def tracking_issues(request: HttpRequest) -> HttpResponse:
    return render(request, "github/tracking_issues.html", {"rows": selectors.tracking_issues_list()})


@require_GET
def tracking_issue(request: HttpRequest, owner: str, repo: str, number: int) -> HttpResponse:
    issue = selectors.tracking_issue_get(repo=f"{owner}/{repo}", number=number)
    if issue is None:
        return not_found(request, f"{owner}/{repo}#{number} is not a configured tracking issue.")
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
            "pulls": [
                (tracked, *changelog_rows(impacts=tracked.impacts, keep=sort.scope)) for tracked in pulls
            ],
            "headline": HEADLINE_DISPLAYS,
            "sort": sort,
            "impact_query": sort.query(by_impact=True),
            "order_query": sort.query(by_impact=False),
            "merged_count": sum(1 for tracked in detail.pulls if tracked.pull.merge_commit_id),
            "sync": selectors.commit_sync_state(repository=issue.repository),
            "neighbour_commits": NEIGHBOUR_COMMITS,
        },
    )

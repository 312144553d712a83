"""Every page and JSON endpoint a browser reads takes as many queries with five suites, alert groups and
tracked PRs as with one: nothing is fetched per row."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from dashboard.benchmarks.models import Commit, Run, Series, Suite
from dashboard.github.models import PullRequest, PullRequestState, TrackingIssueItem
from dashboard.github.tracking_issues import tracking_issue_add
from dashboard.regressions.models import Alert, AlertGroup, AlertKind, GroupKind
from tests.factories import SuiteFactory
from tests.web.conftest import HistoryBuilder

pytestmark = pytest.mark.django_db

METRIC = "output_throughput_tok_s"
TRACKING_PAGE = "/tracking/vllm-project/vllm/50587/"


@dataclass(frozen=True)
class World:
    suite: Suite
    commits: list[Commit]
    run: Run
    group: AlertGroup
    alert: Alert
    pull: PullRequest


def _grow(*, build_history: HistoryBuilder, number: int) -> World:
    """One more suite with a history, an alert group with an alert, and a tracked PR merged in it."""
    suite = cast(Suite, SuiteFactory(name=f"suite-{number}", hardware_class=("b300", "h200")[number % 2]))
    commits = build_history(commits=6, suite=suite)
    series = Series.objects.get(suite=suite, concurrency=16, metric=METRIC)
    group = AlertGroup.objects.create(
        base_commit=commits[2], head_commit=commits[3], kind=GroupKind.REGRESSION, magnitude_pct=5.0
    )
    alert = Alert.objects.create(
        group=group, series=series, kind=AlertKind.REGRESSION, before_value=100, after_value=95, change_pct=-5
    )
    issue = tracking_issue_add(repo="vllm-project/vllm", number=50587)
    pull = PullRequest.objects.create(
        repository=issue.repository,
        number=cast(int, commits[3].pr_number),
        title=f"[Perf] Change {number}",
        state=PullRequestState.MERGED,
        merge_commit=commits[3],
        merge_commit_sha=commits[3].sha,
    )
    TrackingIssueItem.objects.create(tracking_issue=issue, pull_request=pull, checked=True, order=number)
    run = Run.objects.filter(suite=suite, commit=commits[-1]).get()
    return World(suite=suite, commits=commits, run=run, group=group, alert=alert, pull=pull)


def _pages(world: World) -> list[str]:
    suite, first, last = world.suite.name, world.commits[0], world.commits[-1]
    hardware = world.suite.hardware_class
    return [
        "/",
        "/suites/",
        f"/suites/{suite}/",
        f"/api/suites/{suite}/series/?metric={METRIC}&hardware={hardware}",
        f"/api/suites/{suite}/timeline/?hardware={hardware}",
        f"/api/suites/{suite}/figures/{METRIC}/?hardware={hardware}",
        f"/commits/{last.sha}/",
        f"/api/commits/{last.sha}/measurements/",
        f"/compare/?base={first.sha}&head={last.sha}&suite={suite}",
        "/runs/",
        f"/runs/{world.run.pk}/",
        "/api/runs/live/",
        f"/api/runs/{world.run.pk}/live/",
        "/runners/",
        "/alerts/",
        "/alerts/feed/",
        "/alerts/precision/",
        f"/alerts/{world.group.pk}/",
        "/api/alerts/",
        f"/api/alerts/{world.alert.pk}/figure/",
        "/tracking/",
        TRACKING_PAGE,
        f"/prs/{world.pull.number}/",
        f"/api/prs/{world.pull.number}/figures/{suite}/{METRIC}/?hardware={hardware}",
    ]


def _queries(client: Client, pages: list[str]) -> dict[str, int]:
    counts = {}
    for page in pages:
        cache.clear()  # cold: what a page costs when it must compute everything it shows
        with CaptureQueriesContext(connection) as captured:
            response = client.get(page)
        assert response.status_code == 200, (page, response.status_code)
        counts[page] = len(captured)
    return counts


def test_every_page_takes_as_many_queries_for_five_suites_as_for_one(
    client: Client, build_history: HistoryBuilder
) -> None:
    world = _grow(build_history=build_history, number=0)
    pages = _pages(world)
    one = _queries(client, pages)

    for number in range(1, 5):
        _grow(build_history=build_history, number=number)
    five = _queries(client, pages)

    assert five == one
    assert max(one.values()) <= 40

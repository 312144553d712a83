"""The overview answers "is anything wrong?": the regressions nobody has decided on, largest first."""

import re

import pytest
from django.test import Client

from dashboard.benchmarks.metrics import metric_display
from dashboard.regressions.models import GroupState, TriageStatus
from tests.regressions.conftest import suite_create
from tests.regressions.test_alerts import THROUGHPUT, TTFT
from tests.regressions.test_pages import group_create

pytestmark = pytest.mark.django_db

OPEN_ITEM = re.compile(r'<li class="regression-item">.*?href="/alerts/(\d+)/"', re.S)


def test_the_overview_lists_untriaged_and_investigating_regressions_largest_first() -> None:
    suite = suite_create()
    small = group_create(suite=suite, change_pct=-3.0)
    large = group_create(suite=suite, change_pct=40.0, metric=TTFT, status=TriageStatus.INVESTIGATING)
    middle = group_create(suite=suite, change_pct=-9.0, hardware_class="h100")
    group_create(suite=suite, change_pct=-20.0, status=TriageStatus.FIXED)
    group_create(suite=suite, change_pct=-25.0, status=TriageStatus.ACKNOWLEDGED)
    group_create(suite=suite, change_pct=-30.0, state=GroupState.DISMISSED)  # re-runs said no
    group_create(suite=suite, change_pct=15.0)  # an improvement of throughput

    page = Client().get("/").content.decode()

    assert [int(pk) for pk in OPEN_ITEM.findall(page)] == [large.pk, middle.pk, small.pk]
    items = page.split('<li class="regression-item">')[1:]
    for group, item in zip((large, middle, small), items, strict=True):
        pr = group.head_commit.pr_number
        assert f'<a class="pr-link" href="/prs/{pr}/">PR #{pr}</a>' in item
        assert "detected" in item
    # Metrics by their names, not their keys.
    ttft, throughput = (metric_display(metric=metric).short_label for metric in (TTFT, THROUGHPUT))
    assert ttft in items[0] and "h100" in items[1] and throughput in items[2]
    assert TTFT not in items[0]
    assert "+40.0 %" in items[0] and "−9.0 %" in items[1]  # signed, with a true minus
    assert "All is well" not in page


def test_the_overview_says_all_is_well_when_every_regression_is_decided() -> None:
    suite = suite_create()
    group_create(suite=suite, change_pct=-9.0, status=TriageStatus.FIXED)
    group_create(suite=suite, change_pct=12.0)  # improvements are not something wrong

    page = Client().get("/").content.decode()

    assert 'class="regression-item"' not in page
    assert "All is well" in page


def test_each_suites_card_says_how_many_open_regressions_touch_it(build_history) -> None:
    regressed = suite_create(name="kimi-k3-8k1k", hardware_class="b300")
    healthy = suite_create(name="llama-70b-chat", hardware_class="h100")
    build_history(commits=3, suite=regressed)
    build_history(commits=3, suite=healthy)
    group_create(suite=regressed, change_pct=-9.0)
    group_create(suite=regressed, change_pct=30.0, metric=TTFT)
    group_create(suite=regressed, change_pct=-12.0, status=TriageStatus.FIXED)  # decided: not counted
    group_create(suite=healthy, change_pct=8.0)  # an improvement: nothing wrong

    response = Client().get("/")

    health = {
        (card.overview.suite.name, card.overview.hardware_class): card.open_regressions
        for card in response.context["cards"]
    }
    assert health == {("kimi-k3-8k1k", "b300"): 2, ("llama-70b-chat", "h100"): 0}
    page = response.content.decode()
    assert (
        '<a class="health bad" href="/alerts/?suite=kimi-k3-8k1k&amp;hardware=b300">2 open regressions</a>'
        in page
    )
    assert page.count('<span class="health good">no open regression</span>') == 1

"""One click to the next place, in Chromium on the demo: from a PR to its before → after, from a commit to
the change since the commit benchmarked before it, from a group to the same PR measured elsewhere."""

from typing import cast
from urllib.parse import parse_qs, urlsplit

import pytest

from dashboard.benchmarks.models import Series
from dashboard.regressions.models import Alert, AlertGroup, AlertKind, GroupKind
from tests.factories import SeriesFactory, SuiteFactory
from tests.web import test_browser, test_triage_browser

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

browser = test_browser.browser
demo = test_triage_browser.demo  # what `make demo` loads


def test_a_pr_page_compares_before_and_after_its_merge_and_its_commit_shows_the_change(browser, demo) -> None:
    regression = AlertGroup.objects.get(kind=GroupKind.REGRESSION)
    before, after = regression.base_commit, regression.head_commit  # benchmarked one after the other
    browser.open(f"/prs/{after.pr_number}/")

    compare = browser.page.locator("a.button.compare-link")
    query = parse_qs(urlsplit(compare.get_attribute("href")).query)
    assert (query["base"], query["head"]) == ([before.sha], [after.sha])
    assert (query["suite"], query["hardware"]) == (["kimi-k3-8k1k"], ["b300"])
    # Each suite's row in the table compares the same way.
    assert browser.page.locator("table.impact a.compare-link").get_attribute("href") == compare.get_attribute(
        "href"
    )
    # The revert is named as a PR, on its own page.
    revert = AlertGroup.objects.get(head_commit__subject__startswith="Revert").head_commit
    reverted = browser.page.locator("a.pill.reverted")
    assert reverted.inner_text() == f"reverted in #{revert.pr_number}"
    assert reverted.get_attribute("href") == f"/prs/{revert.pr_number}/"

    with browser.page.expect_navigation() as navigation:
        compare.click()
    response = navigation.value
    assert response is not None and response.status == 200
    assert before.short_sha in browser.page.locator("main").inner_text()
    assert after.short_sha in browser.page.locator("main").inner_text()

    # The merge commit's page says what changed since the commit benchmarked before it, and links there.
    response = browser.page.goto(f"{browser.base_url}/commits/{after.sha}/")
    assert response is not None and response.ok
    basis = browser.page.locator(".change-basis a").first
    assert basis.get_attribute("href") == f"/commits/{before.sha}/"
    assert browser.page.locator(".commit-change.bad").count() >= 1  # the throughput drop, coloured
    assert browser.console_errors == []


def test_a_group_links_to_the_group_of_the_same_pr_on_another_hardware_class(browser, demo) -> None:
    regression = AlertGroup.objects.get(kind=GroupKind.REGRESSION)
    culprit = regression.head_commit
    commits = culprit.repository.commits
    assert culprit.position is not None
    # Another suite on H100, benchmarked less often: its range around the same PR is wider.
    elsewhere = AlertGroup.objects.create(
        base_commit=commits.get(position=culprit.position - 3),
        head_commit=commits.get(position=culprit.position + 2),
        kind=GroupKind.REGRESSION,
        magnitude_pct=4.0,
    )
    series = cast(
        Series,
        SeriesFactory(suite=SuiteFactory(name="llama-70b-h100"), hardware_class="h100", concurrency=16),
    )
    Alert.objects.create(
        group=elsewhere,
        series=series,
        kind=AlertKind.REGRESSION,
        before_value=1000.0,
        after_value=960.0,
        change_pct=-4.0,
    )
    revert = AlertGroup.objects.get(head_commit__subject__startswith="Revert")

    browser.open(f"/alerts/{regression.pk}/")
    related = browser.page.locator(".related-groups li")
    assert [item.locator("a").first.get_attribute("href") for item in related.all()] == [
        f"/alerts/{revert.pk}/",
        f"/alerts/{elsewhere.pk}/",
    ]
    assert "holds its revert" in browser.page.locator(".related-groups li.by-revert").inner_text()
    same_pr = browser.page.locator(".related-groups li.same-pr")
    assert "llama-70b-h100" in same_pr.inner_text() and "h100" in same_pr.locator(".hardware").inner_text()
    assert same_pr.locator(f"a[href='/prs/{culprit.pr_number}/']").count() == 1

    # And back: the wider range names the regression's group as holding the same PR.
    browser.open(f"/alerts/{elsewhere.pk}/")
    back = browser.page.locator(".related-groups li.same-pr a[href^='/alerts/']")
    assert [a.get_attribute("href") for a in back.all()] == [f"/alerts/{regression.pk}/"]
    # The revert's group names both as holding the PR it reverts.
    browser.open(f"/alerts/{revert.pk}/")
    reverted = browser.page.locator(".related-groups li.by-revert").all()
    assert {item.locator("a").first.get_attribute("href") for item in reverted} == {
        f"/alerts/{regression.pk}/",
        f"/alerts/{elsewhere.pk}/",
    }
    assert all("holds the PR it reverts" in item.inner_text() for item in reverted)

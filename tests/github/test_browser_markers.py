"""In a real Chromium: PR markers on a suite's timeline, their hover, and a click through to the PR page."""

from typing import cast

import pytest

from dashboard.benchmarks.models import HEADLINE_METRICS, Commit, Suite
from dashboard.github.models import PullRequest, PullRequestState, TrackingIssueItem
from dashboard.github.tracking_issues import tracking_issue_add
from tests.factories import CommitFactory, SuiteFactory, run_with_values
from tests.web import test_browser as web_browser

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The web pages' Chromium harness (Debian's chromium through Playwright, console errors collected).
browser = web_browser.browser

MARKER_SYMBOL = """
() => {
  const gd = document.querySelector('.js-plotly-plot');
  const index = gd.data.findIndex(trace => trace.meta && trace.meta.kind === 'markers');
  if (index < 0) return null;
  const trace = gd._fullData[index], size = gd._fullLayout._size, box = gd.getBoundingClientRect();
  return {labels: trace.text, x: box.left + size.l + gd._fullLayout.xaxis.l2p(trace.x[0]),
          y: box.top + size.t + gd._fullLayout.yaxis2.l2p(trace.y[0])};
}
"""


@pytest.fixture
def tracked_history() -> list[Commit]:
    """Twelve commits on main, benchmarked but for the seventh; tracked PR #50912 merged in that one."""
    suite = cast(Suite, SuiteFactory())
    commits = [cast(Commit, CommitFactory()) for _ in range(12)]
    for index, commit in enumerate(commits):
        if index == 6:
            continue
        step = 1.25 if index > 6 else 1.0
        run_with_values(
            commit=commit,
            suite=suite,
            values={
                (16, metric): 100.0 * (step if metric.startswith("output") else 1 / step)
                for metric in HEADLINE_METRICS
            },
        )
    issue = tracking_issue_add(repo="vllm-project/vllm", number=50587)
    pull = PullRequest.objects.create(
        repository=issue.repository,
        number=50912,
        title="[Perf] Zero-copy mixed prefill/decode batches",
        author="youkaichao",
        state=PullRequestState.MERGED,
        merge_commit=commits[6],
        merge_commit_sha=commits[6].sha,
    )
    TrackingIssueItem.objects.create(tracking_issue=issue, pull_request=pull, checked=True, order=0)
    return commits


def test_a_pr_marker_shows_the_pr_on_hover_and_opens_its_page(browser, tracked_history) -> None:
    browser.open("/suites/kimi-k3-8k1k/")

    symbol = browser.page.evaluate(MARKER_SYMBOL)
    assert symbol is not None and symbol["labels"] == ["#50912"]
    browser.page.mouse.move(symbol["x"], symbol["y"])
    hover = browser.page.locator(".hoverlayer .hovertext").first
    hover.wait_for()
    text = hover.text_content() or ""
    for expected in (
        "PR #50912",
        "Zero-copy mixed prefill/decode batches",
        "youkaichao",
        "first benchmarked in",
    ):
        assert expected in text, text

    with browser.page.expect_navigation():
        browser.page.mouse.click(symbol["x"], symbol["y"])

    assert browser.page.url == f"{browser.base_url}/prs/50912/"
    browser.page.wait_for_function("() => document.body.dataset.chartsDrawn === 'true'", timeout=30_000)
    assert browser.page.locator("h1").inner_text() == "[Perf] Zero-copy mixed prefill/decode batches"
    assert "+25.0 %" in browser.page.locator("table.impact").inner_text()
    zoomed = browser.page.evaluate(
        "() => { const gd = document.querySelector('.js-plotly-plot');"
        " return {range: gd.layout.xaxis.range, names: gd.data.map(t => t.name)}; }"
    )
    low, high = zoomed["range"]
    assert low < tracked_history[7].position < high
    assert "PR #50912" in zoomed["names"]
    assert browser.console_errors == []


def test_unticking_a_tracking_issue_removes_its_markers(browser, tracked_history) -> None:
    browser.open("/suites/kimi-k3-8k1k/")
    assert browser.page.evaluate(MARKER_SYMBOL) is not None

    with browser.page.expect_navigation():
        browser.page.get_by_label("vllm-project/vllm#50587").uncheck()
    browser.page.wait_for_function("() => document.body.dataset.chartsDrawn === 'true'", timeout=30_000)

    assert "tracking=" in browser.page.url
    assert browser.page.evaluate(MARKER_SYMBOL) is None
    assert browser.console_errors == []

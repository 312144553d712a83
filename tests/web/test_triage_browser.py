"""A triager's path through the demo in Chromium: what regressed, one click to its PR, on any screen."""

import re
from collections import deque
from urllib.parse import urlsplit

import pytest
from django.core.management import call_command
from django.urls import Resolver404, resolve

from dashboard.demo.model import REVERT_PR
from dashboard.github.models import TrackingIssue
from dashboard.regressions.models import AlertGroup, GroupKind
from tests.web import test_browser
from tests.web.test_browser import BrowserPage

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

browser = test_browser.browser  # the same Chromium fixture as the other pages' checks

# Every kind of page a triager moves between; a crawl from the overview must reach each one.
PAGE_KINDS = {
    "web:overview",
    "web:suites",
    "web:suite-timeline",
    "web:commit",
    "web:compare",
    "web:runs",
    "web:run",
    "web:runners",
    "regressions:alerts",
    "regressions:alert-group",
    "web:tracking-issues",
    "web:tracking-issue",
    "web:pull-request",
}
CRAWL_LIMIT = 150  # pages: the crawl must find every kind well within this
LINKS = "() => Array.from(document.querySelectorAll('main a[href], header a[href]')).map(a => a.href)"
PR_MENTION = r"^(?:PR )?#(\d{4,})$"
# Every mention of a PR ("#51830", "PR #51830", linked or not) and where it links; commit subjects that end
# in "(#51830)" are subjects, linked to their commit or group. Run numbers ("#19798" linking to its run
# page) are not PR mentions.
PR_MENTION_LINKS = """
() => Array.from(document.querySelectorAll('main a, main td, main span, main b'))
  .filter(el => el.children.length === 0 && /^(PR )?#\\d{4,}$/.test(el.textContent.trim()))
  .filter(el => !(el.closest('a') && el.closest('a').getAttribute('href').startsWith('/runs/')))
  .map(el => [el.textContent.trim(), el.closest('a') ? el.closest('a').getAttribute('href') : null])
"""


@pytest.fixture
def demo(settings) -> None:
    settings.PERFWATCH_DEMO = True
    for command in ("load_demo", "load_demo_github", "detect_alerts"):  # what `make demo` loads
        call_command(command)


def _page_kind(url: str, base_url: str) -> str | None:
    if not url.startswith(base_url):
        return None
    path = urlsplit(url).path
    try:
        match = resolve(path)
    except Resolver404:
        return None
    return f"{match.app_name}:{match.url_name}"


def _pr_links_of(browser: BrowserPage, path: str) -> list[tuple[str, str | None]]:
    response = browser.page.goto(browser.base_url + path)
    assert response is not None and response.ok, path
    return [tuple(pair) for pair in browser.page.evaluate(PR_MENTION_LINKS)]


def test_a_regression_its_revert_restored_is_recovered_not_open_and_links_to_the_revert(
    browser, demo
) -> None:
    regression = AlertGroup.objects.get(kind=GroupKind.REGRESSION)
    revert = AlertGroup.objects.get(head_commit__pr_number=REVERT_PR)
    browser.open("/")

    # Open means open: the revert brought every regressed series back, so nothing is listed as open.
    assert browser.page.locator(".open-regressions").count() == 0
    assert "All is well" in browser.page.locator(".all-well").inner_text()
    sections = browser.page.locator("h2.section-title").all_text_contents()
    assert sections.index("Open regressions") < sections.index("Suites")
    item = browser.page.locator(".recovered-item")
    assert item.count() == 1
    assert item.locator(".regression-title").get_attribute("href") == f"/alerts/{regression.pk}/"
    assert item.locator(".restored-by").get_attribute("href") == f"/alerts/{revert.pk}/"
    assert item.locator(".restored-by").inner_text().startswith(f"PR #{REVERT_PR}: Revert")

    with browser.page.expect_navigation():
        item.locator(".regression-title").click()
    recovered = browser.page.locator("#recovered")
    assert "Recovered." in recovered.inner_text() and "Its revert" in recovered.inner_text()
    assert recovered.locator(f"a[href='/prs/{REVERT_PR}/']").count() == 1
    assert browser.page.locator(".commit-meta .verdict-recovered").count() == 1
    # The alerts list says so beside the group, linking to what restored it.
    browser.open("/alerts/")
    badge = browser.page.locator(f"tr[data-group-id='{regression.pk}'] .verdict-recovered")
    assert badge.get_attribute("href") == f"/alerts/{revert.pk}/"
    assert browser.page.locator(f"tr[data-group-id='{revert.pk}'] .verdict-recovered").count() == 0
    assert browser.console_errors == []


def test_every_pr_mention_links_to_its_pr_page_and_a_crawl_reaches_every_kind_of_page(browser, demo) -> None:
    regression = AlertGroup.objects.get(kind=GroupKind.REGRESSION)
    pr = regression.head_commit.pr_number
    tracking = TrackingIssue.objects.get()
    culprit_pages = (
        "/",
        f"/alerts/{regression.pk}/",
        f"/commits/{regression.head_commit.sha}/",
        f"/prs/{pr}/",
        f"/compare/?base={regression.base_commit.sha}&head={regression.head_commit.sha}",
    )
    run = regression.head_commit.runs.first()
    assert run is not None
    others = ("/alerts/", f"/runs/{run.pk}/", f"/tracking/{tracking.repository.full_name}/{tracking.number}/")
    for path in (*culprit_pages, *others):
        mentions = _pr_links_of(browser, path)
        assert mentions, path
        for text, href in mentions:
            number = re.fullmatch(PR_MENTION, text)
            assert number is not None
            assert href == f"/prs/{number.group(1)}/", (path, text, href)
        if path in culprit_pages:
            assert f"/prs/{pr}/" in {href for _, href in mentions}, path

    # The regression's group links to compare (base -> head) and to its revert's group.
    browser.page.goto(f"{browser.base_url}/alerts/{regression.pk}/")
    compare = browser.page.locator("a", has_text="Compare base → head").get_attribute("href")
    assert f"base={regression.base_commit.sha}" in compare and f"head={regression.head_commit.sha}" in compare
    related = browser.page.locator(".related-groups a[href^='/alerts/']").all()
    revert = AlertGroup.objects.get(head_commit__subject__startswith="Revert")
    assert [a.get_attribute("href") for a in related] == [f"/alerts/{revert.pk}/"]
    # The culprit's commit page shows the alert that names it.
    browser.page.goto(f"{browser.base_url}/commits/{regression.head_commit.sha}/")
    assert browser.page.locator(f"main a[href='/alerts/{regression.pk}/']").count() == 1

    # Breadth-first from the overview, one page of each kind, following only the links pages show.
    reached: dict[str, str] = {}
    queue = deque([browser.base_url + "/"])
    seen = set(queue)
    visited = 0
    while queue and set(reached) != PAGE_KINDS and visited < CRAWL_LIMIT:
        url = queue.popleft()
        kind = _page_kind(url, browser.base_url)
        if kind is None or kind in reached:
            continue
        visited += 1
        response = browser.page.goto(url)
        assert response is not None and response.ok, url
        reached[kind] = url
        for link in browser.page.evaluate(LINKS):
            link = link.split("#")[0]
            if link not in seen and _page_kind(link, browser.base_url) in PAGE_KINDS - set(reached):
                seen.add(link)
                queue.append(link)
    assert set(reached) == PAGE_KINDS, PAGE_KINDS - set(reached)
    assert browser.console_errors == []


# What spills past the screen's edge outside a scrolling table, to say why a page scrolls sideways.
WIDER_THAN_THE_SCREEN = """() => Array.from(document.querySelectorAll('body *'))
  .filter(e => !e.closest('.table-wrap') && e.getBoundingClientRect().right > 390.5)
  .slice(0, 8).map(e => `${e.tagName}.${e.getAttribute('class')}: ${(e.textContent || '').slice(0, 40)}`)"""
CHART_EDGES = """() => Array.from(document.querySelectorAll('.js-plotly-plot'))
  .map(gd => gd.getBoundingClientRect()).map(box => [box.left, box.right])"""


# Charts whose visible mode bar overlaps their legend.
MODE_BAR_OVER_LEGEND = """
() => Array.from(document.querySelectorAll('.js-plotly-plot')).filter(gd => {
  const bar = gd.querySelector('.modebar'), legend = gd.querySelector('.legend');
  if (!bar || !legend || getComputedStyle(bar).opacity === '0') return false;
  const a = bar.getBoundingClientRect(), b = legend.getBoundingClientRect();
  return a.width > 0 && a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
}).map(gd => gd.id || gd.className)
"""


def test_no_page_scrolls_sideways_on_a_phone(browser, demo) -> None:
    regression = AlertGroup.objects.get(kind=GroupKind.REGRESSION)
    run_id = regression.head_commit.runs.values_list("pk", flat=True).first()
    compare = f"/compare/?base={regression.base_commit.sha}&head={regression.head_commit.sha}"
    browser.page.set_viewport_size({"width": 390, "height": 844})
    pages = ("/", "/suites/kimi-k3-8k1k/", f"/alerts/{regression.pk}/", f"/runs/{run_id}/", compare)
    for path in (*pages, "/runs/", "/runners/", f"/commits/{regression.head_commit.sha}/"):
        response = browser.page.goto(browser.base_url + path)
        assert response is not None and response.ok, path
        browser.page.wait_for_load_state("networkidle")
        width = browser.page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= 390, (path, width, browser.page.evaluate(WIDER_THAN_THE_SCREEN))
        # Every chart the page drew fits the screen.
        charts = browser.page.evaluate(CHART_EDGES)
        assert all(left >= 0 and right <= 390 for left, right in charts), (path, charts)
        # The navigation folds into a menu: its links are hidden until the menu opens.
        assert not browser.page.locator("nav.nav").is_visible(), path
    browser.page.locator(".menu-toggle").click()
    assert browser.page.locator("nav.nav").is_visible()
    # A touch on a timeline chart shows no mode bar over its legend.
    browser.page.goto(browser.base_url + "/suites/kimi-k3-8k1k/")
    browser.page.wait_for_function("() => document.body.dataset.chartsDrawn === 'true'")
    browser.page.locator(".js-plotly-plot .nsewdrag").first.hover()
    assert browser.page.evaluate(MODE_BAR_OVER_LEGEND) == []
    assert browser.console_errors == []


GROUP_RANGE = "document.querySelector('[data-timeline-url]').dataset.range"
Y_RANGES = "() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd => gd.layout.yaxis.range)"
Y_AUTORANGED = (
    "() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd => gd.layout.yaxis.autorange)"
)


def test_zooming_a_timeline_rescales_its_y_axis_to_the_visible_points(browser, build_history) -> None:
    commits = build_history(commits=40, concurrencies=(16,))
    low, high = commits[30].position, commits[35].position
    browser.open("/suites/kimi-k3-8k1k/?concurrency=16")
    whole = browser.page.evaluate(Y_RANGES)[0]

    browser.page.evaluate(
        "([low, high]) => Plotly.relayout(document.querySelector('.js-plotly-plot'), "
        "{'xaxis.range': [low, high]})",
        [low, high],
    )
    browser.page.wait_for_url(lambda url: "x0=" in url)
    # The zoomed range comes back from the server at full resolution and is drawn again.
    browser.page.wait_for_function(f"() => {GROUP_RANGE} === '{low},{high}'")
    # Throughput (the first chart) grows 2 % a commit: commits 30..35 span 1.6..1.7 times the first value.
    visible = [80.0 * 16**0.6 * (1 + 0.02 * index) for index in range(30, 36)]
    zoomed = browser.page.evaluate(Y_RANGES)[0]
    span = max(visible) - min(visible)
    assert zoomed[0] <= min(visible) and zoomed[1] >= max(visible)
    assert zoomed[1] - zoomed[0] < 1.5 * span < (whole[1] - whole[0]) / 4, (zoomed, whole)

    # A shared link opens zoomed with the same y axis.
    browser.page.reload()
    browser.page.wait_for_function("() => document.body.dataset.chartsDrawn === 'true'")
    assert browser.page.evaluate(Y_RANGES)[0] == pytest.approx(zoomed)

    # Zooming out gives every chart its whole y range back.
    browser.page.evaluate(
        "() => Plotly.relayout(document.querySelector('.js-plotly-plot'), {'xaxis.autorange': true})"
    )
    browser.page.wait_for_url(lambda url: "x0=" not in url)
    browser.page.wait_for_function(f"() => {GROUP_RANGE} === ''")
    assert all(browser.page.evaluate(Y_AUTORANGED))
    assert browser.page.evaluate(Y_RANGES)[0] == pytest.approx(whole)
    assert browser.console_errors == []

"""The pages in a real Chromium (Debian's, driven by Playwright) against the live test server."""

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import cast
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest
from django.core.management import call_command
from django.db import connections
from playwright.sync_api import ConsoleMessage, Page, Request, sync_playwright

from dashboard.benchmarks.models import HEADLINE_METRICS, Suite
from tests.factories import SuiteFactory, bulk_history

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
POINTS_PER_TRACE = """
() => Array.from(document.querySelectorAll('.js-plotly-plot'))
  .filter(gd => gd.dataset.figureKind === 'timeline')
  .map(gd => gd.data.map(trace => trace.x.length))
"""

POINTS_PER_TRACE_BY_LEVEL = """
() => Array.from(document.querySelectorAll('.js-plotly-plot'))
  .filter(gd => gd.dataset.figureKind === 'timeline')
  .map(gd => gd.data.filter(trace => !trace.meta).map(trace => trace.x.length))
"""
TRACE_KINDS = """
() => Array.from(document.querySelectorAll('.js-plotly-plot'))
  .filter(gd => gd.dataset.figureKind === 'timeline')
  .map(gd => gd.data.filter(trace => trace.meta).map(trace => trace.meta.kind))
"""


class BrowserPage:
    def __init__(self, page: Page, base_url: str) -> None:
        self.page = page
        self.base_url = base_url
        self.console_errors: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.console_errors.append(str(error)))

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.console_errors.append(message.text)

    def open(self, path: str) -> None:
        response = self.page.goto(self.base_url + path)
        assert response is not None and response.ok, path
        self.page.wait_for_function("() => document.body.dataset.chartsDrawn === 'true'", timeout=30_000)


@pytest.fixture
def browser(live_server, monkeypatch) -> Iterator[BrowserPage]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium")
    # Playwright's sync API keeps an event loop in this thread; the test's own ORM calls are still
    # plain synchronous code, which Django would otherwise refuse next to a loop.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = chromium.new_page(viewport={"width": 1440, "height": 900})
        page.set_default_timeout(30_000)
        try:
            yield BrowserPage(page, live_server.url)
        finally:
            # Connections opened by the test body while Playwright's loop ran belong to that loop's
            # context: close them here, or the test database cannot be dropped at the end.
            connections.close_all()
            chromium.close()


def test_timeline_draws_every_chart_and_a_click_opens_the_commit(browser, build_history) -> None:
    commits = build_history(commits=12, concurrencies=(1, 4, 16))

    browser.open("/suites/kimi-k3-8k1k/")

    assert browser.page.evaluate(POINTS_PER_TRACE) == [[12, 12, 12]] * len(HEADLINE_METRICS)
    # Click the newest point of the first chart where Plotly draws it.
    point = browser.page.evaluate(
        """() => {
          const gd = document.querySelector('.js-plotly-plot');
          const trace = gd._fullData[2], i = trace.x.length - 1, size = gd._fullLayout._size;
          const box = gd.getBoundingClientRect();
          return {x: box.left + size.l + gd._fullLayout.xaxis.l2p(trace.x[i]),
                  y: box.top + size.t + gd._fullLayout.yaxis.l2p(trace.y[i])};
        }"""
    )
    browser.page.mouse.move(point["x"], point["y"])
    with browser.page.expect_navigation():
        browser.page.mouse.click(point["x"], point["y"])

    assert browser.page.url == f"{browser.base_url}/commits/{commits[-1].sha}/"
    assert browser.page.locator("h1").inner_text() == commits[-1].subject
    assert browser.console_errors == []


def test_the_timeline_asks_for_its_chart_data_once_before_the_chart_scripts_have_loaded(
    browser, build_history
) -> None:
    build_history(commits=6, concurrencies=(1, 16))
    held = []
    browser.page.route("**/perfwatch/charts.*.js", lambda route: held.append(route))
    asked: list[str] = []

    def ask(request: Request) -> None:
        if "/timeline/" in request.url:
            asked.append(request.url)

    browser.page.on("request", ask)

    browser.page.goto(browser.base_url + "/suites/kimi-k3-8k1k/", wait_until="commit")
    browser.page.wait_for_function("() => window.PerfWatch && window.PerfWatch.early")
    browser.page.wait_for_timeout(200)

    # Asked for while the module that draws the charts had not even arrived, as soon as the charts were
    # laid out: the request and the scripts' loading overlap.
    assert held and len(asked) == 1
    for route in held:
        route.continue_()
    browser.page.wait_for_function("() => document.body.dataset.chartsDrawn === 'true'")
    # charts.js took that answer rather than asking again.
    assert len(asked) == 1
    assert browser.page.locator("[data-metric].js-plotly-plot").count() == len(HEADLINE_METRICS)
    assert browser.console_errors == []


def test_zoom_is_shared_by_all_charts_and_kept_in_the_url(browser, build_history) -> None:
    commits = build_history(commits=30, concurrencies=(1, 16))
    low, high = commits[10].position, commits[20].position
    browser.open("/suites/kimi-k3-8k1k/?concurrency=16")

    browser.page.evaluate(
        "([low, high]) => Plotly.relayout(document.querySelector('.js-plotly-plot'), "
        "{'xaxis.range': [low, high]})",
        [low, high],
    )
    browser.page.wait_for_url(lambda url: "x0=" in url)
    # Every chart follows, drawn once with the range the server sends at full resolution.
    browser.page.wait_for_function(
        f"() => document.querySelector('[data-timeline-url]').dataset.range === '{low},{high}'"
    )

    query = parse_qs(urlsplit(browser.page.url).query)
    assert (query["x0"], query["x1"], query["concurrency"]) == ([f"{low}.0"], [f"{high}.0"], ["16"])
    ranges_js = (
        "() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd => gd.layout.xaxis.range)"
    )
    assert browser.page.evaluate(ranges_js) == [[low, high]] * len(HEADLINE_METRICS)

    browser.page.reload()
    browser.page.wait_for_function("() => document.body.dataset.chartsDrawn === 'true'")
    assert browser.page.evaluate(ranges_js) == [[low, high]] * len(HEADLINE_METRICS)
    # The server sent the zoomed range only: its commits and a quarter of the range either side.
    assert browser.page.evaluate(POINTS_PER_TRACE) == [[17]] * len(HEADLINE_METRICS)

    # Zooming out (what a double-click does) drops the range from the URL and from every chart: each shows
    # its whole span again, with a margin either side of 5 % of the plot.
    browser.page.evaluate(
        "() => Plotly.relayout(document.querySelectorAll('.js-plotly-plot')[3], {'xaxis.autorange': true})"
    )
    browser.page.wait_for_url(lambda url: "x0=" not in url)
    assert parse_qs(urlsplit(browser.page.url).query) == {"concurrency": ["16"]}
    browser.page.wait_for_function("() => document.querySelector('[data-timeline-url]').dataset.range === ''")
    first, last = commits[0].position, commits[-1].position
    margin = (last - first) / 18
    for low_shown, high_shown in browser.page.evaluate(ranges_js):
        assert (low_shown, high_shown) == (pytest.approx(first - margin), pytest.approx(last + margin))
    assert browser.page.evaluate(POINTS_PER_TRACE) == [[30]] * len(HEADLINE_METRICS)
    assert browser.console_errors == []


def test_overview_draws_a_sparkline_per_suite(browser, build_history) -> None:
    build_history(commits=8)
    browser.open("/")
    sparklines = browser.page.evaluate(
        "() => Array.from(document.querySelectorAll('a.sparkline polyline'))"
        ".map(line => [line.points.numberOfItems, line.getBoundingClientRect().width > 300])"
    )
    assert sparklines == [[8, True]]
    assert browser.console_errors == []


def test_overview_cards_side_by_side_show_every_column_without_scrolling(browser, build_history) -> None:
    build_history(commits=3)
    build_history(commits=3, suite=SuiteFactory(name="kimi-k3-dcp-120k", hardware_class="b300"))
    browser.open("/")
    cards = browser.page.evaluate(
        """() => Array.from(document.querySelectorAll('.overview-card')).map(card => {
          const wrap = card.querySelector('.table-wrap');
          return [Math.round(card.getBoundingClientRect().top), wrap.scrollWidth - wrap.clientWidth,
                  wrap.querySelectorAll('thead th').length];
        })"""
    )
    # Two cards a row, at their narrowest: every headline column shows, nothing hidden behind a scrollbar.
    assert len(cards) == 2 and cards[0][0] == cards[1][0]
    assert [overflow for _, overflow, _ in cards] == [0, 0]
    assert all(columns == 1 + len(HEADLINE_METRICS) for _, _, columns in cards)


def test_demo_timeline_screenshot(browser, settings, tmp_path) -> None:
    settings.PERFWATCH_DEMO = True
    for command in ("load_demo", "load_demo_github", "detect_alerts"):  # what `make demo` loads
        call_command(command)

    browser.open("/suites/kimi-k3-8k1k/")

    assert "Demo data" in browser.page.locator(".demo-banner").text_content()
    counts = browser.page.evaluate(POINTS_PER_TRACE_BY_LEVEL)
    # The headline metrics at the suite's three levels, then its GSM8K score: one line, a whole-run value.
    levels, accuracy = counts[: len(HEADLINE_METRICS)], counts[len(HEADLINE_METRICS) :]
    assert len(levels) == len(HEADLINE_METRICS) and all(len(traces) == 3 for traces in levels)
    assert len(accuracy) == 1 and len(accuracy[0]) == 1
    assert all(200 < n < 360 for traces in counts for n in traces)  # a few hundred commits, some gaps
    kinds = browser.page.evaluate(TRACE_KINDS)
    assert all({"markers", "alerts"} <= set(chart) for chart in kinds[:1])  # PRs and alerts are drawn
    # Written outside the repository: docs/ screenshots are remade by `manage.py screenshots`, not by a test.
    screenshot = tmp_path / "screenshot-timeline.png"
    browser.page.screenshot(path=str(screenshot), full_page=True)
    assert screenshot.read_bytes().startswith(b"\x89PNG") and screenshot.stat().st_size > 50_000
    assert browser.console_errors == []


def test_a_year_of_history_is_drawn_thinned_and_a_zoom_fetches_full_resolution(browser) -> None:
    """10,000 commits: every chart draws its min/max buckets, each level of the step series stays
    visible, and a zoom brings every commit of the range from the server."""
    count, every = 10_000, 500
    levels = 100.0 * 1.04 ** (np.arange(count) // every)
    # Two one-commit outliers, narrower than a pixel: only min/max buckets keep both (every n-th point
    # would step over them).
    outliers = {7001: 1.5, 3333: 0.6}
    for at, factor in outliers.items():
        levels[at] *= factor
    noise = np.random.default_rng(11).normal(0, 0.002, count)
    bulk_history(
        suite=cast(Suite, SuiteFactory()),
        values={
            (level, metric): (levels * level * (1 + noise)).tolist()
            for level in (1, 16)
            for metric in HEADLINE_METRICS
        },
    )

    browser.open("/suites/kimi-k3-8k1k/")

    counts = browser.page.evaluate(POINTS_PER_TRACE_BY_LEVEL)
    assert len(counts) == len(HEADLINE_METRICS) and all(len(chart) == 2 for chart in counts)
    assert all(100 < n < 1_500 for chart in counts for n in chart)  # thinned to the chart's width
    # A thinned point's hover says the day of its commit (commit i is made i * 50 minutes into 2026).
    hover_days = browser.page.evaluate(
        "() => { const trace = document.querySelector('.js-plotly-plot').data[0];"
        " return Array.from(trace.x).map((x, i) => [x, trace.customdata[i][1]]); }"
    )
    start = datetime(2026, 1, 1, tzinfo=UTC)
    assert all(day == f"{start + timedelta(minutes=50 * x):%b %-d}" for x, day in hover_days)
    drawn_levels = browser.page.evaluate(
        """() => Array.from(document.querySelectorAll('.js-plotly-plot'))
          .filter(gd => gd.dataset.figureKind === 'timeline')
          .map(gd => gd.data.filter(trace => !trace.meta).map(trace => Array.from(trace.y)
            .map(y => Math.round(Math.log(y / trace.y[0]) / Math.log(1.04)))))"""
    )
    outlier_steps = {round(np.log(levels[at] / levels[0]) / np.log(1.04)) for at in outliers}
    for chart in drawn_levels:
        for steps in chart:
            assert set(range(count // every)) <= set(steps)  # no step of the series disappeared
            assert outlier_steps <= set(steps)  # nor an outlier

    browser.page.evaluate(
        "() => Plotly.relayout(document.querySelector('.js-plotly-plot'), {'xaxis.range': [5000, 5100]})"
    )
    browser.page.wait_for_function(
        "() => document.querySelector('[data-timeline-url]').dataset.range === '5000,5100'"
    )
    assert browser.page.locator("[data-timeline-url]").get_attribute("data-resolution") == "full"
    zoomed = browser.page.evaluate(
        """() => Array.from(document.querySelectorAll('.js-plotly-plot'))
          .filter(gd => gd.dataset.figureKind === 'timeline')
          .map(gd => gd.data.filter(trace => !trace.meta).map(trace => Array.from(trace.x)))"""
    )
    assert all(xs == list(range(4975, 5126)) for chart in zoomed for xs in chart)
    assert browser.console_errors == []

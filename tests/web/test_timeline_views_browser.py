"""The timeline as a triager reads it for steps, in Chromium: skeletons while it loads, the spread of a
commit's repeated runs, scales, small multiples and PR labels that never overlap."""

from typing import cast

import pytest
from playwright.sync_api import Route

from dashboard.benchmarks.models import Suite
from tests.factories import run_with_values
from tests.web import test_browser

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

browser = test_browser.browser

TIMELINE = "/suites/kimi-k3-8k1k/"
CHART = "document.querySelector('[data-metric=\"{metric}\"]')"


def test_each_chart_shows_a_skeleton_until_it_is_drawn(browser, build_history) -> None:
    build_history(commits=6, concurrencies=(1, 4))
    held: list[Route] = []
    browser.page.route("**/api/suites/**", lambda route: held.append(route))

    browser.page.goto(browser.base_url + TIMELINE)
    browser.page.wait_for_timeout(300)

    charts = browser.page.locator("[data-metric]")
    assert charts.count() == 5
    assert browser.page.locator("[data-metric] [data-skeleton]").count() == charts.count()
    assert browser.page.locator("[data-metric] [data-skeleton]").first.is_visible()
    assert held  # the charts' request is still waiting
    for route in held:
        route.continue_()
    browser.page.wait_for_function("() => document.body.dataset.chartsDrawn === 'true'")

    assert browser.page.locator("[data-skeleton]").count() == 0
    assert browser.page.locator("[data-metric].js-plotly-plot").count() == 5
    assert browser.console_errors == []


def test_a_commit_measured_three_times_is_drawn_with_a_bar_from_its_lowest_to_its_highest_run(
    browser, build_history
) -> None:
    commits = build_history(commits=6, concurrencies=(1,))
    suite = Suite.objects.get()
    repeated = commits[3]
    median = cast(float, repeated.measurements.get(series__metric="ttft_ms_mean").value)
    for value in (median - 40.0, median + 90.0):
        run_with_values(commit=repeated, suite=suite, values={(1, "ttft_ms_mean"): value})

    browser.open(TIMELINE)

    chart = CHART.format(metric="ttft_ms_mean")
    bars = browser.page.evaluate(
        f"""() => {{
          const gd = {chart};
          const yaxis = gd._fullLayout.yaxis;
          return Array.from(gd.querySelectorAll('g.errorbar path.yerror'))
            .filter(path => path.getAttribute('d'))
            .map(path => path.getBBox())
            .map(box => [yaxis.p2l(box.y + box.height), yaxis.p2l(box.y)]);
        }}"""
    )
    assert len(bars) == 1
    low, high = bars[0]
    assert low == pytest.approx(median - 40.0, rel=0.02) and high == pytest.approx(median + 90.0, rel=0.02)
    hover = browser.page.evaluate(
        f"""() => {{ const trace = {chart}.data[0];
          return trace.customdata[3][5]; }}"""
    )
    assert "median of 3 runs" in hover

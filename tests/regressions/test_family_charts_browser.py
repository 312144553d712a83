"""The group page in Chromium folds a family's percentiles into one chart: alerts on ITL p50 and p99 at one
level are two bold traces of the one ITL chart, beside its quiet mean and p90, each named in the legend,
on a desktop and on a phone; the chart's data downloads with every trace."""

from __future__ import annotations

import csv
import io

import pytest

from tests.regressions.test_family_charts import family_world
from tests.web import test_browser
from tests.web.test_browser import BrowserPage

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

browser = test_browser.browser  # the same Chromium fixture as the other pages' checks

# Each drawn chart of the page: its card's family and level, and the traces its legend lists, read from
# the Plotly graph div as drawn (name, line width, opacity).
CHARTS = """() => Array.from(document.querySelectorAll('.chart-grid .chart-card')).map(card => {
  const gd = card.querySelector('.js-plotly-plot');
  return {
    family: card.dataset.family, concurrency: Number(card.dataset.concurrency),
    legend: gd._fullData.filter(t => t.showlegend).map(t => [t.name, t.line.width, t.opacity]),
    legendShown: gd._fullLayout.showlegend,
    legendText: Array.from(gd.querySelectorAll('.legend .legendtext')).map(el => el.textContent),
  };
})"""


def _charts(browser: BrowserPage, path: str) -> list[dict]:
    browser.open(path)
    return browser.page.evaluate(CHARTS)


@pytest.mark.parametrize("viewport", [(1440, 900), (390, 844)], ids=["desktop", "phone"])
def test_alerts_on_itl_p50_and_p99_are_two_traces_of_one_chart(browser: BrowserPage, viewport) -> None:
    world = family_world(alerted={(16, "itl_ms_p50"): 9.0, (16, "itl_ms_p99"): 12.0})
    browser.page.set_viewport_size({"width": viewport[0], "height": viewport[1]})

    charts = _charts(browser, f"/alerts/{world.group.pk}/")

    [chart] = charts  # one chart, not one per percentile
    assert (chart["family"], chart["concurrency"]) == ("itl_ms", 16)
    names = [name for name, _, _ in chart["legend"]]
    assert sorted(names) == ["ITL mean", "ITL p50", "ITL p90", "ITL p99"]
    assert chart["legendShown"] and sorted(chart["legendText"]) == sorted(names)
    width = {name: line_width for name, line_width, _ in chart["legend"]}
    opacity = {name: trace_opacity for name, _, trace_opacity in chart["legend"]}
    for alerted in ("ITL p50", "ITL p99"):
        for quiet in ("ITL mean", "ITL p90"):
            assert width[alerted] > width[quiet] and opacity[alerted] > opacity[quiet]
    header = browser.page.locator(".chart-card .changes").inner_text()
    assert "p50 +9.0 %" in header and "p99 +12.0 %" in header

    # The chart's CSV holds every trace's points.
    link = browser.page.locator(".chart-card .downloads a", has_text="CSV").get_attribute("href")
    assert link is not None
    response = browser.page.request.get(browser.base_url + link)
    assert response.ok
    series = {row["series"] for row in csv.DictReader(io.StringIO(response.text()))}
    assert {"ITL mean", "ITL p50", "ITL p90", "ITL p99"} <= series
    assert browser.console_errors == []

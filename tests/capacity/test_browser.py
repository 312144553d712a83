"""The compare page's load-curve chart in a real Chromium: two commits, the objectives, both capacities."""

from pathlib import Path

import pytest

from tests.capacity.conftest import CONCURRENT_REPORT
from tests.web.test_browser import BrowserPage, browser  # noqa: F401  (the fixture is reused here)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BASE_SHA, HEAD_SHA = "3c" * 20, "4d" * 20
SCREENSHOT = Path("/tmp") / "perfwatch-compare-load-curve.png"

DRAWN = """
() => Array.from(document.querySelectorAll('.js-plotly-plot[data-load-curve]')).map(gd => ({
  family: gd.dataset.loadCurve,
  objectives: gd._fullLayout.shapes.map(shape => shape.y0),
  capacities: gd._fullData.filter(t => t.name.endsWith('capacity')).map(t => [t.name, t.x.length]),
  curves: gd._fullData.filter(t => !t.name.endsWith('capacity')).map(t => t.name),
  points: gd.querySelectorAll('.scatterlayer .trace .points path').length,
}))
"""


def test_compare_draws_two_commits_their_objectives_and_both_capacity_points(
    browser: BrowserPage,  # noqa: F811
    sweep_run_ingest,
) -> None:
    sweep_run_ingest(sha=BASE_SHA)
    sweep_run_ingest(sha=HEAD_SHA, raw=CONCURRENT_REPORT.read_bytes())

    browser.open(f"/compare/?base={BASE_SHA}&head={HEAD_SHA}&suite=tiny-llama-cpu-sweep&hardware=cpu")

    charts = browser.page.evaluate(DRAWN)
    browser.page.locator("[data-load-curves]").screenshot(path=str(SCREENSHOT))
    assert [chart["family"] for chart in charts] == ["ttft_ms", "itl_ms"]
    ttft = charts[0]
    assert ttft["objectives"] == [500]
    assert ttft["capacities"] == [[f"{BASE_SHA[:8]} capacity", 1], [f"{HEAD_SHA[:8]} capacity", 1]]
    assert ttft["curves"] == [f"{sha[:8]} {stat}" for sha in (BASE_SHA, HEAD_SHA) for stat in ("p50", "p99")]
    assert ttft["points"] > 2 * 4
    assert charts[1]["objectives"] == [150]
    assert browser.console_errors == []

"""A commit run by a fleet of 500 suite and hardware pairs: its page shows what changed in full, folds the
rest into one line each (fetched when opened) and stays a page a browser loads at once."""

import re

import numpy as np
import pytest
from django.test import Client

from dashboard.benchmarks.models import HEADLINE_METRICS, Commit, Series
from tests.factories import fleet_history
from tests.web.test_browser import BrowserPage
from tests.web.test_browser import browser as browser  # the Chromium fixture

SUITES = 250
HARDWARE = ("b300", "h200")
COMMITS = 20
PAGE_LIMIT_BYTES = 500 * 1024


def _fleet() -> tuple[list[Commit], str]:
    """Twenty commits, each run by every pair; the last one slows fleet-007 on h200 by a third."""
    noise = np.random.default_rng(7).normal(
        1.0, 0.01, (SUITES * len(HARDWARE) * len(HEADLINE_METRICS), COMMITS)
    )
    rows: dict[int, int] = {}

    def value(series: Series, index: int) -> float:
        row = rows.setdefault(series.pk, len(rows))
        changed = series.suite.name == "fleet-007" and series.hardware_class == "h200"
        return 100.0 * noise[row, index] * (0.66 if changed and index == COMMITS - 1 else 1.0)

    return fleet_history(suites=SUITES, hardware=HARDWARE, commits=COMMITS, value=value), "fleet-007"


@pytest.mark.django_db
def test_a_commit_run_by_500_pairs_shows_the_change_in_full_and_folds_the_rest(client: Client) -> None:
    commits, changed = _fleet()

    response = client.get(f"/commits/{commits[-1].sha}/")

    assert response.status_code == 200
    html = response.content.decode()
    assert len(response.content) < PAGE_LIMIT_BYTES
    shown = re.findall(
        r'<header class="card-head">\s*<h2>([^<]+)</h2>\s*<span class="pill hardware">([^<]+)', html
    )
    assert shown[0] == (changed, "h200")
    folded = re.findall(r'data-fragment-url="([^"]+measurements/\?[^"]+)"', html)
    assert len(folded) + len(shown) == SUITES * len(HARDWARE)
    # Every run is there to open, beyond the first ones shown.
    assert re.search(r'data-fragment-url="[^"]+/runs/"', html)

    block = client.get(folded[0].replace("&amp;", "&"))

    assert block.status_code == 200
    assert "Timeline →" in block.content.decode()
    runs = client.get(f"/commits/{commits[-1].sha}/runs/")
    assert runs.status_code == 200
    assert runs.content.decode().count('class="status status-succeeded"') == SUITES * len(HARDWARE) - 25


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_folded_pair_is_fetched_when_opened_and_the_rest_of_the_runs_too(browser: BrowserPage) -> None:
    commits, _ = _fleet()
    browser.open(f"/commits/{commits[-1].sha}/")
    folded = browser.page.locator("details.folded-block").first

    folded.locator("summary").click()
    browser.page.wait_for_function(
        "() => document.querySelector('details.folded-block').dataset.loaded === 'true'", timeout=30_000
    )
    assert folded.locator("table.data").count() >= 1
    browser.page.locator("details.folded-runs summary").click()
    browser.page.wait_for_function(
        "() => document.querySelector('details.folded-runs').dataset.loaded === 'true'", timeout=30_000
    )
    assert browser.page.locator("details.folded-runs tr").count() == SUITES * len(HARDWARE) - 25
    assert browser.console_errors == []

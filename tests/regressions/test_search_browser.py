"""The group page in Chromium shows where its culprit search stands: the commits of the range, how likely
each is the culprit, and how many runs each has, as the search moves and once it has found the culprit."""

from __future__ import annotations

from typing import Any

import pytest

from dashboard.benchmarks.models import Measurement, Run, RunStatus
from dashboard.regressions.sheriff.search import group_search
from tests.regressions.test_search import BASE, HEAD, World, _step, dispatched  # noqa: F401  (fixture)
from tests.web import test_browser
from tests.web.test_browser import BrowserPage

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

browser = test_browser.browser  # the same Chromium fixture as the other pages' checks

ROWS = """() => Array.from(document.querySelectorAll('#culprit-search tbody tr')).map(tr => [
  tr.dataset.posteriorSha, tr.querySelector('.probability').textContent.trim(),
  Number(tr.querySelector('meter').value), tr.cells[3].textContent.trim()])"""


def _rows(browser: BrowserPage, group_id: int) -> list[list[Any]]:
    browser.open(f"/alerts/{group_id}/")
    return browser.page.evaluate(ROWS)


def test_the_group_page_shows_the_posterior_of_its_search(browser: BrowserPage) -> None:
    world = World(level=_step(35, factor=0.94), benchmarked=lambda i: not BASE < i < HEAD, seed=11)
    group = world.confirmed()
    group_search(group_id=group.pk)

    # Before any search run: eight equally likely commits, the middle one's run on its way.
    rows = _rows(browser, group.pk)
    assert [row[0] for row in rows] == [world.commits[i].sha for i in range(BASE + 1, HEAD + 1)]
    assert {row[1] for row in rows} == {"12.5 %"}
    assert rows[3][3] == "0 (+1 on the way)"
    assert "searching: 1 of at most 32 runs" in browser.page.locator("#culprit-search").inner_text()

    # The middle commit measures as before: the posterior moves past it.
    run = Run.objects.get(status=RunStatus.QUEUED)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED)
    Measurement.objects.create(run=run, series=world.series, commit=run.commit, value=world.level(33))
    group_search(group_id=group.pk)
    rows = _rows(browser, group.pk)
    likely = {row[0]: row[2] for row in rows}
    assert sum(likely.get(world.commits[i].sha, 0.0) for i in range(34, 38)) > 0.95
    ran = next(row for row in rows if row[0] == world.commits[33].sha)
    assert ran[3] == "1"

    world.search(group)
    rows = _rows(browser, group.pk)
    culprit = browser.page.locator("#culprit-search tr.culprit")
    assert culprit.get_attribute("data-posterior-sha") == world.commits[35].sha
    assert float(culprit.locator("meter").get_attribute("value") or 0) >= 0.95
    assert "found: one commit holds at least 99 %" in browser.page.locator("#culprit-search").inner_text()
    assert "Culprit narrowed to one commit" in browser.page.content()

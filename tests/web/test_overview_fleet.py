"""An overview of a fleet of suite and hardware pairs: a first screenful of cards, those with open
regressions among them, and the rest folded into one line each whose card is fetched when opened."""

import re

import pytest
from django.test import Client

from dashboard.benchmarks.models import Series
from dashboard.regressions.models import Alert, AlertGroup, AlertKind, GroupKind
from dashboard.web.tables import OVERVIEW_FOLD_FROM, OVERVIEW_SHOWN
from tests.factories import fleet_history
from tests.web.test_browser import BrowserPage
from tests.web.test_browser import browser as browser  # the Chromium fixture

SUITES = 20
HARDWARE = ("b300", "h200")
COMMITS = 3
CARD = re.compile(
    r'<section class="card overview-card">\s*<header class="card-head">\s*<h2><a [^>]+>([^<]+)</a></h2>'
    r'\s*<span class="pill hardware">([^<]+)'
)
FOLDED = re.compile(
    r'data-fragment-url="(/overview/cards/\?[^"]+)">\s*<summary><span>([^<]+)</span> '
    r'<span class="pill hardware">([^<]+)'
)


def _fleet() -> list[tuple[str, str]]:
    """Three commits run by every pair of twenty suites and two hardware classes, and an open regression
    on the throughput of fleet-017 on h200 and of fleet-011 on b300: those two pairs, in that order."""
    commits = fleet_history(
        suites=SUITES, hardware=HARDWARE, commits=COMMITS, value=lambda series, index: 100.0 + index
    )
    regressed = [("fleet-017", "h200"), ("fleet-011", "b300")]
    for head, change, (name, hardware) in zip((1, 2), (-9.0, -4.0), regressed, strict=True):
        group = AlertGroup.objects.create(
            base_commit=commits[head - 1],
            head_commit=commits[head],
            kind=GroupKind.REGRESSION,
            magnitude_pct=-change,
        )
        Alert.objects.create(
            group=group,
            series=Series.objects.get(
                suite__name=name, hardware_class=hardware, metric="output_throughput_tok_s"
            ),
            kind=AlertKind.REGRESSION,
            before_value=100.0,
            after_value=100.0 + change,
            change_pct=change,
        )
    return regressed


@pytest.mark.django_db
def test_a_fleet_overview_shows_a_screenful_of_cards_with_the_open_regressions_and_folds_the_rest(
    client: Client,
) -> None:
    regressed = _fleet()
    assert SUITES * len(HARDWARE) >= OVERVIEW_FOLD_FROM

    html = client.get("/").content.decode()

    shown = CARD.findall(html)
    assert len(shown) == OVERVIEW_SHOWN
    # The pairs with an open regression are among the cards, which keep the overview's order.
    assert set(regressed) <= set(shown)
    assert shown == sorted(shown)
    assert shown[:3] == [("fleet-000", "b300"), ("fleet-000", "h200"), ("fleet-001", "b300")]
    folded = FOLDED.findall(html)
    assert len(folded) + len(shown) == SUITES * len(HARDWARE)
    assert {(name, hardware) for _, name, hardware in folded}.isdisjoint(shown)

    url, name, hardware = folded[-1]
    card = client.get(url.replace("&amp;", "&"))

    assert card.status_code == 200
    assert CARD.findall(card.content.decode()) == [(name, hardware)]
    assert "Open timeline →" in card.content.decode()
    assert client.get("/overview/cards/?suite=fleet-999&hardware=b300").status_code == 404
    assert client.get(f"/overview/cards/?suite={name}&hardware=a100").status_code == 404


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_folded_overview_card_is_fetched_when_opened(browser: BrowserPage) -> None:
    _fleet()
    browser.open("/")
    folded = browser.page.locator("details.folded-block").first

    folded.locator("summary").click()
    browser.page.wait_for_function(
        "() => document.querySelector('details.folded-block').dataset.loaded === 'true'", timeout=30_000
    )

    assert folded.locator("section.overview-card a.sparkline polyline").count() == 1
    assert folded.locator("table.data tbody tr").count() == 1
    assert browser.console_errors == []

"""The group page's "What got slower" in Chromium: the ops of largest change, ms and %, their share of the
step, and both traces one click away."""

from __future__ import annotations

import gzip

import pytest

from tests.regressions.profile_world import PROFILES, profiled_group_create
from tests.web import test_browser
from tests.web.test_browser import BrowserPage

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

browser = test_browser.browser  # the same Chromium fixture as the other pages' checks
ROWS = """() => Array.from(document.querySelectorAll('[data-what-got-slower] tr[data-op]')).map(
  tr => Array.from(tr.cells).map(td => td.getAttribute('title') || td.textContent.trim()))"""


def test_the_group_page_shows_what_got_slower_with_both_traces_to_download(browser: BrowserPage) -> None:
    world = profiled_group_create()

    browser.open(f"/alerts/{world.group.pk}/")
    page = browser.page
    section = page.locator("[data-what-got-slower]")

    assert page.locator("h2#what-got-slower").text_content() == "What got slower"
    assert world.parent.short_sha in section.inner_text() and world.culprit.short_sha in section.inner_text()
    rows = page.evaluate(ROWS)
    assert 1 < len(rows) <= 15
    changes = [abs(float(row[4])) for row in rows]
    assert changes == sorted(changes, reverse=True)
    gemm = next(row for row in rows if row[0].startswith("nvjet_sm90"))
    _, device, base_ms, head_ms, delta_ms, delta_pct, share = gemm
    assert device == "gpu" and float(head_ms) > 5 * float(base_ms)
    assert delta_ms.startswith("+") and delta_pct.endswith(" %") and float(delta_pct[:-2]) > 300
    # The GEMM alone adds more than the parent's whole GPU step.
    assert share.endswith(" %") and float(share[:-2]) > 100
    assert section.locator("td.op-name").first.evaluate(
        "td => td.scrollWidth <= td.closest('.table-wrap').scrollWidth"
    )

    for which, tag in (("base", "gpu_base"), ("head", "gpu_head")):
        with page.expect_download() as download_info:
            section.locator(f"a[data-trace={which}]").click()
        download = download_info.value
        assert download.suggested_filename.endswith(".pt.trace.json.gz")
        path = download.path()
        assert path is not None
        content = path.read_bytes()
        assert content == (PROFILES / f"{tag}_trace.json.gz").read_bytes()
        assert b'"traceEvents"' in gzip.decompress(content)
    assert browser.console_errors == []


def test_a_group_without_profiles_has_no_such_section(browser: BrowserPage) -> None:
    world = profiled_group_create(profiled=False)

    browser.open(f"/alerts/{world.group.pk}/")

    assert browser.page.locator("[data-what-got-slower]").count() == 0
    assert browser.page.locator("#what-got-slower").count() == 0

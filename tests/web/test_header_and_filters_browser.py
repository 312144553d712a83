"""The header says who is signed in on every page and signs out; filters say when a value is unknown; the
alerts list answers to Perfherder's keys."""

import pytest
from django.contrib.auth.models import User
from django.db import transaction

from dashboard.regressions.models import Alert, AlertGroup, TriageStatus
from tests.regressions.conftest import suite_create
from tests.regressions.test_pages import group_create
from tests.web import test_browser
from tests.web.test_browser import BrowserPage

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

browser = test_browser.browser  # the same Chromium fixture as the other pages' checks


def _sign_in(browser: BrowserPage, path: str, username: str) -> None:
    browser.page.goto(browser.base_url + path)
    with browser.page.expect_navigation():
        browser.page.locator("header a.sign-in").click()
    browser.page.fill("#id_username", username)
    browser.page.fill("#id_password", "pw")
    with browser.page.expect_navigation():
        browser.page.locator("input[type=submit]").click()
    # The site's own sign-in page, in its look: it returns to the page it was opened from.
    assert browser.page.url.startswith(f"{browser.base_url}{path}")


def test_the_header_shows_who_is_signed_in_on_every_page_and_signs_out(browser, build_history) -> None:
    build_history(commits=3)
    User.objects.create_user("triager", password="pw", is_staff=True)

    _sign_in(browser, "/alerts/", "triager")

    assert browser.page.url == f"{browser.base_url}/alerts/"  # back where the sign-in started
    for path in ("/", "/suites/", "/suites/kimi-k3-8k1k/", "/alerts/", "/runs/", "/runners/", "/compare/"):
        response = browser.page.goto(browser.base_url + path)
        assert response is not None and response.ok, path
        assert browser.page.locator("header .signed-in").inner_text() == "Signed in as triager", path
        assert browser.page.locator("header a.sign-in").count() == 0, path

    with browser.page.expect_navigation():
        browser.page.locator("header form.sign-out button").click()
    assert browser.page.url == f"{browser.base_url}/compare/"
    assert browser.page.locator("header .signed-in").count() == 0
    assert browser.page.locator("header a.sign-in").get_attribute("href") == "/accounts/login/?next=/compare/"
    assert browser.console_errors == []
    # Signed out for real: the admin asks for a sign-in again.
    browser.page.goto(browser.base_url + "/admin/")
    assert "/admin/login/" in browser.page.url


SELECTED = """
(name) => {
  const select = document.querySelector(`select[name=${name}]`);
  return [select.value, select.selectedOptions[0].text];
}
"""


def test_an_unknown_filter_value_is_said_and_stays_selected(browser, build_history) -> None:
    build_history(commits=3)

    browser.open("/suites/kimi-k3-8k1k/?hardware=h100")

    problem = browser.page.locator("[data-filter-problem=hardware]")
    assert problem.is_visible()
    assert problem.inner_text() == "No measurements of this suite on hardware 'h100': it is measured on b300."
    assert browser.page.evaluate(SELECTED, "hardware") == ["h100", "h100 (unknown)"]

    response = browser.page.goto(f"{browser.base_url}/alerts/?hardware=h100&kind=catastrophe")
    assert response is not None and response.ok
    assert browser.page.locator("[data-filter-problem=hardware]").is_visible()
    assert browser.page.locator("[data-filter-problem=kind]").is_visible()
    assert browser.page.evaluate(SELECTED, "hardware") == ["h100", "h100 (unknown)"]
    assert browser.page.evaluate(SELECTED, "kind") == ["catastrophe", "catastrophe (unknown, ignored)"]
    assert browser.console_errors == []


ROW_IDS = "() => Array.from(document.querySelectorAll('tr[data-group-id]')).map(row => row.dataset.groupId)"
FOCUSED = """
() => {
  const row = document.querySelector('tr.focused');
  return row && document.activeElement === row
    ? [row.dataset.groupId, getComputedStyle(row).boxShadow !== 'none'] : null;
}
"""


def _badge(browser: BrowserPage, group_id: str) -> str:
    return browser.page.locator(f"tr[data-group-id='{group_id}'] [data-status]").inner_text()


def test_keyboard_shortcuts_move_between_groups_and_set_their_status(browser) -> None:
    with transaction.atomic():  # alerts join their group under its row lock
        suite = suite_create()
        groups = [group_create(suite=suite, change_pct=-3.0 - index) for index in range(3)]
    User.objects.create_user("triager", password="pw", is_staff=True)

    # Signed out: the keys move and open, but a status key only says that it needs staff.
    response = browser.page.goto(browser.base_url + "/alerts/")
    assert response is not None and response.ok
    ids = browser.page.evaluate(ROW_IDS)
    assert sorted(ids) == sorted(str(group.pk) for group in groups)
    browser.page.keyboard.press("j")
    browser.page.keyboard.press("i")
    assert (
        browser.page.locator("[data-shortcut-notice]").inner_text()
        == "Setting a status needs a staff sign-in."
    )
    assert not AlertGroup.objects.exclude(status=TriageStatus.UNTRIAGED).exists()

    _sign_in(browser, "/alerts/", "triager")
    browser.page.keyboard.press("?")
    help_dialog = browser.page.locator("#shortcuts-help")
    assert help_dialog.is_visible()
    assert "set the group's status: Investigating" in help_dialog.inner_text()
    browser.page.keyboard.press("Escape")
    assert not help_dialog.is_visible()

    browser.page.keyboard.press("j")
    assert browser.page.evaluate(FOCUSED) == [ids[0], True]  # focused, and visibly so
    browser.page.keyboard.press("j")
    browser.page.keyboard.press("j")
    browser.page.keyboard.press("k")
    assert browser.page.evaluate(FOCUSED) == [ids[1], True]

    browser.page.keyboard.press("i")
    browser.page.wait_for_function(
        f"() => document.body.innerText.includes('Group #{ids[1]}: Investigating.')"
    )
    assert _badge(browser, ids[1]) == "Investigating"
    assert AlertGroup.objects.get(pk=ids[1]).status == TriageStatus.INVESTIGATING
    # The group's alerts follow it.
    assert list(Alert.objects.filter(group_id=ids[1]).values_list("status", flat=True)) == ["investigating"]
    browser.page.keyboard.press("k")
    browser.page.keyboard.press("x")
    browser.page.wait_for_function(f"() => document.body.innerText.includes('Group #{ids[0]}: Invalid.')")
    assert AlertGroup.objects.get(pk=ids[0]).status == TriageStatus.INVALID
    assert _badge(browser, ids[0]) == "Invalid" and _badge(browser, ids[2]) == "Untriaged"
    browser.page.keyboard.press("u")
    browser.page.wait_for_function(f"() => document.body.innerText.includes('Group #{ids[0]}: Untriaged.')")
    assert AlertGroup.objects.get(pk=ids[0]).status == TriageStatus.UNTRIAGED

    # A reload shows what was saved; o opens the focused group.
    browser.page.reload()
    assert _badge(browser, ids[1]) == "Investigating"
    browser.page.keyboard.press("j")
    with browser.page.expect_navigation():
        browser.page.keyboard.press("o")
    assert browser.page.url == f"{browser.base_url}/alerts/{ids[0]}/"
    assert browser.console_errors == []

"""The header says who is signed in on every page and signs out; filters say when a value is unknown."""

import pytest
from django.contrib.auth.models import User

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


def test_the_header_shows_who_is_signed_in_on_every_page_and_signs_out(browser, build_history) -> None:
    build_history(commits=3)
    User.objects.create_user("triager", password="pw", is_staff=True)

    _sign_in(browser, "/alerts/", "triager")
    browser.console_errors.clear()  # the admin's sign-in page asks for a /favicon.ico there is not

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
    assert browser.page.locator("header a.sign-in").get_attribute("href") == "/admin/login/?next=/compare/"
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

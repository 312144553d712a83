"""Contributors and words in Chromium: a non-staff member of the Commenters group signs in on the site's
own page and comments; a plain account cannot. Metrics read as names with units, changes carry their
sign, p-values below 0.0001 say so, and a group with no channel says why nothing went out and shows the
message that would."""

from __future__ import annotations

from typing import cast

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.db import transaction

from dashboard.benchmarks.models import Suite
from dashboard.regressions.models import Comment
from tests.factories import SuiteFactory
from tests.regressions.test_pages import group_create
from tests.web import test_browser

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

browser = test_browser.browser


def _sign_in(browser, *, username: str, next_path: str) -> None:
    browser.page.goto(browser.base_url + next_path)
    with browser.page.expect_navigation():
        browser.page.locator("header a.sign-in").click()
    # The site's own sign-in page: its header, its search box, no Django admin branding.
    assert browser.page.url.startswith(f"{browser.base_url}/accounts/login/")
    assert browser.page.locator("header .brand").count() == 1
    assert "Django administration" not in browser.page.content()
    browser.page.locator("input[name=username]").fill(username)
    browser.page.locator("input[name=password]").fill("a-long-password-123")
    with browser.page.expect_navigation():
        browser.page.locator("form.sign-in-form input[type=submit]").click()
    assert browser.page.url == f"{browser.base_url}{next_path}"


def test_a_commenter_who_is_not_staff_signs_in_on_the_sites_page_and_comments(browser) -> None:
    with transaction.atomic():  # as detection writes alerts
        group = group_create(suite=cast(Suite, SuiteFactory()), change_pct=-6.0)
    commenter = User.objects.create_user("contributor", password="a-long-password-123")
    # The group a migration makes (made again here: a browser test's database is flushed between tests).
    commenters, _ = Group.objects.get_or_create(name="Commenters")
    commenters.permissions.add(
        Permission.objects.get(codename="add_comment", content_type__app_label="regressions")
    )
    commenter.groups.add(commenters)
    User.objects.create_user("visitor", password="a-long-password-123")
    path = f"/alerts/{group.pk}/"

    _sign_in(browser, username="contributor", next_path=path)
    assert browser.page.locator("form.triage-form").count() == 0  # triage stays with staff
    browser.page.locator("form.comment-form textarea").fill("Reproduced on our B300 too.")
    with browser.page.expect_navigation():
        browser.page.locator("form.comment-form button").click()
    assert "Reproduced on our B300 too." in browser.page.locator("main").inner_text()
    assert Comment.objects.get().author == commenter

    browser.page.context.clear_cookies()
    _sign_in(browser, username="visitor", next_path=path)
    assert browser.page.locator("form.comment-form").count() == 0
    assert browser.console_errors == []


def test_a_group_reads_in_words_and_previews_the_message_no_channel_sent(browser, settings) -> None:
    settings.PERFWATCH_ALERT_EMAILS, settings.PERFWATCH_SLACK_WEBHOOK_URL, settings.GITHUB_TOKEN = [], "", ""
    suite = cast(Suite, SuiteFactory())
    with transaction.atomic():
        regression = group_create(suite=suite, change_pct=-6.0)
        improvement = group_create(suite=suite, change_pct=9.1)

    browser.open("/alerts/")
    sizes = browser.page.locator("table.alert-groups .change").all_text_contents()
    assert "\u22126.0 %" in sizes and "+9.1 %" in sizes
    assert "Throughput (tok/s)" in browser.page.locator("table.alert-groups").inner_text()
    assert "output_throughput_tok_s" not in browser.page.locator("table.alert-groups").inner_text()

    browser.open(f"/alerts/{regression.pk}/")
    main = browser.page.locator("main").inner_text()
    assert "output_throughput_tok_s" not in main
    assert "Throughput (tok/s)" in main
    silence = browser.page.locator(".notification-silence").inner_text()
    assert "no channel is set up" in silence and "PERFWATCH_ALERT_EMAILS" in silence
    preview = browser.page.locator(".notification-preview")
    assert preview.get_attribute("open") is not None
    assert "PerfWatch found a Regression" in preview.locator("pre").inner_text()

    browser.open(f"/alerts/{improvement.pk}/")
    assert "improvements are not announced" in browser.page.locator(".notification-silence").inner_text()
    assert browser.console_errors == []


def test_p_values_below_a_ten_thousandth_read_as_such() -> None:
    from dashboard.web.templatetags.perfwatch import p_value, signed_pct

    assert p_value(3e-12) == "< 0.0001"
    assert p_value(0.0123) == "0.0123"
    assert signed_pct(-5.8) == "\u22125.8 %" and signed_pct(9.1) == "+9.1 %" and signed_pct(0.01) == "0.0 %"

"""Under the Content-Security-Policy every chart still draws in Chromium and nothing is refused."""

import pytest

from dashboard.benchmarks.models import HEADLINE_METRICS
from tests.web.test_browser import browser  # noqa: F401  (the Chromium fixture)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Recorded from the first moment of every page: any script, style, image or connection the policy refused.
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', (event) => {
  window.__cspViolations.push(event.violatedDirective + ' ' + (event.blockedURI || 'inline'));
});
"""


def test_pages_draw_their_charts_under_the_policy_with_no_violation(browser, build_history) -> None:  # noqa: F811
    build_history(commits=8)
    browser.page.add_init_script(RECORD_VIOLATIONS)
    # The overview draws its sparklines as server-side SVG; the timeline draws Plotly charts.
    response = browser.page.goto(browser.base_url + "/")
    assert response is not None and "script-src 'self'" in response.headers["content-security-policy"]
    assert browser.page.locator(".sparkline svg").count() >= 1
    assert browser.page.evaluate("() => window.__cspViolations") == []
    response = browser.page.goto(browser.base_url + "/suites/kimi-k3-8k1k/")
    assert response is not None and "script-src 'self'" in response.headers["content-security-policy"]
    browser.page.wait_for_function("() => document.body.dataset.chartsDrawn === 'true'", timeout=30_000)
    drawn = browser.page.evaluate("() => document.querySelectorAll('.js-plotly-plot .main-svg').length")
    assert drawn >= len(HEADLINE_METRICS)
    # Hover a chart: Plotly builds its tooltip and styles at that moment.
    browser.page.hover(".js-plotly-plot .nsewdrag")
    assert browser.page.evaluate("() => window.__cspViolations") == []
    for path in ("/runs/", "/alerts/", "/admin/login/"):
        browser.page.goto(browser.base_url + path)
        assert browser.page.evaluate("() => window.__cspViolations") == [], path
    assert browser.console_errors == []

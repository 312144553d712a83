"""Static files as a production site serves them: hashed names cached for a year, sent compressed, and
a plotly.js of only the cartesian trace types that still draws every chart."""

import gzip
import hashlib
import re
from pathlib import Path

import brotli
import pytest
from django.test import Client

from dashboard.benchmarks.models import HEADLINE_METRICS
from tests.web.test_browser import browser  # noqa: F401  (the Chromium fixture)

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "dashboard" / "web" / "static" / "vendor" / "plotly" / "plotly-cartesian.min.js"
HASHED_BUNDLE = re.compile(r'src="(/static/vendor/plotly/plotly-cartesian\.min\.[0-9a-f]{12}\.js)"')
ONE_YEAR_S = 365 * 24 * 3600


def _bundle_url(client: Client) -> str:
    html = client.get("/suites/kimi-k3-8k1k/").content.decode()
    found = HASHED_BUNDLE.search(html)
    assert found, "the page names plotly.js by its content hash"
    return found.group(1)


def _body(response) -> bytes:
    return b"".join(response.streaming_content)


@pytest.mark.django_db
def test_static_files_have_hashed_names_and_a_far_future_immutable_cache(client, build_history) -> None:
    build_history(commits=2)

    response = client.get(_bundle_url(client))

    assert response.status_code == 200
    max_age = re.search(r"max-age=(\d+)", response["Cache-Control"])
    assert max_age and int(max_age.group(1)) >= ONE_YEAR_S
    assert "immutable" in response["Cache-Control"]
    assert _body(response) == BUNDLE.read_bytes()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("accepted", "encoding", "decompress"),
    [("gzip, deflate, br", "br", brotli.decompress), ("gzip", "gzip", gzip.decompress)],
)
def test_static_files_are_sent_compressed_to_a_browser_that_accepts_it(
    client, build_history, accepted, encoding, decompress
) -> None:
    build_history(commits=2)
    url = _bundle_url(client)

    response = client.get(url, headers={"Accept-Encoding": accepted})

    assert response["Content-Encoding"] == encoding
    assert "Accept-Encoding" in response["Vary"]
    body = _body(response)
    assert len(body) < BUNDLE.stat().st_size / 2
    assert decompress(body) == BUNDLE.read_bytes()


def test_vendored_plotly_bundle_is_the_one_the_makefile_pins() -> None:
    pinned = re.search(r"^PLOTLY_BUNDLE_SHA256 := ([0-9a-f]{64})$", (ROOT / "Makefile").read_text(), re.M)
    version = re.search(r"^PLOTLY_BUNDLE_VERSION := (\S+)$", (ROOT / "Makefile").read_text(), re.M)

    assert pinned and version
    assert hashlib.sha256(BUNDLE.read_bytes()).hexdigest() == pinned.group(1)
    assert f"plotly.js (cartesian - minified) v{version.group(1)}" in BUNDLE.read_text()[:200]
    assert (BUNDLE.parent / "LICENSE").read_text().startswith("MIT License")


# Which plotly.js the page runs, and what came over the wire for it.
LOADED_PLOTLY = """
() => {
  const entry = performance.getEntriesByType('resource').find(e => e.name.includes('/vendor/plotly/'));
  return {traces: Object.keys(window.Plotly.PlotSchema.get().traces), url: entry.name,
          transferred: entry.encodedBodySize, size: entry.decodedBodySize};
}
"""


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_charts_draw_with_the_cartesian_bundle_sent_compressed(browser, build_history) -> None:  # noqa: F811
    build_history(commits=6)

    browser.open("/suites/kimi-k3-8k1k/")

    loaded = browser.page.evaluate(LOADED_PLOTLY)
    assert "scatter" in loaded["traces"] and "scattergl" not in loaded["traces"]
    assert re.search(r"/plotly-cartesian\.min\.[0-9a-f]{12}\.js$", loaded["url"])
    assert loaded["size"] == BUNDLE.stat().st_size
    assert loaded["transferred"] < loaded["size"] / 2
    drawn = browser.page.evaluate("() => document.querySelectorAll('.js-plotly-plot .main-svg').length")
    assert drawn >= len(HEADLINE_METRICS)
    assert browser.console_errors == []


@pytest.mark.django_db
def test_a_browser_asking_for_favicon_ico_is_sent_to_the_sites_icon(client) -> None:
    # The admin's pages name no icon, so Chromium asks for /favicon.ico; a 404 there is a console error.
    response = client.get("/favicon.ico")

    assert response.status_code == 301
    icon = client.get(response["Location"])
    assert icon.status_code == 200
    assert b"<svg" in _body(icon)

"""Timeline filters: a value the page cannot use is named and kept in view; header figures follow them."""

import re
from html import unescape
from typing import cast

import pytest

from dashboard.benchmarks.models import Commit, Suite
from tests.factories import RunFactory, SeriesFactory

pytestmark = pytest.mark.django_db

# Suite, facets, span, the suite's metrics, tracking issues (and, signed out, nothing for the header).
QUERIES_TIMELINE_PAGE = 6


def _problems(html: str) -> dict[str, str]:
    return {
        name: unescape(text) for name, text in re.findall(r'data-filter-problem="(\w+)">(.*?)</div>', html)
    }


def _facts(html: str) -> dict[str, str]:
    return {name: unescape(text) for name, text in re.findall(r'data-fact="(\w+)">(.*?)</b>', html)}


def _marked_unknown(html: str) -> list[str]:
    return [
        unescape(text.strip()) for text in re.findall(r"data-unknown[^>]*>(?:<input[^>]*>)?([^<]*)<", html)
    ]


def test_an_unknown_hardware_class_is_named_and_stays_selected(client, build_history) -> None:
    build_history(commits=3)

    response = client.get("/suites/kimi-k3-8k1k/?hardware=h100&concurrency=3")

    assert response.status_code == 200
    html = response.content.decode()
    assert _problems(html) == {
        "hardware": "No measurements of this suite on hardware 'h100': it is measured on b300."
    }
    assert re.findall(r'<option value="([^"]*)" selected[^>]*>([^<]*)</option>', html) == [
        ("h100", "h100 (unknown)")
    ]
    # The level asked for stays too, though nothing on h100 can say whether it exists.
    assert _marked_unknown(html) == ["h100 (unknown)", "3 (unknown)"]
    assert re.findall(r'name="concurrency" value="(\d+)" checked', html) == ["3"]
    # The charts are asked for what the address says, not for another hardware class.
    assert "timeline/?hardware=h100&amp;concurrency=3&amp;" in html


def test_unreadable_and_unmeasured_values_are_each_named_and_the_rest_still_applies(
    client, build_history
) -> None:
    build_history(commits=3, concurrencies=(1, 16))

    response = client.get(
        "/suites/kimi-k3-8k1k/?concurrency=16&concurrency=3&concurrency=lots&stat=p95&from=2026-13-01&to=2026-08-02"
    )

    assert response.status_code == 400
    html = response.content.decode()
    problems = _problems(html)
    assert problems["concurrency"] in (
        "'concurrency' must be a whole number, not 'lots': ignored.",
        "Concurrency 3 is not measured on b300: its levels are 1, 16.",
    )
    assert html.count('data-filter-problem="concurrency"') == 2
    assert "Concurrency 3 is not measured on b300: its levels are 1, 16." in html
    assert problems["stat"] == "'stat' must be one of mean, p50, p90, p99, not 'p95': charting the mean."
    assert problems["from"] == "'from' must be a date as YYYY-MM-DD, not '2026-13-01': ignored."
    assert _marked_unknown(html) == ["3 (unknown)", "p95 (unknown)", "2026-13-01 (not a date)"]
    assert re.findall(r'name="concurrency" value="(\d+)" checked', html) == ["16", "3"]
    assert response.context["filters"].date_to.isoformat() == "2026-08-02"
    assert "&amp;to=2026-08-02&amp;concurrency=3&amp;concurrency=16" in html


def test_the_header_figures_follow_the_date_and_hardware_filters(
    client, build_history, django_assert_max_num_queries
) -> None:
    commits = build_history(commits=36, concurrencies=(16,))  # one an hour from Aug 1 00:00: 24 on Aug 1
    suite = Suite.objects.get(name="kimi-k3-8k1k")
    SeriesFactory(suite=suite, hardware_class="h200", concurrency=16, metric="output_throughput_tok_s")
    for commit in commits[:5]:
        RunFactory(commit=cast(Commit, commit), suite=suite, hardware_class="h200")

    with django_assert_max_num_queries(QUERIES_TIMELINE_PAGE):
        everything = _facts(client.get("/suites/kimi-k3-8k1k/").content.decode())
    with django_assert_max_num_queries(QUERIES_TIMELINE_PAGE):
        second_day = _facts(
            client.get("/suites/kimi-k3-8k1k/?from=2026-08-02&to=2026-08-02").content.decode()
        )
    on_h200 = _facts(client.get("/suites/kimi-k3-8k1k/?hardware=h200&to=2026-08-01").content.decode())

    assert (everything["runs"], everything["commits"], everything["dates"]) == (
        "36",
        "36",
        "Aug 1 – Aug 2, 2026",
    )
    assert (second_day["runs"], second_day["commits"], second_day["dates"]) == (
        "12",
        "12",
        "Aug 2 – Aug 2, 2026",
    )
    assert (on_h200["runs"], on_h200["commits"]) == ("5", "5")
    levels = _facts(client.get("/suites/kimi-k3-8k1k/?concurrency=16").content.decode())["levels"]
    assert levels == "1 of 1"


def test_the_runs_list_names_an_unknown_hardware_class_and_keeps_it_selected(client) -> None:
    RunFactory(hardware_class="b300")

    response = client.get("/runs/?hardware=h100&suite=")

    html = response.content.decode()
    assert response.context["counts"]["succeeded"] == 0  # applied as asked: no run is on h100
    assert _problems(html) == {
        "hardware": "No hardware named “h100” is known here (there are: b300): no run matches it."
    }
    assert re.findall(r'<option value="([^"]*)" selected[^>]*>([^<]*)</option>', html) == [
        ("h100", "h100 (unknown)")
    ]


def test_compare_names_an_unknown_suite_and_keeps_it_selected(client, build_history) -> None:
    build_history(commits=2)

    asked = client.get("/compare/?suite=no-such-suite").content.decode()
    compared = client.get("/compare/?suite=no-such-suite&base=v1&head=v2").content.decode()

    assert _problems(asked) == {"suite": "No suite named “no-such-suite” is known here."}
    assert "no suite named &#x27;no-such-suite&#x27;" in compared
    for html in (asked, compared):
        assert re.findall(r'<option value="([^"]*)" selected[^>]*>([^<]*)</option>', html) == [
            ("no-such-suite", "no-such-suite (unknown)")
        ]

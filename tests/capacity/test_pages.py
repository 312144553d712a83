"""Load curves on the commit and compare pages, capacity and percentiles on the timeline."""

import json
import re

import pytest
from django.test import Client

from dashboard.benchmarks.capacity import accuracy_store
from runners.accuracy import accuracy_result
from tests.capacity.conftest import CONCURRENT_REPORT

pytestmark = pytest.mark.django_db

BASE_SHA, HEAD_SHA = "1a" * 20, "2b" * 20


def _figures(html: str) -> dict[str, dict]:
    """Every json_script figure of a page by element id."""
    return {
        match[0]: json.loads(match[1])
        for match in re.findall(r'<script id="([^"]+)" type="application/json">(.*?)</script>', html, re.S)
    }


def test_commit_page_draws_its_load_curve_with_objectives_and_capacity(client: Client, sweep_run_ingest):
    run = sweep_run_ingest(sha=BASE_SHA)

    html = client.get(f"/commits/{BASE_SHA}/").content.decode()

    assert "Load curve · tiny-llama-cpu-sweep" in html
    assert "objectives: TTFT p99 ≤ 500 ms, ITL p99 ≤ 150 ms" in html
    figures = _figures(html)
    ttft = figures["load-curve-0-ttft_ms"]
    assert [shape["y0"] for shape in ttft["layout"]["shapes"]] == [500]
    assert [trace["name"] for trace in ttft["data"]] == [
        f"{BASE_SHA[:8]} p50",
        f"{BASE_SHA[:8]} p99",
        f"{BASE_SHA[:8]} capacity",
    ]
    assert len(ttft["data"][0]["x"]) == run.load_levels.count()
    assert [shape["y0"] for shape in figures["load-curve-0-itl_ms"]["layout"]["shapes"]] == [150]
    assert "/static/vendor/plotly/plotly-cartesian.min." in html


def test_compare_draws_both_commits_on_one_chart_with_both_capacities(client: Client, sweep_run_ingest):
    sweep_run_ingest(sha=BASE_SHA)
    sweep_run_ingest(sha=HEAD_SHA, raw=CONCURRENT_REPORT.read_bytes())

    response = client.get("/compare/", {"base": BASE_SHA, "head": HEAD_SHA, "suite": "tiny-llama-cpu-sweep"})

    assert response.status_code == 200
    html = response.content.decode()
    figure = _figures(html)["compare-load-curve-ttft_ms"]
    capacities = figure["layout"]["meta"]["capacities"]
    assert [item["commit"] for item in capacities] == [BASE_SHA[:8], HEAD_SHA[:8]]
    assert [t["name"] for t in figure["data"] if t["name"].endswith("capacity")] == [
        f"{BASE_SHA[:8]} capacity",
        f"{HEAD_SHA[:8]} capacity",
    ]
    assert figure["layout"]["meta"]["objectives"] == [{"metric": "ttft_ms_p99", "max": 500.0}]
    assert "Capacity changed by" in html


def test_timeline_charts_the_chosen_percentile_capacity_and_accuracy(client: Client, sweep_run_ingest):
    run = sweep_run_ingest(sha=BASE_SHA)
    accuracy_store(run=run, accuracy=accuracy_result(name="tiny_qa", correct=0, samples=40))

    html = client.get("/suites/tiny-llama-cpu-sweep/", {"stat": "p99"}).content.decode()

    charts = re.findall(r'data-metric="([a-z0-9_]+)"', html)
    (url,) = re.findall(r'data-timeline-url="(/api/suites/tiny-llama-cpu-sweep/timeline/[^"]+)"', html)
    # One request brings every chart, in the page's order.
    assert re.findall(r"metric=([a-z0-9_]+)", url) == charts
    assert charts == [
        "capacity_req_s",
        "output_throughput_tok_s",
        "ttft_ms_p99",
        "latency_s_p99",
        "itl_ms_p99",
        "tpot_ms_p99",
        "capacity_output_tok_s",
        "goodput_at_capacity_req_s",
        "accuracy_tiny_qa",
    ]
    # The other statistics keep every other filter.
    assert 'href="?hardware=cpu&amp;stat=p50"' in html


def test_capacity_series_is_drawn_whatever_concurrency_is_picked(client: Client, sweep_run_ingest):
    sweep_run_ingest(sha=BASE_SHA)

    figure = client.get(
        "/api/suites/tiny-llama-cpu-sweep/figures/capacity_req_s/", {"hardware": "cpu", "concurrency": "1"}
    ).json()

    assert [trace["name"] for trace in figure["data"] if trace.get("mode") == "lines+markers"] == ["run"]


def test_an_unknown_statistic_is_a_400_that_says_which(client: Client, sweep_run_ingest):
    sweep_run_ingest(sha=BASE_SHA)

    response = client.get("/suites/tiny-llama-cpu-sweep/", {"stat": "p42"})

    assert response.status_code == 400
    assert "&#x27;stat&#x27; must be one of mean, p50, p90, p99" in response.content.decode()

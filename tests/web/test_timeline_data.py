"""The timeline's one request: every chart, thinned to the chart's width, full resolution on zoom,
cached and answered 304 while nothing changed."""

import gzip
import json
from typing import Any, cast

import numpy as np
import pytest
from django.db import connection
from django.test import Client

from dashboard.benchmarks.models import HEADLINE_METRICS, Commit, Measurement, Suite
from tests.factories import CommitFactory, SuiteFactory, bulk_history, run_with_values
from tests.plans import executed_plan, plan_rows_read
from tests.web.chart_data import column, line_traces, trace_commits

pytestmark = pytest.mark.django_db

URL = "/api/suites/kimi-k3-8k1k/timeline/"
THROUGHPUT = "output_throughput_tok_s"


def _history(count: int) -> list[Commit]:
    """`count` commits, each headline metric at concurrency 1 and 16, with a 10 % step at every 100."""
    rng = np.random.default_rng(3)
    steps = 100.0 * 1.1 ** (np.arange(count) // 100)
    values = {
        (level, metric): (steps * level * (1 + rng.normal(0, 0.003, count))).tolist()
        for level in (1, 16)
        for metric in HEADLINE_METRICS
    }
    return bulk_history(suite=cast(Suite, SuiteFactory()), values=values)


def test_one_response_holds_every_chart_of_the_page_in_a_fixed_number_of_queries(
    client: Client, django_assert_num_queries
) -> None:
    _history(300)
    # The last one: the runs measured on a busy node or beside another GPU process, flagged in one read.
    # The markers take the benchmarked commits from the points read (none is tracked or tagged here).
    with django_assert_num_queries(13):
        body = client.get(URL, {"width": 1200}).json()

    assert list(body["figures"]) == list(HEADLINE_METRICS)
    for figure in body["figures"].values():
        assert [trace["name"] for trace in line_traces(figure)] == ["c=1", "c=16"]
        assert all(len(column(trace["x"])) == 300 for trace in line_traces(figure))
    assert body["decimated"] is False


def test_a_long_history_is_thinned_to_the_width_and_a_zoom_comes_at_full_resolution(client: Client) -> None:
    commits = _history(1_000)

    body = client.get(URL, {"width": 200}).json()  # 100 buckets of two pixels

    assert body["decimated"] is True
    # Thinned, no commit travels: the payload is the chart's width, whatever the history's length.
    assert column(body["commits"]["x"]) == []
    assert body["figures"]["ttft_ms_mean"]["layout"]["meta"]["day_ticks"][0] == [0.0, "Jan 1"]
    for figure in body["figures"].values():
        for trace in line_traces(figure):
            xs, ys = column(trace["x"]), column(trace["y"])
            assert len(xs) <= 2 * 100 + 2
            assert (xs[0], xs[-1]) == (0, 999)
            # Each of the ten levels of the step series is still drawn.
            level_of = {round(y / ys[0], 1) for y in ys}
            assert {round(1.1**step, 1) for step in range(10)} <= level_of

    zoomed = client.get(URL, {"width": 200, "x0": 400, "x1": 460}).json()

    assert (zoomed["decimated"], zoomed["x_range"]) == (False, [400.0, 460.0])
    trace = line_traces(zoomed["figures"]["ttft_ms_mean"])[0]
    # Every commit of the range and a margin either side, each with its own hover facts.
    assert column(trace["x"]) == list(range(385, 476))
    points = trace_commits(zoomed["commits"], trace)
    assert points[15]["sha"] == commits[400].sha and points[15]["subject"] == commits[400].subject


def test_a_reload_transfers_nothing_until_a_new_result_arrives(client: Client) -> None:
    suite = cast(Suite, SuiteFactory())
    first = cast(Commit, CommitFactory())
    run_with_values(commit=first, suite=suite, values={(1, "ttft_ms_mean"): 10.0})

    response = client.get(URL)
    etag = response["ETag"]
    assert response.status_code == 200 and etag

    again = client.get(URL, headers={"If-None-Match": etag})
    assert (again.status_code, again.content) == (304, b"")

    run_with_values(commit=cast(Commit, CommitFactory()), suite=suite, values={(1, "ttft_ms_mean"): 11.0})
    fresh = client.get(URL, headers={"If-None-Match": etag})
    assert fresh.status_code == 200 and fresh["ETag"] != etag
    assert len(column(line_traces(fresh.json()["figures"]["ttft_ms_mean"])[0]["x"])) == 2


def test_an_unchanged_view_is_served_from_the_cache(client: Client, django_assert_num_queries) -> None:
    _history(50)
    assert client.get(URL)["Last-Modified"]
    with django_assert_num_queries(6):  # the suite and the version: nothing is read or built again
        assert client.get(URL).status_code == 200


def test_the_response_is_sent_gzipped_to_a_client_that_accepts_it(client: Client) -> None:
    _history(50)
    response = client.get(URL, headers={"Accept-Encoding": "gzip, br"})
    assert response["Content-Encoding"] == "gzip"
    assert "Accept-Encoding" in response["Vary"]
    assert set(json.loads(gzip.decompress(response.content))["figures"]) == set(HEADLINE_METRICS)


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ({"width": "wide"}, "'width' must be a whole number of pixels, not 'wide'"),
        ({"width": "5"}, "'width' must be between 100 and 4000, not 5"),
        ({"x0": "10", "x1": "2"}, "'x0' must be below 'x1', not 10.0 and 2.0"),
        ({"x0": "10"}, "'x0' and 'x1' must both be numbers"),
    ],
)
def test_a_bad_view_is_a_400_that_says_why(client: Client, query, error) -> None:
    SuiteFactory()
    response = client.get(URL, query)
    assert (response.status_code, response.json()) == (400, {"error": error})


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's query plan")
def test_a_zoomed_window_reads_only_its_rows_of_a_long_history(client: Client, monkeypatch) -> None:
    """A zoom into 40 of 2,000 commits reads that window's points (and its margin), not the history's."""
    from dashboard.benchmarks import columns

    bulk_history(
        suite=cast(Suite, SuiteFactory()),
        values={(level, THROUGHPUT): [100.0 + i % 7 for i in range(2000)] for level in (1, 16)},
    )
    reads: list[tuple[str, Any]] = []
    numbers_read = columns.numbers_read

    def spy(*, sql: str, params: Any, width: int) -> np.ndarray:
        reads.append((sql, params))
        return numbers_read(sql=sql, params=params, width=width)

    monkeypatch.setattr(columns, "numbers_read", spy)

    body = client.get(URL, {"width": 1200, "x0": 1000, "x1": 1040}).json()
    ((sql, params),) = reads
    points = sum(len(column(trace["x"])) for trace in line_traces(body["figures"][THROUGHPUT]))
    assert body["decimated"] is False and points >= 2 * 41
    # Whether the window's commits are looked up one by one or its points hashed against them (as the
    # planner does for a year's 15 series), the series' index is read over the window's ids only.
    for refused in (("seqscan",), ("seqscan", "nestloop")):
        plan = executed_plan(sql, params, refused=refused)
        assert plan_rows_read(plan, Measurement._meta.db_table) <= points + 2 * 4

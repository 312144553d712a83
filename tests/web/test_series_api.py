"""The series endpoint: the timeline's points as JSON, with the timeline's filters."""

from typing import cast

import pytest
from django.test import Client

from dashboard.benchmarks.models import Commit, Suite
from tests.factories import CommitFactory, SuiteFactory, run_with_values

pytestmark = pytest.mark.django_db


def test_points_come_in_main_order_per_metric_and_level(client: Client) -> None:
    suite = cast(Suite, SuiteFactory())
    commits = [cast(Commit, CommitFactory(position=p)) for p in (3, 1, 2)]
    for commit in commits:
        run_with_values(commit=commit, suite=suite, values={(1, "ttft_ms_mean"): float(commit.position or 0)})

    body = client.get("/api/suites/kimi-k3-8k1k/series/", {"metric": "ttft_ms_mean"}).json()

    assert body["hardware"] == "b300"
    [series] = body["series"]
    assert (series["metric"], series["concurrency"]) == ("ttft_ms_mean", 1)
    assert [point["value"] for point in series["points"]] == [1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ({"from": "yesterday"}, "'from' must be a date as YYYY-MM-DD, not 'yesterday'"),
        ({"concurrency": "many"}, "'concurrency' must be a whole number, not 'many'"),
    ],
)
def test_a_bad_filter_is_a_400_that_says_why(client: Client, query, error) -> None:
    SuiteFactory()
    response = client.get("/api/suites/kimi-k3-8k1k/series/", query)
    assert (response.status_code, response.json()) == (400, {"error": error})


def test_an_unknown_suite_is_a_json_404(client: Client) -> None:
    response = client.get("/api/suites/nope/series/")
    assert (response.status_code, response.json()) == (404, {"error": "unknown suite 'nope'"})

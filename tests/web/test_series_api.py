"""The series endpoint: the timeline's points as JSON, with the timeline's filters."""

from datetime import UTC, datetime, timedelta
from typing import cast

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from dashboard.benchmarks.models import Commit, Measurement, Run, Suite
from tests.factories import CommitFactory, SuiteFactory, bulk_history, run_with_values

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


def test_a_point_names_its_commit_with_the_time_as_iso_8601(client: Client) -> None:
    suite = cast(Suite, SuiteFactory())
    on_the_hour = cast(Commit, CommitFactory(position=1, committed_at=datetime(2026, 3, 1, 9, tzinfo=UTC)))
    with_micros = cast(
        Commit, CommitFactory(position=2, committed_at=datetime(2026, 3, 1, 9, 52, 33, 600000, tzinfo=UTC))
    )
    for commit in (on_the_hour, with_micros):
        run_with_values(commit=commit, suite=suite, values={(16, "ttft_ms_mean"): 120.0})
    run_with_values(commit=with_micros, suite=suite, values={(16, "ttft_ms_mean"): 130.0})

    body = client.get("/api/suites/kimi-k3-8k1k/series/", {"metric": "ttft_ms_mean"}).json()

    assert body["series"][0]["points"] == [
        {
            "commit": commit.sha,
            "committed_at": at,
            "pr_number": commit.pr_number,
            "value": value,
            "runs": runs,
        }
        for commit, at, value, runs in (
            (on_the_hour, "2026-03-01T09:00:00+00:00", 120.0, 1),
            (with_micros, "2026-03-01T09:52:33.600000+00:00", 125.0, 2),
        )
    ]
    # As datetime.isoformat() writes them: microseconds only when there are some.
    assert [
        commit.committed_at.isoformat() for commit in (on_the_hour, with_micros) if commit.committed_at
    ] == [
        "2026-03-01T09:00:00+00:00",
        "2026-03-01T09:52:33.600000+00:00",
    ]


def test_the_series_of_a_long_history_are_read_in_a_fixed_number_of_queries(
    client: Client, django_assert_num_queries
) -> None:
    """The suite, its series, and their measurements with their commits: one query each, whatever the
    number of series or points."""
    metrics = ("ttft_ms_mean", "output_throughput_tok_s")
    bulk_history(
        suite=cast(Suite, SuiteFactory()),
        values={
            (level, metric): [100.0 + i for i in range(300)] for level in (1, 4, 16) for metric in metrics
        },
        every=timedelta(minutes=7),
    )

    with django_assert_num_queries(3):
        body = client.get("/api/suites/kimi-k3-8k1k/series/", [("metric", m) for m in metrics]).json()

    assert [(s["metric"], s["concurrency"], len(s["points"])) for s in body["series"]] == [
        (metric, level, 300) for metric in metrics for level in (1, 4, 16)
    ]


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


def test_without_a_metric_or_with_too_many_the_series_api_is_a_400(client: Client) -> None:
    SuiteFactory()
    missing = client.get("/api/suites/kimi-k3-8k1k/series/")
    too_many = client.get("/api/suites/kimi-k3-8k1k/series/", [("metric", f"m{i}") for i in range(11)])

    for response in (missing, too_many):
        assert response.status_code == 400 and "metric=" in response.json()["error"]


def test_a_series_longer_than_the_cap_answers_its_newest_points_and_says_so(
    client: Client, monkeypatch
) -> None:
    from dashboard.web import api

    monkeypatch.setattr(api, "SERIES_MAX_POINTS", 50)
    bulk_history(
        suite=cast(Suite, SuiteFactory()), values={(1, "ttft_ms_mean"): [float(i) for i in range(120)]}
    )

    [series] = client.get("/api/suites/kimi-k3-8k1k/series/", {"metric": "ttft_ms_mean"}).json()["series"]

    assert series["truncated"] is True
    assert [point["value"] for point in series["points"]] == [float(i) for i in range(70, 120)]


def _measurement_rows_read(queryset) -> int:
    """Rows the executed plan read from the measurement table (EXPLAIN ANALYZE, every node on it)."""
    import json

    from django.db import connection

    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
        # A test's tables are small enough that a sequential scan is cheapest whatever the query; without
        # it the plan is the one a real history of millions of rows gets.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
        plan = cursor.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan

    def walk(node: dict) -> int:
        own = (
            node["Actual Rows"] * node.get("Actual Loops", 1)
            if "measurement" in node.get("Relation Name", "") or "measurement" in node.get("Index Name", "")
            else 0
        )
        return own + sum(walk(child) for child in node.get("Plans", []))

    return walk(plan[0]["Plan"])


def test_a_from_to_window_reads_only_its_rows(client: Client) -> None:
    """A day of a history of 4,000 hourly commits: the plan reads that day's measurements, not the rest."""
    from dashboard.benchmarks.columns import _measurements
    from dashboard.benchmarks.models import Series

    suite = cast(Suite, SuiteFactory())
    bulk_history(suite=suite, values={(1, "ttft_ms_mean"): [100.0] * 4000}, every=timedelta(hours=1))
    series_ids = list(Series.objects.filter(suite=suite).values_list("pk", flat=True))
    day = datetime(2026, 3, 1, tzinfo=UTC).date()

    window = _measurements(
        suite=suite, hardware_class="b300", series_ids=series_ids, date_from=day, date_to=day
    )

    assert window.count() == 24
    assert _measurement_rows_read(window) <= 48
    body = client.get(
        "/api/suites/kimi-k3-8k1k/series/",
        {"metric": "ttft_ms_mean", "from": "2026-03-01", "to": "2026-03-01"},
    ).json()
    assert len(body["series"][0]["points"]) == 24


def _plan_rows_read(plan: dict, table: str) -> int:
    """Rows a plan read from `table`: what each of its scans returned on every loop, and what they read
    only to throw away by a filter or a recheck."""
    read = 0
    if plan.get("Relation Name") == table:
        read += int(plan["Actual Rows"] * plan["Actual Loops"])
        read += int(plan.get("Rows Removed by Filter", 0) + plan.get("Rows Removed by Index Recheck", 0))
    return read + sum(_plan_rows_read(child, table) for child in plan.get("Plans", ()))


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's query plan")
def test_a_from_to_window_reads_only_its_own_rows_of_a_long_history(client: Client) -> None:
    # Three weeks of history, one point an hour: a window of one day holds one point in twenty-one.
    bulk_history(
        suite=cast(Suite, SuiteFactory()),
        values={(16, "output_throughput_tok_s"): [100.0 + i % 7 for i in range(21 * 24)]},
        start=datetime(2026, 3, 1, tzinfo=UTC),
        every=timedelta(hours=1),
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")

    with CaptureQueriesContext(connection) as captured:
        body = client.get(
            "/api/suites/kimi-k3-8k1k/series/",
            {"metric": "output_throughput_tok_s", "from": "2026-03-10", "to": "2026-03-10"},
        ).json()
    points = body["series"][0]["points"]
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + captured.captured_queries[-1]["sql"])
        plan = cursor.fetchone()[0][0]["Plan"]

    assert len(points) == 24
    assert {point["committed_at"][:10] for point in points} == {"2026-03-10"}
    assert _plan_rows_read(plan, Measurement._meta.db_table) <= len(points)
    assert _plan_rows_read(plan, Run._meta.db_table) <= len(points)

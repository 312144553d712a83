"""The overview reads what it shows: its pairs a step each, the counts and newest commits of the pairs it
shows, and their sparklines from their recent commits, however long the history behind them."""

from __future__ import annotations

from typing import cast

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dashboard.benchmarks import overview_selectors
from dashboard.benchmarks.models import Commit, Measurement, Run, RunStatus, Suite
from dashboard.benchmarks.overview_selectors import (
    PairKey,
    overview_pair_keys,
    overview_pairs,
    suites_sparklines,
)
from tests.factories import CommitFactory, RunFactory, SuiteFactory, bulk_history, run_with_values
from tests.plans import executed_plan, plan_rows_read

pytestmark = pytest.mark.django_db

METRIC = "output_throughput_tok_s"
HISTORY = 2_000


def _a_long_history_and_a_fleet() -> tuple[Suite, list[Suite]]:
    """A pair with HISTORY commits run, and three small pairs: one run on the newest commit and on an
    unplaced one, one whose newest run failed, one only ever run long ago."""
    long = cast(Suite, SuiteFactory(name="long"))
    history = bulk_history(suite=long, values={(16, METRIC): [100.0 + index % 5 for index in range(HISTORY)]})
    small = [cast(Suite, SuiteFactory(name=f"small-{index}", hardware_class="h200")) for index in range(3)]
    unplaced = cast(Commit, CommitFactory())
    Commit.objects.filter(pk=unplaced.pk).update(position=None)
    run_with_values(commit=unplaced, suite=small[0], values={(16, METRIC): 50.0})
    run_with_values(commit=history[-1], suite=small[0], values={(16, METRIC): 51.0})
    for _ in range(4):
        run_with_values(commit=cast(Commit, CommitFactory()), suite=small[1], values={(16, METRIC): 60.0})
    RunFactory(
        commit=cast(Commit, CommitFactory()),
        suite=small[1],
        hardware_class="h200",
        status=RunStatus.FAILED,
    )
    run_with_values(commit=history[3], suite=small[2], values={(16, METRIC): 70.0})
    cast(Suite, SuiteFactory(name="never-succeeded"))
    RunFactory(commit=cast(Commit, CommitFactory()), suite=Suite.objects.get(name="never-succeeded"))
    Run.objects.filter(suite__name="never-succeeded").update(status=RunStatus.FAILED)
    return long, small


def test_the_pairs_and_the_shown_pairs_summaries_are_those_of_one_pass_over_every_run() -> None:
    long, _ = _a_long_history_and_a_fleet()

    keys = overview_pair_keys()
    every = overview_pairs()  # one aggregate over every run
    shown = overview_pairs(among=keys)  # a few index reads per pair

    assert [pair.key for pair in keys] == [pair.key for pair in every] == [pair.key for pair in shown]
    assert shown == every
    by_suite = {pair.suite.name: pair for pair in shown}
    assert (by_suite["long"].run_count, by_suite["long"].newest_position) == (HISTORY, HISTORY - 1)
    assert (by_suite["small-0"].run_count, by_suite["small-0"].unplaced) == (2, 1)
    assert by_suite["small-0"].newest_position == HISTORY - 1
    assert by_suite["small-1"].run_count == 4  # its failed run is not counted
    assert by_suite["small-2"].newest_position == 3
    assert "never-succeeded" not in by_suite
    assert overview_pairs(among=[PairKey(suite=long, hardware_class="h200")]) == []


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's query plan")
def test_listing_the_pairs_and_summarising_a_small_one_reads_a_few_runs_not_the_history(
    monkeypatch,
) -> None:
    _, small = _a_long_history_and_a_fleet()
    monkeypatch.setattr(overview_selectors, "PAIR_NEWEST_WALK", 50)
    run_table = Run._meta.db_table

    with CaptureQueriesContext(connection) as captured:
        overview_pair_keys()
    listing = executed_plan(captured.captured_queries[-1]["sql"], None)
    pairs = len(overview_pair_keys())
    # A descent per pair (and the last, which finds none), a row or so each: not the 2,000 runs.
    assert plan_rows_read(listing, run_table) <= 3 * (pairs + 1)

    with CaptureQueriesContext(connection) as captured:
        overview_pairs(among=[PairKey(suite=small[1], hardware_class="h200")])
    summary = executed_plan(captured.captured_queries[-1]["sql"], None)
    # Idle since long before the newest 50 commits: those walked, then its own runs (four succeeded,
    # one failed; a plan may take them from the index of their hardware class, with the others' ten),
    # once counted and once for their commits: not the 2,000 of the history.
    assert plan_rows_read(summary, run_table) <= 50 + 2 * 15
    assert plan_rows_read(summary, Commit._meta.db_table) <= 50 + 15

    with CaptureQueriesContext(connection) as captured:
        overview_pairs(among=[PairKey(suite=small[0], hardware_class="h200")])
    summary = executed_plan(captured.captured_queries[-1]["sql"], None)
    # Run on the newest commit on main: the first commit walked, and its two runs counted.
    assert plan_rows_read(summary, run_table) <= 15
    assert plan_rows_read(summary, Commit._meta.db_table) <= 3


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's query plan")
def test_a_sparkline_of_a_long_history_reads_its_recent_points_only(monkeypatch) -> None:
    long, _ = _a_long_history_and_a_fleet()
    monkeypatch.setattr(overview_selectors, "SPARKLINE_SPAN", 4)
    pairs = overview_pairs(among=[PairKey(suite=long, hardware_class="b300")])

    with CaptureQueriesContext(connection) as captured:
        lines = suites_sparklines(last=5, pairs=pairs)
    reads = [query for query in captured if Measurement._meta.db_table in query["sql"]]
    plan = executed_plan(reads[0]["sql"], None)

    assert lines[(long.pk, "b300")].values == (100.0, 101.0, 102.0, 103.0, 104.0)
    assert len(reads) == 1
    # The 20 commits before the newest (SPARKLINE_SPAN times 5) and a point each: not 2,000 of them.
    assert plan_rows_read(plan, Measurement._meta.db_table) <= 2 * 20 + 2
    assert plan_rows_read(plan, Run._meta.db_table) <= 2 * 20 + 2

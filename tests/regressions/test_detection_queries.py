"""Detection of one run reads what it needs in a fixed number of queries: the commit window by an index
walk from the run's commit, and the points of every touched series at once."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dashboard.benchmarks.models import Commit, Measurement, Repository, Run, RunStatus, Suite, main_order_key
from dashboard.regressions.detect import windows
from dashboard.regressions.detect.alerts import run_detect, suite_detect_history
from dashboard.regressions.detect.windows import commit_window
from dashboard.regressions.models import Alert
from tests.factories import CommitFactory, RepositoryFactory, SuiteFactory, bulk_history, run_with_values

pytestmark = pytest.mark.django_db

LENGTH = 60
STEP_AT = 45


def _suite_with_step(*, metrics: int) -> tuple[Suite, list[Commit]]:
    """A suite of 3 × `metrics` series whose throughput drops 10 % at commit STEP_AT on every series."""
    suite = cast(Suite, SuiteFactory(name=f"suite-of-{metrics}-metrics"))
    rng = np.random.default_rng(metrics)
    values = {
        (concurrency, f"output_throughput_tok_s_{index}"): [
            float(100.0 * (0.9 if point >= STEP_AT else 1.0) * (1 + rng.normal(0, 0.005)))
            for point in range(LENGTH)
        ]
        for concurrency in (1, 4, 16)
        for index in range(metrics)
    }
    return suite, bulk_history(suite=suite, values=values)


def _detect_counting(*, suite: Suite, commits: list[Commit]) -> tuple[int, int]:
    """Queries and alerts of detecting the suite's newest run, once every earlier run was detected."""
    run_detect(run_id=Run.objects.get(suite=suite, commit=commits[-2]).pk)
    newest = Run.objects.get(suite=suite, commit=commits[-1])
    with CaptureQueriesContext(connection) as captured:
        run_detect(run_id=newest.pk)
    return len(captured), Alert.objects.filter(series__suite=suite).count()


def test_detecting_a_run_takes_as_many_queries_for_sixty_series_as_for_three() -> None:
    few, few_commits = _suite_with_step(metrics=1)
    many, many_commits = _suite_with_step(metrics=20)

    few_queries, few_alerts = _detect_counting(suite=few, commits=few_commits)
    many_queries, many_alerts = _detect_counting(suite=many, commits=many_commits)

    assert (few_alerts, many_alerts) == (3, 60)  # the step is found and stored on every series
    assert many_queries == few_queries
    assert many_queries <= 20


def _main_ordered(*, suite: Suite) -> list[int]:
    """The suite's benchmarked commits sorted in Python by main's order: what a window is cut from."""
    commits = Commit.objects.filter(
        runs__suite=suite, runs__hardware_class=suite.hardware_class, runs__status=RunStatus.SUCCEEDED
    ).distinct()
    return [
        commit.pk
        for commit in sorted(
            commits,
            key=lambda c: main_order_key(position=c.position, committed_at=c.committed_at, commit_id=c.pk),
        )
    ]


def test_the_window_is_cut_from_main_order_across_repositories_sharing_positions_and_commits_off_main() -> (
    None
):
    suite = cast(Suite, SuiteFactory())
    start = datetime(2026, 3, 1, tzinfo=UTC)
    other = cast(Repository, RepositoryFactory())
    for position in range(30):
        for repository in (None, other) if position % 3 == 0 else (None,):
            fields = {"position": position, "committed_at": start + timedelta(hours=position)}
            if repository is not None:
                fields |= {
                    "repository": repository,
                    "committed_at": start + timedelta(hours=position, minutes=1),
                }
            run_with_values(commit=cast(Commit, CommitFactory(**fields)), suite=suite, values={(1, "x"): 1.0})
    for hours in (1, 2):
        off_main = cast(
            Commit, CommitFactory(position=None, committed_at=start + timedelta(days=5, hours=hours))
        )
        run_with_values(commit=off_main, suite=suite, values={(1, "x"): 1.0})
    ordered = _main_ordered(suite=suite)

    for size in (5, 8, 100):
        for target in (*ordered, None):
            window = commit_window(
                suite_id=suite.pk, hardware_class=suite.hardware_class, commit_id=target, size=size
            )
            index = ordered.index(target) if target is not None else len(ordered) - 1
            end = index + min(size // 2, len(ordered) - 1 - index) + 1
            expected = ordered[max(0, end - size) : end]
            assert [commit.commit_id for commit in window.commits] == expected
            assert (window.at_start, window.at_end) == (
                expected[0] == ordered[0],
                expected[-1] == ordered[-1],
            )


def test_a_rescan_of_the_whole_history_reads_every_series_once(settings: Any) -> None:
    settings.PERFWATCH_DETECTION_WINDOW = 40  # 150 commits: six overlapping windows
    suite = cast(Suite, SuiteFactory(name="rescanned"))
    rng = np.random.default_rng(7)
    bulk_history(
        suite=suite,
        values={
            (concurrency, "output_throughput_tok_s"): [
                float(100.0 * (0.9 if point >= 100 else 1.0) * (1 + rng.normal(0, 0.005)))
                for point in range(150)
            ]
            for concurrency in (1, 4, 16)
        },
    )

    with CaptureQueriesContext(connection) as captured:
        outcome = suite_detect_history(suite_name=suite.name)

    assert outcome.alerts_created == 3
    points_read = [query for query in captured.captured_queries if Measurement._meta.db_table in query["sql"]]
    assert len(points_read) == 1


def test_a_whole_history_read_by_series_gives_every_window_value_the_commit_read_gives(monkeypatch) -> None:
    # A rescan reads each series whole and keeps the commits it asked for; a window reads by commit.
    # Asked for every other commit, with a failed run and repeats, both give the same values.
    suite, commits = _suite_with_step(metrics=2)
    failed = Run.objects.filter(suite=suite, commit=commits[10]).get()
    Run.objects.filter(pk=failed.pk).update(status=RunStatus.FAILED)
    run_with_values(commit=commits[20], suite=suite, values={(1, "output_throughput_tok_s_0"): 50.0})
    series_ids = sorted(
        Measurement.objects.filter(run__suite=suite).values_list("series_id", flat=True).distinct()
    )
    asked = [commit.pk for commit in commits[::2]]

    monkeypatch.setattr(windows, "WHOLE_HISTORY_COMMITS", 10**9)
    by_commit = windows.window_values(series_ids=series_ids, commit_ids=asked)
    monkeypatch.setattr(windows, "WHOLE_HISTORY_COMMITS", 1)
    with CaptureQueriesContext(connection) as captured:
        whole = windows.window_values(series_ids=series_ids, commit_ids=asked)

    assert {key: (value.values, value.runs) for key, value in whole.items()} == {
        key: (value.values, value.runs) for key, value in by_commit.items()
    }
    assert by_commit[series_ids[0]].runs[10] == 2  # commit 20, the eleventh asked, has two runs
    assert math.isnan(by_commit[series_ids[0]].values[5])  # commit 10's only run failed
    assert "commit_id = ANY" not in captured.captured_queries[0]["sql"]

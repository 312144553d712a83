"""Joint attribution through the detection service: one group per located change, at the narrowest range
the runs allow, with an alert per series that moved and a stored reason when the range is wider."""

from __future__ import annotations

from typing import cast

import pytest

from dashboard.benchmarks.models import Commit, Run, Suite
from dashboard.regressions.detect.alerts import run_detect, suite_detect_history
from dashboard.regressions.models import AlertGroup, AlertKind, GroupKind
from dashboard.regressions.selectors import group_range_commits
from tests.factories import CommitFactory, run_with_values
from tests.regressions.conftest import suite_create
from tests.regressions.suites import LENGTH, METRIC_NAMES, STEP, SUITE, decode, suite_history

pytestmark = pytest.mark.django_db


def store(
    *,
    seed: int,
    steps: dict[tuple[str, int], list[tuple[int, float]]],
    slow_runs: dict[int, float] | None = None,
    unbenchmarked: range = range(0),
) -> tuple[Suite, list[Commit]]:
    """A suite's history in the database: one run per benchmarked commit, the generator's point i at the
    i-th benchmarked commit; `unbenchmarked` commits are added without runs."""
    histories = suite_history(seed=seed, steps=steps, slow_runs=slow_runs)
    suite = suite_create()
    commits = [cast(Commit, CommitFactory()) for _ in range(LENGTH + len(unbenchmarked))]
    benchmarked = [commit for index, commit in enumerate(commits) if index not in unbenchmarked]
    for point, commit in enumerate(benchmarked):
        run_with_values(
            commit=commit,
            suite=suite,
            values={
                (key[1], METRIC_NAMES[key[0]]): float(history.values[point])
                for key, history in zip(SUITE, histories, strict=True)
            },
        )
    return suite, commits


def only_group() -> AlertGroup:
    return AlertGroup.objects.select_related("base_commit", "head_commit").get()


def test_a_slow_run_before_a_step_gives_one_group_holding_both_commits_and_saying_why() -> None:
    _, commits = store(seed=1, steps=decode(16, STEP, -0.06), slow_runs={STEP - 1: 0.08})

    suite_detect_history()

    group = only_group()
    assert (group.base_commit, group.head_commit) == (commits[STEP - 2], commits[STEP])
    assert group_range_commits(group=group) == commits[STEP - 1 : STEP + 1]
    assert commits[STEP - 1].short_sha in group.range_reason and "outlier" in group.range_reason
    assert group.kind == GroupKind.REGRESSION
    assert set(group.alerts.values_list("series__metric", "series__concurrency")) == {
        (METRIC_NAMES[metric], 16) for metric in ("throughput", "itl", "tpot", "latency")
    }


def test_the_slow_run_case_arriving_run_by_run_also_gives_one_group() -> None:
    suite, commits = store(seed=1, steps=decode(16, STEP, -0.06), slow_runs={STEP - 1: 0.08})

    for run in Run.objects.filter(suite=suite).order_by("commit__position"):
        run_detect(run_id=run.pk)

    group = only_group()
    assert commits[STEP] == group.head_commit
    assert group.base_commit in (commits[STEP - 2], commits[STEP - 1])
    assert group.base_commit != commits[STEP - 1] or not group.range_reason


def test_two_steps_four_commits_apart_on_one_series_are_two_groups_at_their_commits() -> None:
    first, second = decode(16, STEP, 0.12), decode(16, STEP + 4, -0.05)
    _, commits = store(seed=2, steps={key: first[key] + second[key] for key in first})

    suite_detect_history()

    groups = list(AlertGroup.objects.order_by("head_commit__position"))
    assert [(group.base_commit, group.head_commit) for group in groups] == [
        (commits[STEP - 1], commits[STEP]),
        (commits[STEP + 3], commits[STEP + 4]),
    ]
    assert [group.kind for group in groups] == [GroupKind.IMPROVEMENT, GroupKind.REGRESSION]
    assert all(group.range_reason == "" for group in groups)


def test_one_change_in_throughput_and_ttft_at_one_commit_is_one_group_with_both_alerts() -> None:
    _, commits = store(seed=3, steps={("throughput", 4): [(STEP, -0.06)], ("ttft", 4): [(STEP, 0.06)]})

    suite_detect_history()

    group = only_group()
    assert (group.base_commit, group.head_commit) == (commits[STEP - 1], commits[STEP])
    assert dict(group.alerts.values_list("series__metric", "kind")) == {
        METRIC_NAMES["throughput"]: AlertKind.REGRESSION,
        METRIC_NAMES["ttft"]: AlertKind.REGRESSION,
    }


def test_a_step_inside_unbenchmarked_commits_is_one_group_over_exactly_those_commits() -> None:
    # Commits STEP..STEP+2 are never run; the step's first run is at commit STEP+3 (point STEP).
    _, commits = store(seed=4, steps=decode(16, STEP, -0.08), unbenchmarked=range(STEP, STEP + 3))

    suite_detect_history()

    group = only_group()
    assert (group.base_commit, group.head_commit) == (commits[STEP - 1], commits[STEP + 3])
    assert group_range_commits(group=group) == commits[STEP : STEP + 4]
    assert group.range_reason == "3 commits in the range were not benchmarked."

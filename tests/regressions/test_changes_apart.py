"""Changes stay apart: two steps on one series, or steps at ranges that do not overlap, are two changes."""

from __future__ import annotations

from typing import cast

import numpy as np
import pytest

from dashboard.benchmarks.models import Commit, Run, Series, Suite
from dashboard.regressions.detect.alerts import run_detect, suite_detect_history
from dashboard.regressions.detect.attribution import SeriesHistory, changes_locate
from dashboard.regressions.models import Alert, AlertGroup, AlertKind, GroupKind, GroupState
from tests.factories import CommitFactory, run_with_values
from tests.regressions.conftest import suite_create
from tests.regressions.suites import LENGTH, METRIC_NAMES, STEP, SUITE, decode, suite_history

NOISE = 0.015


def reverted(*, gap: int, change: float = -0.08) -> dict[tuple[str, int], list[tuple[int, float]]]:
    """A decode regression at STEP, reverted `gap` commits later (every moved series back where it was)."""
    first, back = decode(16, STEP, change), decode(16, STEP + gap, 1.0 / (1.0 + change) - 1.0)
    return {key: first[key] + back[key] for key in first}


def with_repeats(
    histories: list[SeriesHistory], *, points: range, runs: int, seed: int
) -> list[SeriesHistory]:
    """The same histories with `runs` runs at each of `points`: its value the median of that many draws at
    the series' true level there (what the culprit search's repeats give)."""
    rng = np.random.default_rng(seed + 1000)
    repeated = []
    for history in histories:
        values = np.asarray(history.values, dtype=np.float64).copy()
        counts = np.ones(LENGTH, dtype=int)
        for point in points:
            # The true level: the neighbours' median on the same side, as generated without noise.
            level = _true_level(history=history, point=point)
            values[point] = level * float(np.exp(NOISE * np.median(rng.normal(size=runs))))
            counts[point] = runs
        repeated.append(SeriesHistory(key=history.key, values=values, runs=list(counts)))
    return repeated


_LEVELS: dict[tuple[object, int], float] = {}


def _true_level(*, history: SeriesHistory, point: int) -> float:
    return _LEVELS[(history.key, point)]


def levels_note(steps: dict[tuple[str, int], list[tuple[int, float]]], points: range) -> None:
    for key, (level, _) in SUITE.items():
        for point in points:
            value = level
            for at, change in steps.get(key, []):
                if point >= at:
                    value *= 1.0 + change
            _LEVELS[(key, point)] = value


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("gap", [1, 3, 6])
def test_a_regression_reverted_1_3_or_6_commits_later_is_two_changes_at_their_points(gap, seed) -> None:
    steps = reverted(gap=gap)
    histories = suite_history(seed=seed, steps=steps, noise=NOISE)
    if gap == 1:
        # With one run a commit one step wide is an outlier run; three runs of it (the culprit search's
        # repeats) make it a level of its own.
        middle = range(STEP, STEP + 1)
        levels_note(steps, middle)
        histories = with_repeats(histories, points=middle, runs=3, seed=seed)

    located = changes_locate(series=histories)

    assert [(change.first, change.last) for change in located] == [(STEP, STEP), (STEP + gap, STEP + gap)]
    # Decode slower, then fast again: throughput down and latencies up, then the other way round.
    moved = set(decode(16, STEP, -0.08))
    for change, sign in zip(located, (-1.0, 1.0), strict=True):
        assert {series.key for series in change.changes} <= moved
        for series in change.changes:
            toward = sign if cast(tuple[str, int], series.key)[0] == "throughput" else -sign
            assert 4.0 < series.change_pct * toward < 14.0


@pytest.mark.parametrize("seed", range(4))
def test_steps_on_different_metrics_two_points_apart_are_two_changes(seed) -> None:
    steps = {("throughput", 1): [(STEP, -0.08)], ("ttft", 4): [(STEP + 2, 0.10)]}

    located = changes_locate(series=suite_history(seed=seed, steps=steps, noise=NOISE))

    assert [(change.first, change.last) for change in located] == [(STEP, STEP), (STEP + 2, STEP + 2)]
    assert [{moved.key for moved in change.changes} for change in located] == [
        {("throughput", 1)},
        {("ttft", 4)},
    ]


def _store(
    *,
    seed: int,
    steps: dict[tuple[str, int], list[tuple[int, float]]],
    repeated: range = range(0),
    noise: float = NOISE,
) -> tuple[Suite, list[Commit]]:
    """A suite's history in the database, one run per commit, three at the `repeated` commits."""
    histories = suite_history(seed=seed, steps=steps, noise=noise)
    suite = suite_create()
    commits = [cast(Commit, CommitFactory()) for _ in range(LENGTH)]
    rng = np.random.default_rng(seed + 1000)
    levels_note(steps, repeated)
    for point, commit in enumerate(commits):
        draws = 3 if point in repeated else 1
        for _ in range(draws):
            run_with_values(
                commit=commit,
                suite=suite,
                values={
                    (key[1], METRIC_NAMES[key[0]]): (
                        float(history.values[point])
                        if draws == 1
                        else _LEVELS[(key, point)] * float(np.exp(noise * rng.normal()))
                    )
                    for key, history in zip(SUITE, histories, strict=True)
                },
            )
    return suite, commits


def _regression_alert(*, group: AlertGroup, series: Series, change_pct: float) -> None:
    Alert.objects.create(
        group=group,
        series=series,
        kind=AlertKind.REGRESSION,
        before_value=1.0,
        after_value=1.0 + change_pct / 100,
        change_pct=change_pct,
    )


def _detect_run_by_run(suite: Suite) -> None:
    """Detection after each stored run, in commit order, as production runs it."""
    for run in Run.objects.filter(suite=suite).order_by("commit__position"):
        run_detect(run_id=run.pk)


@pytest.mark.django_db
@pytest.mark.parametrize("gap", [1, 3, 6])
def test_a_regression_reverted_1_3_or_6_commits_later_is_two_groups(gap) -> None:
    _, commits = _store(
        seed=gap, steps=reverted(gap=gap), repeated=range(STEP, STEP + 1) if gap == 1 else range(0)
    )

    suite_detect_history()

    groups = list(AlertGroup.objects.order_by("head_commit__position"))
    assert [(group.base_commit, group.head_commit) for group in groups] == [
        (commits[STEP - 1], commits[STEP]),
        (commits[STEP + gap - 1], commits[STEP + gap]),
    ]
    assert [group.kind for group in groups] == [GroupKind.REGRESSION, GroupKind.IMPROVEMENT]


@pytest.mark.django_db
def test_a_change_two_commits_after_a_dismissed_group_opens_a_new_group_that_names_it() -> None:
    # A regression of ten times the noise at STEP + 2, arriving run by run as production stores them.
    suite, commits = _store(seed=5, steps=decode(16, STEP + 2, -0.15))
    throughput = Series.objects.get(suite=suite, concurrency=16, metric=METRIC_NAMES["throughput"])
    # A group that verification dismissed two commits earlier (its re-runs showed no change).
    dismissed = AlertGroup.objects.create(
        base_commit=commits[STEP - 1],
        head_commit=commits[STEP],
        kind=GroupKind.REGRESSION,
        state=GroupState.DISMISSED,
    )
    _regression_alert(group=dismissed, series=throughput, change_pct=-5.0)

    _detect_run_by_run(suite)

    assert dismissed.alerts.count() == 1
    new = AlertGroup.objects.exclude(pk=dismissed.pk).get()
    assert (new.base_commit, new.head_commit) == (commits[STEP + 1], commits[STEP + 2])
    assert new.follows == dismissed
    assert new.state == GroupState.SUSPECTED
    assert new.alerts.filter(series=throughput).exists()


def _dismissed_then_seen_again(*, shrink: float) -> tuple[AlertGroup, list[Commit]]:
    """A decode regression found at (STEP - 1, STEP] and dismissed (its alerts' sizes times `shrink`),
    then detection again after the head's run is gone: the same change, now placed at (STEP - 1, STEP + 1]."""
    suite, commits = _store(seed=7, steps=decode(16, STEP, -0.08))
    suite_detect_history()
    group = AlertGroup.objects.get()
    assert (group.base_commit, group.head_commit) == (commits[STEP - 1], commits[STEP])
    AlertGroup.objects.filter(pk=group.pk).update(state=GroupState.DISMISSED)
    for alert in group.alerts.all():
        Alert.objects.filter(pk=alert.pk).update(change_pct=alert.change_pct * shrink)
    Run.objects.filter(suite=suite, commit=commits[STEP]).delete()
    suite_detect_history()
    return group, commits


@pytest.mark.django_db
def test_a_dismissed_change_seen_again_with_its_far_end_moved_opens_no_group() -> None:
    group, _ = _dismissed_then_seen_again(shrink=1.0)

    assert list(AlertGroup.objects.values_list("pk", flat=True)) == [group.pk]


@pytest.mark.django_db
def test_a_change_much_larger_than_the_dismissed_one_at_its_range_is_a_new_group() -> None:
    group, commits = _dismissed_then_seen_again(shrink=0.3)

    new = AlertGroup.objects.exclude(pk=group.pk).get()
    assert (new.base_commit, new.head_commit) == (commits[STEP - 1], commits[STEP + 1])
    assert new.follows == group


def _dismissed_elsewhere(*, status: str = "untriaged") -> tuple[AlertGroup, Suite, list[Commit]]:
    """A suite with a real regression at STEP, and another suite's group at exactly (STEP - 1, STEP]
    that verification dismissed."""
    suite, commits = _store(seed=11, steps=decode(16, STEP, -0.15))
    other = suite_create(name="another-suite")
    run = run_with_values(commit=commits[STEP], suite=other, values={(16, "output_throughput_tok_s"): 100.0})
    dismissed = AlertGroup.objects.create(
        base_commit=commits[STEP - 1],
        head_commit=commits[STEP],
        kind=GroupKind.REGRESSION,
        state=GroupState.DISMISSED,
        status=status,
        evidence={"rounds": 3, "alerts": []},
    )
    Alert.objects.create(
        group=dismissed,
        series=Series.objects.get(pk=run.measurements.get().series_id),
        kind=AlertKind.REGRESSION,
        before_value=100.0,
        after_value=97.0,
        change_pct=-3.0,
    )
    return dismissed, suite, commits


@pytest.mark.django_db
def test_a_change_at_another_suites_dismissed_range_reopens_that_group_for_verification() -> None:
    dismissed, suite, _ = _dismissed_elsewhere()

    suite_detect_history()

    dismissed.refresh_from_db()
    assert dismissed.state == GroupState.SUSPECTED
    assert dismissed.evidence["rounds"] == 1 and dismissed.evidence["dismissed_before"]["rounds"] == 3
    suites = set(dismissed.alerts.values_list("series__suite_id", flat=True))
    assert suite.pk in suites and len(suites) == 2
    assert AlertGroup.objects.count() == 1


@pytest.mark.django_db
def test_a_group_a_person_closed_is_not_reopened() -> None:
    dismissed, suite, _ = _dismissed_elsewhere(status="invalid")

    suite_detect_history()

    dismissed.refresh_from_db()
    assert dismissed.state == GroupState.DISMISSED
    assert not dismissed.alerts.filter(series__suite=suite).exists()


@pytest.mark.django_db
def test_a_change_of_other_metrics_a_point_after_an_open_group_is_a_group_of_its_own() -> None:
    # An open group at (STEP - 1, STEP] holds a TTFT alert; a decode regression (throughput, ITL, TPOT,
    # latency) lands one commit later. Other metrics at a range that does not overlap: another change.
    suite, commits = _store(seed=6, steps=decode(16, STEP + 1, -0.10))
    ttft = Series.objects.get(suite=suite, concurrency=4, metric=METRIC_NAMES["ttft"])
    earlier = AlertGroup.objects.create(
        base_commit=commits[STEP - 1], head_commit=commits[STEP], kind=GroupKind.REGRESSION
    )
    _regression_alert(group=earlier, series=ttft, change_pct=10.0)

    _detect_run_by_run(suite)

    assert list(earlier.alerts.values_list("series", flat=True)) == [ttft.pk]
    new = AlertGroup.objects.exclude(pk=earlier.pk).get()
    assert (new.base_commit, new.head_commit) == (commits[STEP], commits[STEP + 1])
    assert new.alerts.filter(series__metric=METRIC_NAMES["throughput"]).exists()

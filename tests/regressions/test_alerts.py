"""Detection over stored series: alerts, groups, their kind, idempotence, settings and the window."""

from __future__ import annotations

from typing import cast

import pytest

from dashboard.benchmarks.models import Commit, Run
from dashboard.regressions.detect.alerts import pair_detect_history, run_detect, suite_detect_history
from dashboard.regressions.detect.thresholds import threshold_resolve
from dashboard.regressions.detect.windows import series_window
from dashboard.regressions.models import Alert, AlertGroup, AlertKind, DetectionSetting, GroupKind
from dashboard.regressions.selectors import group_range_commits
from tests.factories import CommitFactory, run_with_values
from tests.regressions.conftest import noisy, suite_create

pytestmark = pytest.mark.django_db

THROUGHPUT = "output_throughput_tok_s"
TTFT = "ttft_ms_mean"


def step(*, before: float, after: float, at: int, length: int, noise: float = 0.01) -> list[float]:
    return [noisy(before if index < at else after, index, noise=noise) for index in range(length)]


def test_a_step_down_in_throughput_is_one_regression_alert_naming_the_range(history_build) -> None:
    history = history_build(values={THROUGHPUT: step(before=725.0, after=681.5, at=40, length=70)})

    outcome = suite_detect_history()

    alert = Alert.objects.select_related("group").get()
    assert outcome.alerts_created == 1
    assert alert.kind == AlertKind.REGRESSION
    assert alert.group.kind == GroupKind.REGRESSION
    assert (alert.group.base_commit, alert.group.head_commit) == (history.commits[39], history.commits[40])
    assert alert.change_pct == pytest.approx(-6.0, abs=0.5)
    assert alert.before_value == pytest.approx(725.0, rel=0.01)
    assert alert.after_value == pytest.approx(681.5, rel=0.01)
    assert alert.p_value is not None and alert.p_value < 1e-4


def test_higher_throughput_and_lower_latency_are_improvements(history_build) -> None:
    history_build(
        values={
            THROUGHPUT: step(before=500.0, after=560.0, at=30, length=60),
            TTFT: step(before=2000.0, after=1700.0, at=30, length=60),
        }
    )

    suite_detect_history()

    assert set(Alert.objects.values_list("kind", flat=True)) == {AlertKind.IMPROVEMENT}
    assert AlertGroup.objects.get().kind == GroupKind.IMPROVEMENT


def test_throughput_up_with_ttft_up_is_a_trade_off(history_build) -> None:
    history_build(
        values={
            THROUGHPUT: step(before=500.0, after=560.0, at=30, length=60),
            TTFT: step(before=2000.0, after=2300.0, at=30, length=60),
        }
    )

    suite_detect_history()

    group = AlertGroup.objects.get()
    assert group.kind == GroupKind.TRADE_OFF
    kinds = dict(group.alerts.values_list("series__metric", "kind"))
    assert kinds == {THROUGHPUT: AlertKind.IMPROVEMENT, TTFT: AlertKind.REGRESSION}


def test_a_single_outlier_raises_nothing_as_points_arrive(history_build) -> None:
    values = step(before=725.0, after=725.0, at=0, length=60)
    values[35] *= 0.85  # one slow run, as in the demo history
    history = history_build(values={THROUGHPUT: values})

    for run in Run.objects.filter(suite=history.suite).order_by("commit__position"):
        run_detect(run_id=run.pk)
    suite_detect_history()

    assert not Alert.objects.exists()


def test_running_detection_again_never_duplicates_anything(history_build) -> None:
    history = history_build(
        values={
            THROUGHPUT: step(before=725.0, after=681.5, at=40, length=70),
            TTFT: step(before=1100.0, after=1200.0, at=40, length=70),
        }
    )
    suite_detect_history()
    before = list(Alert.objects.order_by("pk").values_list("pk", "group_id", "series_id"))

    again = suite_detect_history()
    for run in Run.objects.filter(suite=history.suite):
        run_detect(run_id=run.pk)

    assert again.alerts_created == 0
    assert list(Alert.objects.order_by("pk").values_list("pk", "group_id", "series_id")) == before
    assert AlertGroup.objects.count() == 1


def test_points_arriving_one_by_one_find_the_step_once_and_at_the_right_commit(history_build) -> None:
    history = history_build(values={THROUGHPUT: step(before=725.0, after=681.5, at=40, length=70)})

    created = sum(
        run_detect(run_id=run.pk).alerts_created
        for run in Run.objects.filter(suite=history.suite).order_by("commit__position")
    )

    assert created == 1
    group = AlertGroup.objects.get()
    assert (group.base_commit, group.head_commit) == (history.commits[39], history.commits[40])


def test_unbenchmarked_commits_between_two_points_make_the_culprit_a_range() -> None:
    suite = suite_create()
    commits = [cast(Commit, CommitFactory()) for _ in range(64)]
    benchmarked = [commit for index, commit in enumerate(commits) if not 38 < index < 42]  # 39-41 not run
    for index, commit in enumerate(benchmarked):
        level = 725.0 if commit.position < commits[42].position else 681.5  # type: ignore[operator]
        run_with_values(commit=commit, suite=suite, values={(16, THROUGHPUT): noisy(level, index)})

    suite_detect_history()

    group = AlertGroup.objects.get()
    assert (group.base_commit, group.head_commit) == (commits[38], commits[42])
    assert group_range_commits(group=group) == commits[39:43]


def test_a_suite_setting_raises_the_minimum_change_and_can_turn_a_metric_off(history_build) -> None:
    history = history_build(
        values={
            THROUGHPUT: step(before=725.0, after=700.0, at=40, length=70, noise=0.003),  # -3.4 %
            TTFT: step(before=1100.0, after=1200.0, at=40, length=70),
        }
    )
    DetectionSetting.objects.create(
        suite=history.suite, metric_prefix="output_throughput", min_relative_change=0.05
    )
    DetectionSetting.objects.create(
        suite=None, metric_prefix="ttft_ms", min_relative_change=0.03, enabled=False
    )

    suite_detect_history()
    assert not Alert.objects.exists()

    DetectionSetting.objects.filter(suite=history.suite).update(min_relative_change=0.02)
    suite_detect_history()
    assert list(Alert.objects.values_list("series__metric", flat=True)) == [THROUGHPUT]


def test_the_most_specific_setting_wins_and_request_counts_are_off_by_default() -> None:
    suite = suite_create()
    rows = [
        DetectionSetting(suite=None, metric_prefix="", min_relative_change=0.10),
        DetectionSetting(suite=None, metric_prefix="ttft_ms", min_relative_change=0.04),
        DetectionSetting(suite=suite, metric_prefix="ttft_ms_p99", min_relative_change=0.08),
    ]

    def change(metric: str, rows_used: list[DetectionSetting]) -> float | None:
        threshold = threshold_resolve(metric=metric, suite_id=suite.pk, rows=rows_used)
        return threshold.min_relative_change if threshold.enabled else None

    assert change("ttft_ms_p99", rows) == 0.08
    assert change("ttft_ms_p50", rows) == 0.04
    assert change("itl_ms_mean", rows) == 0.10
    assert change("output_throughput_tok_s", []) == 0.02
    assert change("latency_s_mean", []) == 0.03
    assert change("requests_errored", []) is None


def test_the_window_holds_a_bounded_number_of_points_around_the_new_commit(history_build, settings) -> None:
    settings.PERFWATCH_DETECTION_WINDOW = 50
    history = history_build(values={THROUGHPUT: step(before=725.0, after=725.0, at=0, length=180)})
    series = history.series()

    trailing = series_window(series=series)
    middle = series_window(series=series, commit_id=history.commits[100].pk)

    assert [p.commit_id for p in trailing.points] == [c.pk for c in history.commits[-50:]]
    assert (trailing.at_series_start, trailing.at_series_end) == (False, True)
    assert [p.commit_id for p in middle.points] == [c.pk for c in history.commits[76:126]]
    assert (middle.at_series_start, middle.at_series_end) == (False, False)


def test_repeated_runs_of_a_commit_are_averaged_into_one_point(history_build) -> None:
    history = history_build(values={THROUGHPUT: [100.0] * 10})
    run_with_values(commit=history.commits[3], suite=history.suite, values={(16, THROUGHPUT): 110.0})

    window = series_window(series=history.series())

    assert len(window.points) == 10
    assert window.points[3].value == pytest.approx(105.0)


def test_a_history_longer_than_the_window_is_analysed_window_by_window(history_build, settings) -> None:
    settings.PERFWATCH_DETECTION_WINDOW = 60
    values = step(before=725.0, after=681.5, at=25, length=150)
    values = [value * (1.08 if index >= 110 else 1.0) for index, value in enumerate(values)]
    history = history_build(values={THROUGHPUT: values})

    outcome = pair_detect_history(suite_id=history.suite.pk, hardware_class=history.series().hardware_class)

    heads = sorted(AlertGroup.objects.values_list("head_commit_id", flat=True))
    assert outcome.alerts_created == 2
    assert heads == [history.commits[25].pk, history.commits[110].pk]

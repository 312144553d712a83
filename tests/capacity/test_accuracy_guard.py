"""Accuracy is a metric: stored with its samples and interval, and a drop beyond tolerance alerts."""

from typing import cast

import pytest

from dashboard.benchmarks.capacity import accuracy_store
from dashboard.benchmarks.models import WHOLE_RUN, AccuracyScore, Commit, Measurement, Run, RunStatus, Suite
from dashboard.benchmarks.suites import suite_upsert
from dashboard.regressions.detect.alerts import suite_detect_history
from dashboard.regressions.models import Alert, AlertGroup, DetectionSetting, GroupKind
from runners.accuracy import accuracy_result
from runners.suites import suite_get
from tests.factories import CommitFactory, RunFactory

pytestmark = pytest.mark.django_db

GSM8K_SAMPLES = 1319


def _dcp_suite() -> Suite:
    suite, _ = suite_upsert(spec=suite_get(name="kimi-k3-dcp-120k"))
    return suite


def _history(suite: Suite, scores_pct: list[float]) -> list[Commit]:
    """One run per commit, each scored on GSM8K's 1,319 questions."""
    commits = [cast(Commit, CommitFactory()) for _ in scores_pct]
    for commit, score in zip(commits, scores_pct, strict=True):
        run = cast(
            Run, RunFactory(commit=commit, suite=suite, hardware_class="b300", status=RunStatus.SUCCEEDED)
        )
        accuracy_store(
            run=run,
            accuracy=accuracy_result(
                name="gsm8k", correct=score / 100 * GSM8K_SAMPLES, samples=GSM8K_SAMPLES
            ),
        )
    return commits


def _wobble(level: float, index: int, spread: float) -> float:
    return level + spread * (((index * 7919) % 101 - 50) / 50.0)


# DCP 8 at 96.97 %, then a change that loses two points (a 2 % relative drop, the tolerance is 1 %).
TWO_POINTS_LOST = [_wobble(96.97, i, 0.15) for i in range(30)] + [
    _wobble(94.9, i, 0.15) for i in range(30, 60)
]


def test_a_score_is_stored_as_a_whole_run_metric_with_its_samples_and_interval():
    suite = _dcp_suite()
    run = cast(Run, RunFactory(suite=suite, hardware_class="b300"))

    accuracy_store(run=run, accuracy=accuracy_result(name="gsm8k", correct=1279, samples=GSM8K_SAMPLES))

    measurement = Measurement.objects.get(run=run)
    assert (measurement.series.metric, measurement.series.concurrency) == ("accuracy_gsm8k", WHOLE_RUN)
    assert measurement.value == pytest.approx(96.97, abs=0.01)
    score = AccuracyScore.objects.get(run=run)
    assert score.samples == GSM8K_SAMPLES
    assert score.ci_low_pct < 96.97 < score.ci_high_pct


def test_an_accuracy_drop_beyond_tolerance_raises_a_regression_group():
    suite = _dcp_suite()
    commits = _history(suite, TWO_POINTS_LOST)

    suite_detect_history(suite_name=suite.name)

    group = AlertGroup.objects.get()
    assert group.kind == GroupKind.REGRESSION
    assert (group.base_commit, group.head_commit) == (commits[29], commits[30])
    assert Alert.objects.get().series.metric == "accuracy_gsm8k"


def test_a_detection_setting_of_the_suite_overrides_its_declared_tolerance():
    suite = _dcp_suite()
    DetectionSetting.objects.create(suite=suite, metric_prefix="accuracy_gsm8k", min_relative_change=0.05)
    _history(suite, TWO_POINTS_LOST)

    suite_detect_history(suite_name=suite.name)

    assert not AlertGroup.objects.exists()


def test_a_drop_within_tolerance_raises_nothing():
    suite = _dcp_suite()
    # A 0.5 % relative drop: real, but inside the suite's 1 % tolerance.
    scores = [_wobble(96.97, i, 0.05) for i in range(30)] + [_wobble(96.49, i, 0.05) for i in range(30, 60)]
    _history(suite, scores)

    suite_detect_history(suite_name=suite.name)

    assert not AlertGroup.objects.exists()

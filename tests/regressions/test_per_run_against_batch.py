"""False suspected groups of the per-run path (detection around each stored run, what production runs)
against one batch pass over the same histories: without a step, with one, with a noisy stretch, along a
drift. Both raise none on a history without a step; the counts of the others are printed, a
measurement: the per-run path does not yet match the batch pass along a drift or a noisy stretch."""

from __future__ import annotations

from typing import cast

import numpy as np
import pytest

from dashboard.benchmarks.models import Commit, Run
from dashboard.regressions.detect.alerts import pair_detect_history, run_detect
from dashboard.regressions.models import AlertGroup
from tests.factories import CommitFactory, run_with_values
from tests.regressions.conftest import suite_create
from tests.regressions.suites import METRIC_NAMES, SUITE

pytestmark = pytest.mark.django_db

LENGTH = 80
LEVELS = {key: value for key, value in SUITE.items() if key[1] == 16}  # one level: five series


def _noise(kind: str) -> np.ndarray:
    noise = np.full(LENGTH, 0.015)
    if kind == "noisy stretch":
        noise[25:55] *= 2.0
    return noise


def _values(*, kind: str, seed: int) -> tuple[dict[tuple[str, int], np.ndarray], list[int]]:
    """Each series' values over the history, and the points where a step lies."""
    rng = np.random.default_rng(seed)
    steps = [40] if kind == "step" else []
    values = {}
    for key, (level, higher_is_better) in LEVELS.items():
        series = np.full(LENGTH, level)
        for point in steps:
            series[point:] *= 0.93 if higher_is_better else 1.0 / 0.93
        if kind == "drift":
            series *= np.exp(np.linspace(0.0, 0.06, LENGTH))
        values[key] = series * np.exp(_noise(kind) * rng.normal(size=LENGTH))
    return values, steps


def _false_groups(*, kind: str, seed: int, per_run: bool) -> int:
    values, steps = _values(kind=kind, seed=seed)
    suite = suite_create()
    commits = [cast(Commit, CommitFactory()) for _ in range(LENGTH)]
    for point, commit in enumerate(commits):
        run_with_values(
            commit=commit,
            suite=suite,
            values={(key[1], METRIC_NAMES[key[0]]): float(series[point]) for key, series in values.items()},
        )
    before = set(AlertGroup.objects.values_list("pk", flat=True))
    if per_run:
        for run in Run.objects.filter(suite=suite).order_by("commit__position"):
            run_detect(run_id=run.pk)
    else:
        pair_detect_history(suite_id=suite.pk, hardware_class=suite.hardware_class)
    index = {commit.pk: point for point, commit in enumerate(commits)}
    false = 0
    for base_id, head_id in (
        AlertGroup.objects.exclude(pk__in=before)
        .filter(alerts__series__suite=suite)
        .distinct()
        .values_list("base_commit_id", "head_commit_id")
    ):
        if not any(index.get(base_id, -1) < step <= index.get(head_id, -1) for step in steps):
            false += 1
    return false


KINDS = ("no step", "step", "noisy stretch", "drift")


def test_false_groups_of_the_per_run_path_and_a_batch_pass_are_none_without_a_step(capsys) -> None:
    counts = {
        kind: tuple(
            sum(_false_groups(kind=kind, seed=seed, per_run=per_run) for seed in range(1))
            for per_run in (True, False)
        )
        for kind in KINDS
    }

    with capsys.disabled():
        for kind, (per_run, batch) in counts.items():
            print(f"\n{kind}: false suspected groups, per run {per_run}, batch {batch}")
    assert counts["no step"] == (0, 0)
    assert counts["step"][0] <= counts["step"][1]

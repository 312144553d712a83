"""A series' run-to-run noise as the verdicts' 95 % intervals use it: the spread of every run but those far
off, so a slow mode a few noise scales off on one run in ten widens it, and a clean series keeps its own."""

from __future__ import annotations

import math
import random
from typing import cast

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dashboard.benchmarks.models import Series, Suite
from dashboard.regressions.sheriff.evidence import series_noise, series_noise_log, series_noises
from tests.factories import SuiteFactory, bulk_history, run_with_values

pytestmark = pytest.mark.django_db

NOISE = 0.01  # the normal core of the run-to-run noise, log scale
KEY = (16, "output_throughput_tok_s")


def _noise_of(values: list[float]) -> float:
    suite = cast(Suite, SuiteFactory())
    commits = bulk_history(suite=suite, values={KEY: values})
    series = Series.objects.get(suite=suite, concurrency=KEY[0], metric=KEY[1])
    return series_noise_log(series=series, commit_id=commits[-1].pk)


def test_a_slow_mode_widens_the_noise_to_the_spread_it_adds() -> None:
    rng = random.Random(3)
    logs = [rng.gauss(0, NOISE) - (0.03 if rng.random() < 0.1 else 0.0) for _ in range(61)]
    # The noise a run really has: its normal core and the slow mode together.
    mean = sum(logs) / len(logs)
    spread = math.sqrt(sum((v - mean) ** 2 for v in logs) / (len(logs) - 1))

    estimate = _noise_of([725.0 * math.exp(v) for v in logs])

    assert estimate > 1.15 * NOISE
    assert 0.8 * spread < estimate < 1.25 * spread


def test_a_clean_series_keeps_its_own_noise_and_a_far_outlier_is_set_aside() -> None:
    rng = random.Random(4)
    logs = [rng.gauss(0, NOISE) for _ in range(61)]
    logs[30] -= 0.4  # one broken run, 40 noise scales off

    estimate = _noise_of([725.0 * math.exp(v) for v in logs])

    assert 0.8 * NOISE < estimate < 1.2 * NOISE


def test_commits_run_several_times_still_read_one_runs_noise() -> None:
    # Fifty commits run five times each (a searched range and its neighbours' repeats): their medians
    # differ by about half what single runs do.
    rng = random.Random(5)
    suite = cast(Suite, SuiteFactory())
    commits = bulk_history(
        suite=suite, values={KEY: [725.0 * math.exp(rng.gauss(0, NOISE)) for _ in range(61)]}
    )
    for commit in commits[5:56]:
        for _ in range(4):
            run_with_values(commit=commit, suite=suite, values={KEY: 725.0 * math.exp(rng.gauss(0, NOISE))})
    series = Series.objects.get(suite=suite, concurrency=KEY[0], metric=KEY[1])

    estimate = series_noise_log(series=series, commit_id=commits[30].pk)

    assert 0.8 * NOISE < estimate < 1.25 * NOISE


def test_many_series_noises_are_read_in_as_many_queries_as_one_and_each_is_its_own() -> None:
    # A suite's series around one commit share its window: a side test or a verdict over a suite of many
    # series reads it once, not once per series.
    rng = random.Random(6)
    suite = cast(Suite, SuiteFactory())
    keys = [(concurrency, metric) for concurrency in (1, 4, 16) for metric in ("ttft_ms", "itl_ms")]
    noises = {key: 0.005 * (index + 1) for index, key in enumerate(keys)}
    commits = bulk_history(
        suite=suite,
        values={key: [100.0 * math.exp(rng.gauss(0, noises[key])) for _ in range(61)] for key in keys},
    )
    series = list(Series.objects.filter(suite=suite).order_by("pk"))
    assert len(series) == len(keys)

    with CaptureQueriesContext(connection) as one:
        series_noises(series=series[:1], commit_id=commits[-1].pk)
    with CaptureQueriesContext(connection) as many:
        together = series_noises(series=series, commit_id=commits[-1].pk)

    assert len(many.captured_queries) == len(one.captured_queries)

    for item in series:
        alone = series_noise(series=item, commit_id=commits[-1].pk)
        assert together[item.pk] == alone
        assert 0.75 < alone[0] / noises[(item.concurrency, item.metric)] < 1.3

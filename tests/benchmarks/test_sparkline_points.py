"""The overview's sparkline points read series by series through their index are the points of the one
windowed statement the ORM writes: the same runs, the same recency, unplaced commits and failed runs alike."""

from __future__ import annotations

import math
from typing import cast

import pytest

from dashboard.benchmarks.models import Commit, Measurement, Run, RunStatus, Suite
from dashboard.benchmarks.overview_selectors import _sparkline_points, suites_sparklines
from tests.factories import CommitFactory, SuiteFactory, run_with_values

METRIC = "output_throughput_tok_s"


@pytest.mark.django_db
def test_the_indexed_read_equals_the_orm_statement() -> None:
    suites = [cast(Suite, SuiteFactory(name=name)) for name in ("dense", "short")]
    commits = [cast(Commit, CommitFactory()) for _ in range(30)]
    Commit.objects.filter(pk=commits[-1].pk).update(position=None)  # synced, not yet placed on main
    for index, commit in enumerate(commits):
        for repeat in range(1 + (index % 4 == 0)):
            run_with_values(commit=commit, suite=suites[0], values={(16, METRIC): 100.0 + index + repeat})
        if index % 3 == 0:
            run = run_with_values(commit=commit, suite=suites[1], values={(16, METRIC): 50.0 + index})
            if index == 9:
                Run.objects.filter(pk=run.pk).update(status=RunStatus.FAILED)
            if index == 12:
                Measurement.objects.filter(run=run).update(value=math.inf)
    series_ids = sorted(Measurement.objects.values_list("series_id", flat=True).distinct())
    for last in (5, 12, 100):
        indexed = sorted(_sparkline_points(series_ids=series_ids, last=last))
        assert indexed == sorted(_sparkline_points(series_ids=series_ids, last=last, portable=True))
        assert indexed and max(recency for _, recency, _ in indexed) == min(last, 30)
    lines = suites_sparklines(last=5)
    # Oldest first; the unplaced commit counts as the newest, a commit's two runs as their median.
    assert lines[(suites[0].pk, "b300")].values == (125.0, 126.0, 127.0, 128.5, 129.0)

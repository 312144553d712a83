"""The series noise read from main's newest commits is the noise of the latest benchmarked commits, whatever
the window: a dense suite found inside it, a sparse one read past it, a few scopes or many."""

from __future__ import annotations

from typing import cast

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dashboard.benchmarks import selectors
from dashboard.benchmarks.models import Commit, Suite
from dashboard.benchmarks.selectors import series_noises
from tests.factories import CommitFactory, SuiteFactory, run_with_values

METRIC = "output_throughput_tok_s"
SIZE = 12


@pytest.fixture
def history() -> list[tuple[int, str]]:
    """60 commits: `dense` run on every one (twice on every fifth), `sparse` on every seventh, `new` on
    the last four only."""
    rng = np.random.default_rng(7)
    dense, sparse, new = (
        cast(Suite, SuiteFactory(name=name, hardware_class="b300")) for name in ("dense", "sparse", "new")
    )
    commits = [cast(Commit, CommitFactory()) for _ in range(60)]
    for index, commit in enumerate(commits):
        for repeat in range(2 if index % 5 == 0 else 1):
            value = 100 + rng.normal(0, 2 + repeat)
            run_with_values(commit=commit, suite=dense, values={(16, METRIC): value})
        if index % 7 == 0:
            run_with_values(commit=commit, suite=sparse, values={(16, METRIC): 50 + rng.normal(0, 1)})
        if index >= 56:
            run_with_values(commit=commit, suite=new, values={(16, METRIC): 10 + rng.normal(0, 0.5)})
    return [(suite.pk, "b300") for suite in (dense, sparse, new)]


def _whole(scopes: list[tuple[int, str]]) -> dict:
    return selectors._series_noises_read(scopes=scopes, size=SIZE, metrics=None, recent=None)[0]


@pytest.mark.django_db
@pytest.mark.parametrize("recent", [4, 13, 20, 100])
def test_the_recent_read_equals_the_whole_read(history, recent) -> None:
    assert connection.vendor == "postgresql"
    expected = _whole(history)
    assert set(expected) == set(history)
    assert series_noises(scopes=history, size=SIZE, recent=recent) == expected
    for scope in history:  # one scope at a time too
        assert series_noises(scopes=[scope], size=SIZE, recent=recent) == {scope: expected[scope]}


@pytest.mark.django_db
def test_many_scopes_read_each_commits_runs(history, monkeypatch) -> None:
    monkeypatch.setattr(selectors, "FEW_SCOPES", 1)
    assert series_noises(scopes=history, size=SIZE, recent=20) == _whole(history)


@pytest.mark.django_db
def test_a_dense_scope_is_not_read_past_the_window(history) -> None:
    dense = history[0]
    with CaptureQueriesContext(connection) as captured:
        noise = series_noises(scopes=[dense], size=SIZE, recent=20)
    assert noise == {dense: _whole([dense])[dense]}
    # The window's floor and the recent read: no check of older runs, no read of the whole history.
    assert len(captured) == 2
    # A sparse scope needs the check and the read of everything.
    with CaptureQueriesContext(connection) as captured:
        series_noises(scopes=[history[1]], size=SIZE, recent=20)
    assert len(captured) == 4

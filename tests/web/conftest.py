"""Benchmark histories for page tests, built with the factories."""

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import cast

import pytest

from dashboard.benchmarks.models import HEADLINE_METRICS, Commit, Suite
from tests.factories import CommitFactory, SuiteFactory, run_with_values

HistoryBuilder = Callable[..., list[Commit]]


def _value(metric: str, concurrency: int, index: int) -> float:
    # Throughput grows with concurrency and over time; latencies shrink over time. Readable, not random.
    if metric == "output_throughput_tok_s":
        return 80.0 * concurrency**0.6 * (1 + 0.02 * index)
    return (
        {"ttft_ms_mean": 900.0, "latency_s_mean": 12.0, "itl_ms_mean": 9.0, "tpot_ms_mean": 9.5}.get(
            metric, 1.0
        )
        * concurrency**0.3
        / (1 + 0.01 * index)
    )


@pytest.fixture
def build_history() -> HistoryBuilder:
    """`build_history(commits=12, concurrencies=(1, 4, 16), suite=None, unbenchmarked=())`: commits on main
    in order, one an hour from 2026-08-01 00:00 UTC, each with a succeeded run of every headline metric
    except the indexes in `unbenchmarked`."""

    def build(
        *,
        commits: int = 12,
        concurrencies: tuple[int, ...] = (1, 4, 16),
        suite: Suite | None = None,
        unbenchmarked: tuple[int, ...] = (),
    ) -> list[Commit]:
        suite = suite or cast(Suite, SuiteFactory(concurrencies=list(concurrencies)))
        start = datetime(2026, 8, 1, tzinfo=UTC)
        made = [
            cast(Commit, CommitFactory(committed_at=start + timedelta(hours=index)))
            for index in range(commits)
        ]
        for index, commit in enumerate(made):
            if index in unbenchmarked:
                continue
            run_with_values(
                commit=commit,
                suite=suite,
                values={
                    (level, metric): _value(metric, level, index)
                    for level in concurrencies
                    for metric in HEADLINE_METRICS
                },
            )
        return made

    return build

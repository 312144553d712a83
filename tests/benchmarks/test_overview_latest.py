"""The overview's latest commit is the newest on main, whatever was measured last."""

from typing import cast

import pytest

from dashboard.benchmarks.models import Commit, RunKind, Suite
from dashboard.benchmarks.overview_selectors import suites_overview
from tests.factories import CommitFactory, SuiteFactory, run_with_values

pytestmark = pytest.mark.django_db


def test_a_later_re_run_of_an_older_commit_does_not_become_the_overviews_latest_commit() -> None:
    suite = cast(Suite, SuiteFactory())
    older, newer = cast(Commit, CommitFactory()), cast(Commit, CommitFactory())
    run_with_values(commit=older, suite=suite, values={(16, "output_throughput_tok_s"): 400.0})
    run_with_values(commit=newer, suite=suite, values={(16, "output_throughput_tok_s"): 700.0})
    # A verification repeat of the older commit, measured after the newer one.
    repeat = run_with_values(commit=older, suite=suite, values={(16, "output_throughput_tok_s"): 404.0})
    repeat.kind = RunKind.VERIFICATION
    repeat.save(update_fields=["kind"])

    [overview] = suites_overview()

    assert overview.latest_commit == newer
    assert overview.latest_values[("output_throughput_tok_s", 16)] == 700.0
    assert overview.run_count == 3


def test_a_commit_not_yet_placed_on_main_is_the_newest_and_its_repeats_are_folded() -> None:
    suite = cast(Suite, SuiteFactory())
    placed = cast(Commit, CommitFactory())
    unplaced = cast(Commit, CommitFactory(position=None))
    run_with_values(commit=placed, suite=suite, values={(16, "output_throughput_tok_s"): 400.0})
    for value in (700.0, 710.0, 900.0):
        run_with_values(commit=unplaced, suite=suite, values={(16, "output_throughput_tok_s"): value})

    [overview] = suites_overview()

    assert overview.latest_commit == unplaced
    assert overview.latest_values[("output_throughput_tok_s", 16)] == 710.0
    assert overview.run_count == 4

"""What the scores read of a group: the range it was judged on, and the range its verdicts' intervals are of.
Each is read from what the loop left (triage history, evidence), as a simulated history leaves it."""

from __future__ import annotations

from typing import cast

import pytest

from dashboard.benchmarks.models import Commit
from dashboard.regressions.models import AlertGroup, GroupKind, GroupState, TriageEvent
from dashboard.regressions.sheriff.evidence import TESTED
from lab.outcome import _tested_range, judged_ranges
from tests.factories import CommitFactory, RepositoryFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def commits() -> list[Commit]:
    repository = RepositoryFactory()
    return [cast(Commit, CommitFactory(repository=repository, position=index)) for index in range(12)]


def _positions(commits: list[Commit]) -> dict[str, int]:
    return {commit.sha[:8]: index for index, commit in enumerate(commits)}


def _event(group: AlertGroup, field: str, old: str, new: str) -> None:
    TriageEvent.objects.create(group=group, field=field, old_value=old, new_value=new)


def _span(commits: list[Commit], base: int, head: int) -> str:
    return f"{commits[base].short_sha}..{commits[head].short_sha}"


def _narrowed_before_its_verdict(commits: list[Commit], *, now: tuple[int, int], state: str) -> AlertGroup:
    """A group of range `now`, opened over (2, 9] and narrowed to (2, 5] while still suspected."""
    group = AlertGroup.objects.create(
        base_commit=commits[now[0]], head_commit=commits[now[1]], kind=GroupKind.REGRESSION, state=state
    )
    _event(group, "state", "", "suspected: what the culprit of group #1 leaves unexplained")
    _event(group, "range", _span(commits, 2, 9), _span(commits, 2, 5))
    return group


def test_a_group_is_judged_on_its_range_at_its_verdict_not_at_its_opening(commits) -> None:
    # Confirmed over (2, 5], then searched to (4, 5].
    group = _narrowed_before_its_verdict(commits, now=(4, 5), state=GroupState.CONFIRMED)
    _event(group, "state", "suspected", "confirmed: ttft_ms_mean c=16 +8.0 % [+4.0, +12.0] p=1e-05, 2+2 runs")
    _event(group, "range", _span(commits, 2, 5), _span(commits, 4, 5) + " (culprit at 100%)")

    assert judged_ranges(_positions(commits))[group.pk] == (2, 5)


def test_a_group_never_narrowed_after_its_verdict_is_judged_on_the_range_it_has(commits) -> None:
    group = _narrowed_before_its_verdict(commits, now=(2, 5), state=GroupState.DISMISSED)
    _event(group, "state", "suspected", "dismissed: no change held on 3 round(s) of repeats (best p=0.2)")

    assert judged_ranges(_positions(commits))[group.pk] == (2, 5)


def test_intervals_are_of_the_range_the_evidence_says_their_repeats_were_of(commits) -> None:
    positions = _positions(commits)
    # A group confirmed by another group's search shows that group's verdicts, tested over (3, 8].
    tested = {"base": commits[3].sha, "head": commits[8].sha}

    assert _tested_range({TESTED: tested, "alerts": []}, positions, (2, 8)) == (3, 8)
    # Evidence from before the range was recorded, or naming commits outside the history: the judged range.
    assert _tested_range({"alerts": []}, positions, (2, 8)) == (2, 8)
    assert _tested_range({TESTED: {"base": "f" * 40, "head": commits[8].sha}}, positions, (2, 8)) == (2, 8)

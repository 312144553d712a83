"""simulate_attribution --explain: why a step was not named, read from what the loop left in the database
(the groups near it with their verdicts and the noise each test used, and the runs around it)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import cast

import pytest

from dashboard.benchmarks.models import Commit, RunKind, RunStatus, Series, Suite
from dashboard.regressions.models import Alert, AlertGroup, GroupKind, GroupState, TriageEvent
from lab.explain import steps_explain
from lab.scores import StepScore, TrueStep
from tests.factories import CommitFactory, RepositoryFactory, RunFactory, SeriesFactory, SuiteFactory
from tests.lab.test_simulate_attribution import _simulate

ITL, THROUGHPUT = "itl_ms_mean", "output_throughput_tok_s"


class _NoisyWorld:
    """Only what the explanation reads of a world: its commits and its noise."""

    def __init__(self, commits: list[Commit]) -> None:
        self.commits = commits

    def noise_at(self, suite: str, commit_index: int, key: tuple[int, str]) -> float:
        return 0.0112 if key == (16, THROUGHPUT) else 0.025


class _Scores:
    def __init__(self, steps: list[StepScore]) -> None:
        self.steps = steps


def _step(*, at: int, exact: bool) -> StepScore:
    step = TrueStep(
        suite="sim-suite-2",
        commit_index=at,
        moves={(16, THROUGHPUT): math.exp(-0.05), (16, ITL): math.exp(0.05)},
        noise_multiple=4.6,
        merged_at=datetime(2026, 9, 8, tzinfo=UTC),
    )
    return StepScore(step=step, exact=exact, named_wrongly=False, hours=math.inf, isolated=True)


def _suite_history(length: int) -> tuple[Suite, list[Commit]]:
    """The step's suite and `length` commits of main, at positions 0 to length - 1."""
    repository = RepositoryFactory()
    commits = [cast(Commit, CommitFactory(repository=repository, position=index)) for index in range(length)]
    return cast(Suite, SuiteFactory(name="sim-suite-2")), commits


def _regression_group(base: Commit, head: Commit, *, state: str, evidence: dict[str, object]) -> AlertGroup:
    return AlertGroup.objects.create(
        base_commit=base, head_commit=head, kind=GroupKind.REGRESSION, state=state, evidence=evidence
    )


@pytest.mark.django_db
def test_a_dismissed_group_over_a_step_is_listed_with_the_series_it_tested_and_the_noise_it_used() -> None:
    suite, commits = _suite_history(70)
    itl = cast(Series, SeriesFactory(suite=suite, hardware_class="b300", concurrency=16, metric=ITL))
    group = _regression_group(
        commits[44],
        commits[47],
        state=GroupState.DISMISSED,
        evidence={
            "rounds": 3,
            "alerts": [
                {
                    "suite": "sim-suite-2",
                    "concurrency": 16,
                    "metric": ITL,
                    "change_pct": 6.076,
                    "ci_low_pct": 0.739,
                    "ci_high_pct": 11.695,
                    "p_value": 0.013,
                    "base_values": [20.0] * 6,
                    "head_values": [21.2] * 6,
                    "sigma_log": 0.0415,
                },
                {
                    "suite": "sim-suite-3",
                    "concurrency": 1,
                    "metric": ITL,
                    "change_pct": 0.5,
                    "ci_low_pct": -2.0,
                    "ci_high_pct": 3.0,
                    "p_value": 0.0001,
                    "base_values": [20.0] * 6,
                    "head_values": [20.1] * 6,
                    "sigma_log": 0.02,
                },
            ],
        },
    )
    Alert.objects.create(
        group=group, series=itl, kind="regression", before_value=20, after_value=21.5, change_pct=7.6
    )
    TriageEvent.objects.create(
        group=group, field="state", old_value="suspected", new_value="dismissed: no change held on 3 round(s)"
    )
    # A search narrowed this one away from the step: judged over (40, 61], it is (60, 61] now.
    narrowed = AlertGroup.objects.create(
        base_commit=commits[60],
        head_commit=commits[61],
        kind=GroupKind.REGRESSION,
        state=GroupState.CONFIRMED,
    )
    Alert.objects.create(
        group=narrowed, series=itl, kind="regression", before_value=20, after_value=22, change_pct=10.0
    )
    TriageEvent.objects.create(group=narrowed, field="state", old_value="suspected", new_value="confirmed: x")
    TriageEvent.objects.create(
        group=narrowed,
        field="range",
        old_value=f"{commits[40].sha[:12]}..{commits[61].sha[:12]}",
        new_value=f"{commits[60].sha[:12]}..{commits[61].sha[:12]}",
    )
    for position, kind in ((44, RunKind.ROUTINE), (44, RunKind.VERIFICATION), (47, RunKind.VERIFICATION)):
        RunFactory(commit=commits[position], suite=suite, kind=kind, status=RunStatus.SUCCEEDED)

    explained = steps_explain(
        world=_NoisyWorld(commits),  # type: ignore[arg-type]
        scores=_Scores([_step(at=20, exact=True), _step(at=47, exact=False)]),  # type: ignore[arg-type]
    )

    assert list(explained) == [1]  # the exact step needs no explanation
    noise, group_line, tested, elsewhere, narrowed_line, runs = explained[1]
    assert noise == (
        "    world noise of the series it moved, slow runs aside: "
        "c=16 itl_ms_mean 2.53 %, c=16 output_throughput_tok_s 1.13 %"
    )
    assert group_line.startswith(f"    group #{group.pk} regression dismissed (44, 47], 1 alerts: dismissed")
    assert tested == (
        "        tested c=16 itl_ms_mean +6.1 % [+0.7, +11.7] p=0.013 on 6+6 runs, noise used 4.24 % "
        "(world 2.53 %)"
    )
    # Another suite's series the group tested: after the step's suite's (whatever its p), named, and with no
    # world noise of the step's suite beside it.
    assert elsewhere == (
        "        tested sim-suite-3 c=1 itl_ms_mean +0.5 % [-2.0, +3.0] p=0.0001 on 6+6 runs, "
        "noise used 2.02 %"
    )
    assert narrowed_line == (
        f"    group #{narrowed.pk} regression confirmed (60, 61] (judged over (40, 61]), "
        "1 alerts: confirmed: x"
    )
    assert runs == "    runs of sim-suite-2: @44 1 routine, 1 verification | @47 1 verification"


def test_the_command_explains_a_step_it_could_not_name_and_only_that_one() -> None:
    lines = _simulate(
        "--world", "tests.lab.outside_world:late_step_world", "--days", "2", "--suites", "1", "--explain"
    )

    named = next(index for index, line in enumerate(lines) if line.startswith("outside-suite @30"))
    assert "exact after" in lines[named]
    late = named + 1  # nothing explains the step that was named
    assert lines[late].startswith("outside-suite @47") and "unfinished" in lines[late]
    assert (
        lines[late + 1]
        == "    world noise of the series it moved, slow runs aside: c=1 output_throughput_tok_s 1.01 %"
    )
    assert lines[late + 2] == "    no group of outside-suite touched commits 43-51: never detected"
    assert (
        lines[late + 3].startswith("    runs of outside-suite: @43 1 routine")
        and "@47 1 routine" in lines[late + 3]
    )


@pytest.mark.django_db
def test_a_search_that_spent_its_cap_is_listed_with_its_likeliest_commits_and_its_runs_at_each() -> None:
    # A change at 129 beside one at 128 that no group holds: the search ran 129 again and again while its
    # posterior stayed split between 129 and 131.
    suite, commits = _suite_history(135)
    series = cast(Series, SeriesFactory(suite=suite, hardware_class="b300", concurrency=1, metric=THROUGHPUT))
    rows = [(128, 0.0, 3), (129, 0.5448, 32), (130, 0.0229, 1), (131, 0.4322, 3)]
    group = _regression_group(
        commits[128],
        commits[131],
        state=GroupState.CONFIRMED,
        evidence={
            "search": {
                "posterior": [
                    {"sha": commits[at].sha, "probability": p, "runs": runs, "pending": 0, "docs_only": False}
                    for at, p, runs in rows
                ],
                "runs_queued": 32,
                "runs_cap": 32,
                "share_scale": 11.7473,
                "stopped": "cap",
            }
        },
    )
    Alert.objects.create(
        group=group, series=series, kind="regression", before_value=100, after_value=95, change_pct=-5.0
    )

    explained = steps_explain(
        world=_NoisyWorld(commits),  # type: ignore[arg-type]
        scores=_Scores([_step(at=129, exact=False)]),  # type: ignore[arg-type]
    )

    assert explained[0][2] == (
        "        search cap after 32 of 32 runs, share scale 11.7473: likeliest @129 54 %, @131 43 %, "
        "@130 2 %; runs @128 3, @129 32, @130 1, @131 3"
    )

"""simulate_attribution end to end, as `make simulate` runs it: its own throwaway SQLite database, a world
plugged in through --world, and the scores as JSON on the last line."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab.worlds import vllm_world

ROOT = Path(__file__).resolve().parents[2]
# Two days of one suite in a world from outside the project: a 15 % drop on 1 % noise.
OUTSIDE_WORLD = ("--world", "tests.lab.outside_world:two_level_world", "--days", "2", "--suites", "1")
KEYS = {
    "steps",
    "steps_2x",
    "exact_pct",
    "exact_isolated_pct",
    "false_notified_pct",
    "unfinished_pct",
    "hours_median",
    "hours_p90",
    "gpu_hours_per_culprit",
    "interval_coverage_pct",
    "hours_to_measured_median",
    "hours_to_suspected_median",
    "hours_to_confirmed_median",
    "hours_to_culprit_median",
    "counts",
    "step_hours",
}


def _simulate(*arguments: str) -> list[str]:
    environment = {**os.environ, "DATABASE_URL": "sqlite:///:memory:", "PYTHONPATH": str(ROOT)}
    finished = subprocess.run(
        [sys.executable, "manage.py", "simulate_attribution", *arguments],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    return finished.stdout.strip().splitlines()


def test_an_outside_world_plugs_in_and_its_step_is_scored() -> None:
    lines = _simulate(*OUTSIDE_WORLD, "--steps", "--json")
    scores = json.loads(lines[-1])
    assert set(scores) == KEYS
    assert scores["steps"] == 1
    assert scores["steps_2x"] == 1
    assert scores["counts"]["exact"] == 1 and scores["counts"]["false_notified"] == 0
    assert scores["exact_pct"] == 100.0  # a 15 % drop on 1 % noise, every hour a commit: named exactly
    assert scores["false_notified_pct"] == 0.0
    assert scores["unfinished_pct"] == 0.0
    assert scores["hours_median"] is not None and scores["hours_median"] < 24
    assert scores["step_hours"] == [scores["hours_median"]]  # its one step's hours, for pooling seeds
    # Where its hours went, in order: measured, then suspected, confirmed and named.
    phases = [scores[f"hours_to_{name}_median"] for name in ("measured", "suspected", "confirmed", "culprit")]
    assert None not in phases and phases == sorted(phases) and phases[-1] == scores["hours_median"]
    assert any(line.startswith("world") and "two_level_world" in line for line in lines)
    assert any(line.startswith("outside-suite @30") and "exact after" in line for line in lines)
    # Where runs waited for a node, by kind: the new commits' runs and the drop's verification repeats.
    waits = {
        line.split(",", 1)[1].split("  ")[0].strip(): line
        for line in lines
        if line.startswith("queued -> started, ")
    }
    assert {"routine", "verification"} <= set(waits)
    assert all(" runs: median " in line and " h, p90 " in line for line in waits.values())


def test_the_projects_own_world_prints_every_score_as_the_last_line() -> None:
    lines = _simulate("--days", "1", "--suites", "1", "--seed", "5", "--json")
    assert set(json.loads(lines[-1])) == KEYS
    assert any(line.startswith("exact culprit, steps >= 2x") for line in lines[:-1])
    per_node = next(line for line in lines if line.startswith("runs per node")).split()[-2:]
    assert len(per_node) == 2 and all(int(count.rstrip(",")) > 0 for count in per_node)  # both nodes work


def _refused(*arguments: str) -> str:
    """The error a refused command line prints."""
    environment = {**os.environ, "DATABASE_URL": "sqlite:///:memory:", "PYTHONPATH": str(ROOT)}
    finished = subprocess.run(
        [sys.executable, "manage.py", "simulate_attribution", *arguments],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert finished.returncode != 0
    return finished.stderr


def test_a_world_that_is_not_module_colon_callable_is_refused() -> None:
    assert "MODULE:CALLABLE" in _refused("--world", "lab.worlds")


def test_the_projects_world_keeps_the_contract() -> None:
    world = vllm_world(3, 7, 3)
    assert world.runners == 2
    assert set(world.suites) == {"sim-suite-1", "sim-suite-2", "sim-suite-3"}
    times = [commit.merged_at for commit in world.commits]
    assert times == sorted(times) and all(t.tzinfo is not None for t in times)
    assert all(len(commit.sha) == 40 and commit.paths for commit in world.commits)
    import random

    values = world.measure("sim-suite-1", 10, 1, random.Random(1))
    assert set(values) == {
        (c, m)
        for c in world.suites["sim-suite-1"]
        for m in ("output_throughput_tok_s", "ttft_ms_mean", "itl_ms_mean")
    }
    assert all(value > 0 for value in values.values())
    assert world.steps
    for step in world.steps:
        assert 0 < step.commit_index < len(world.commits)
        assert step.moves and all(factor > 0 for factor in step.moves.values())
        assert step.noise_multiple > 0


def test_the_projects_world_is_as_hard_as_main() -> None:
    import random
    import statistics

    from dashboard.benchmarks.subjects import ChangeClass, change_class_from_paths

    worlds = [vllm_world(seed, 14, 3) for seed in (1, 11, 23)]
    steps = [(world, step) for world in worlds for step in world.steps]
    classes = [change_class_from_paths(paths=world.commits[step.commit_index].paths) for world, step in steps]
    # Some steps sit on commits the classifier calls docs/tests/CI only (a CI image bump)...
    assert 0 < classes.count(ChangeClass.DOCS_TESTS_CI) < len(steps) / 4
    # ... gradual changes, level- and metric-specific steps, close pairs and reverts are all there.
    assert any(step.span > 1 for _, step in steps)
    assert any({c for c, _ in step.moves} == {16} for _, step in steps)
    assert any({m for _, m in step.moves} == {"ttft_ms_mean"} for _, step in steps)
    gaps = sorted(
        b.commit_index - a.commit_index
        for world in worlds
        for a in world.steps
        for b in world.steps
        if a.suite == b.suite and 0 < b.commit_index - a.commit_index <= 8
    )
    assert gaps and min(gaps) <= 6
    world = worlds[0]
    rng = random.Random(2)
    runs = [world.measure("sim-suite-1", 5, 0, rng) for _ in range(2000)]
    throughput = [run[(16, "output_throughput_tok_s")] for run in runs]
    ttft = [run[(16, "ttft_ms_mean")] for run in runs]
    # Noise is shared across the metrics of a run: a slow run is slow everywhere.
    assert statistics.correlation(throughput, ttft) < -0.3
    # A slow mode: a few percent of runs far below the median.
    median = statistics.median(throughput)
    assert 0.02 < sum(value < median * 0.95 for value in throughput) / len(throughput) < 0.10
    # Two nodes of one class that differ a little.
    other = [world.measure("sim-suite-1", 5, 1, rng)[(16, "output_throughput_tok_s")] for _ in range(2000)]
    assert 0.002 < abs(statistics.median(other) / median - 1) < 0.01
    # Stretches of higher noise.
    model = world.models["sim-suite-1"]
    first, _, multiple = model.stretches[0]
    assert world.noise_at("sim-suite-1", first, (16, "output_throughput_tok_s")) == pytest.approx(
        model.noise[(16, "output_throughput_tok_s")] * multiple
    )


def test_a_run_measures_the_same_noise_whatever_ran_before_it() -> None:
    # Two versions of the loop compared on one seed must differ only by the runs they chose: the n-th run of
    # a suite at a commit draws from its own stream, not from one stream every earlier run advanced.
    from lab.simulation import _run_stream

    world = vllm_world(5, 2, 1)
    suite = next(iter(world.suites))

    def second_run_at_7(earlier: list[tuple[int, int]]) -> dict[tuple[int, str], float]:
        for commit, nth in earlier:
            world.measure(suite, commit, 0, _run_stream(5, "measure", suite, commit, nth))
        return world.measure(suite, 7, 0, _run_stream(5, "measure", suite, 7, 2))

    alone = second_run_at_7([])
    assert second_run_at_7([(3, 1), (7, 1), (9, 1), (9, 2)]) == alone
    assert world.measure(suite, 7, 0, _run_stream(5, "measure", suite, 7, 1)) != alone


def test_several_seeds_run_in_their_own_processes_and_are_judged_against_the_aims() -> None:
    lines = _simulate(*OUTSIDE_WORLD, "--seeds", "3,4", "--json")
    by_seed = json.loads(lines[-1])
    assert set(by_seed) == {"3", "4"} and all(set(scores) == KEYS for scores in by_seed.values())
    header = next(line for line in lines if line.startswith("aim"))
    assert header.split()[1:6] == ["seed", "3", "seed", "4", "pooled"]
    exact = next(line for line in lines if line.startswith("exact culprit, steps >= 2x"))
    assert exact.endswith(" met")  # a 15 % drop on 1 % noise is named exactly on both seeds
    assert exact.split()[6:9] == ["100.0", "100.0", "100.0"]  # and on both together
    # The pooled median hours: the nearest-rank median of both seeds' one step each, the sooner one.
    median = next(line for line in lines if line.startswith("merge -> culprit, median"))
    hours = sorted(hours for scores in by_seed.values() for hours in scores["step_hours"])
    assert median.split()[7] == f"{hours[0]:.1f}"
    assert any(line.endswith("aims met over 2 seed(s)") for line in lines)


def test_seeds_that_are_not_integers_are_refused() -> None:
    assert "comma-separated integers" in _refused("--seeds", "1,x")

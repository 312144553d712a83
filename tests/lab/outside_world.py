"""A world from outside the project's own, kept to the contract of lab.worlds: one suite at two levels,
a quiet node, and one large throughput regression at the top level."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

START = datetime(2026, 10, 5, tzinfo=UTC)
STEP_AT = 30
NOISE = 0.01


@dataclass(frozen=True)
class Commit:
    sha: str
    merged_at: datetime
    paths: tuple[str, ...]


@dataclass(frozen=True)
class Step:
    suite: str
    commit_index: int
    moves: dict[tuple[int, str], float]
    noise_multiple: float


class TwoLevelWorld:
    runners = 1

    def __init__(self, seed: int, days: int, *, late_step: bool = False) -> None:
        rng = random.Random(seed)
        count = 24 * days
        self.commits = [
            Commit(
                sha=f"{rng.getrandbits(160):040x}",
                merged_at=START + timedelta(hours=index),
                paths=("vllm/v1/core/sched/scheduler.py",),
            )
            for index in range(count)
        ]
        self.suites = {"outside-suite": [1, 8]}
        self.steps = [
            Step(
                suite="outside-suite",
                commit_index=STEP_AT,
                moves={(8, "output_throughput_tok_s"): 0.85},
                noise_multiple=abs(math.log(0.85)) / NOISE,
            )
        ]
        if late_step:
            # At the last commit: nothing is benchmarked after it, so nothing can find it.
            self.steps.append(
                Step(
                    suite="outside-suite",
                    commit_index=count - 1,
                    moves={(1, "output_throughput_tok_s"): 0.975},
                    noise_multiple=abs(math.log(0.975)) / NOISE,
                )
            )
        self.late_step = late_step

    def noise_at(self, suite: str, commit_index: int, key: tuple[int, str]) -> float:
        """The run-to-run noise (log scale) of a series: the optional part of the contract that
        `simulate_attribution --explain` prints beside the noise each verdict used."""
        return NOISE

    def measure(
        self, suite: str, commit_index: int, runner_index: int, rng: random.Random
    ) -> dict[tuple[int, str], float]:
        drop = 0.85 if commit_index >= STEP_AT else 1.0
        late = 0.975 if self.late_step and commit_index == len(self.commits) - 1 else 1.0
        return {
            (1, "output_throughput_tok_s"): 100.0 * late * math.exp(rng.gauss(0, NOISE)),
            (8, "output_throughput_tok_s"): 600.0 * drop * math.exp(rng.gauss(0, NOISE)),
        }


def two_level_world(seed: int, days: int, suites: int) -> TwoLevelWorld:
    return TwoLevelWorld(seed, days)


def late_step_world(seed: int, days: int, suites: int) -> TwoLevelWorld:
    """The same world with a second step, at its last commit: one the loop cannot name."""
    return TwoLevelWorld(seed, days, late_step=True)

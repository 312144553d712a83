"""Worlds the simulation judges the verdict loop in: the contract every world keeps, and the project's own.

The contract (`simulate_attribution --world MODULE:CALLABLE` plugs in any callable that keeps it):
``CALLABLE(seed: int, days: int, suites: int)`` returns an object with

- ``commits``: main's commits in order, each with ``sha`` (40 hex digits), ``merged_at`` (an aware
  datetime) and ``paths`` (the files it changed; the product's own classifier reads its change class
  from them) and, optionally, ``subject``;
- ``suites``: suite name -> its concurrency levels;
- ``runners``: how many nodes of the one hardware class run the suites;
- ``measure(suite, commit_index, runner_index, rng)``: one run's values, ``(concurrency, metric) ->
  float``, metrics named as ``runners/guidellm_report.py`` names them (a metric left out is not
  measured; ``rng`` is a ``random.Random``);
- ``steps``: the true changes, each with ``suite``, ``commit_index``, ``moves`` (``(concurrency,
  metric) -> relative factor``: 0.95 is 5 % less) and ``noise_multiple`` (its size in units of the
  run-to-run noise of the series it moves most) and, optionally, ``span``: a gradual change spread
  evenly (geometrically) over ``span`` commits from ``commit_index`` on, ``moves`` being its total.

The project's own world is a simulated vLLM main on B300 nodes: about 30 commits a day (fewer at
weekends) whose files are drawn like vLLM's (17 % docs, tests or CI only), three levels and three metrics
per suite, and what makes attribution hard in practice:

- change classes come from the files, read by the product's classifier, and are sometimes wrong about
  performance: a CI image bump (CI files only) moves every suite;
- run-to-run noise of 1-5 % per series, correlated across the metrics of one run (a slow run is slow
  everywhere), with stretches of commits where it is 1.6-2 times larger;
- a bimodal slow mode (5 % of runs 4-10 % slower, not always far enough out to be an obvious outlier);
- a slow drift over the history and two nodes of one class that differ by half a percent or so;
- steps that differ by level and metric: everything, the top concurrency only, TTFT only, trade-offs
  (throughput at the top level against latency at c=1); gradual changes over 2-3 commits; close pairs
  1-6 commits apart; regressions reverted 3-8 commits later.
"""

from __future__ import annotations

import importlib
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

from dashboard.benchmarks.subjects import ChangeClass, change_class_from_paths
from dashboard.benchmarks.thresholds import threshold_resolve

Key = tuple[int, str]  # (concurrency, metric)


class WorldCommit(Protocol):
    @property
    def sha(self) -> str: ...
    @property
    def merged_at(self) -> datetime: ...
    @property
    def paths(self) -> Sequence[str]: ...


class WorldStep(Protocol):
    @property
    def suite(self) -> str: ...
    @property
    def commit_index(self) -> int: ...
    @property
    def moves(self) -> Mapping[Key, float]: ...
    @property
    def noise_multiple(self) -> float: ...


class World(Protocol):
    @property
    def commits(self) -> Sequence[WorldCommit]: ...
    @property
    def suites(self) -> Mapping[str, Sequence[int]]: ...
    @property
    def runners(self) -> int: ...
    @property
    def steps(self) -> Sequence[WorldStep]: ...
    def measure(
        self, suite: str, commit_index: int, runner_index: int, rng: random.Random
    ) -> dict[Key, float]: ...


WorldFactory = Callable[[int, int, int], World]


class WorldInvalid(Exception):
    """A --world argument that names no world: the message says why."""


def world_load(*, spec: str) -> WorldFactory:
    """The callable that ``MODULE:CALLABLE`` names."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise WorldInvalid(f"--world must be MODULE:CALLABLE, got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise WorldInvalid(f"cannot import {module_name!r}: {error}") from error
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise WorldInvalid(f"{module_name!r} has no callable {attribute!r}")
    return factory


def step_span(step: WorldStep) -> int:
    """How many commits a step is spread over (1 unless the world says otherwise)."""
    return max(1, int(getattr(step, "span", 1)))


# The project's own world

START = datetime(2026, 9, 7, tzinfo=UTC)  # a Monday
WEEKDAY_COMMITS, WEEKEND_COMMITS = (30, 42), (8, 16)
CONCURRENCIES = (1, 4, 16)
THROUGHPUT, TTFT, ITL = "output_throughput_tok_s", "ttft_ms_mean", "itl_ms_mean"
METRICS = (THROUGHPUT, TTFT, ITL)
# The reference suite's levels (DESIGN.md: Kimi K3 on one B300 node at main), per concurrency.
BASE_VALUES: dict[str, dict[int, float]] = {
    THROUGHPUT: {1: 183.3, 4: 416.7, 16: 725.0},
    TTFT: {1: 376.3, 4: 640.5, 16: 1121.0},
    ITL: {1: 4.6, 4: 8.1, 16: 18.4},
}
# Run-to-run noise (log scale) per metric: drawn per series from these ranges.
NOISE_RANGES = {THROUGHPUT: (0.01, 0.025), TTFT: (0.02, 0.05), ITL: (0.01, 0.025)}
# How a slow node moves each metric: throughput down, latencies up (TTFT most).
SLOWNESS_SIGN = {THROUGHPUT: -1.0, TTFT: 1.5, ITL: 1.0}
RUN_CORRELATION = 0.5  # share of a series' noise variance that all series of one run share
SLOW_MODE_SHARE = 0.05
SLOW_MODE_RANGE = (0.04, 0.10)
NOISY_STRETCH_MULTIPLE = (1.6, 2.0)
NOISY_STRETCH_COMMITS = (25, 60)
DRIFT_RANGE = 0.015  # total relative drift over the history, either way
NODE_OFFSET_RANGE = (0.003, 0.008)
STEP_RATE = 0.03  # per commit that can change performance, per suite
CI_IMAGE_BUMP_SHARE = 0.08  # of CI-only commits: they move every suite
GRADUAL_SHARE, CLOSE_PAIR_SHARE, REVERT_SHARE = 0.12, 0.15, 0.3
NOISE_MULTIPLES = (1.0, 15.0)  # a step's size in noise units, log-uniform

_PYTHON_FILES = (
    "vllm/v1/core/sched/scheduler.py",
    "vllm/v1/worker/gpu_model_runner.py",
    "vllm/v1/spec_decode/eagle.py",
    "vllm/model_executor/layers/fused_moe/layer.py",
    "vllm/model_executor/models/kimi_k3.py",
    "vllm/v1/attention/backends/flashinfer.py",
    "vllm/entrypoints/openai/serving_chat.py",
    "vllm/config/scheduler.py",
    "vllm/distributed/parallel_state.py",
    "vllm/v1/engine/core.py",
)
_NATIVE_FILES = (
    "csrc/moe/topk_softmax_kernels.cu",
    "csrc/attention/mla/sm100_cutlass_mla_kernel.cu",
    "csrc/quantization/fp4/nvfp4_quant_kernels.cu",
    "CMakeLists.txt",
    "requirements/cuda.txt",
)
_TEST_FILES = ("tests/v1/core/test_scheduler.py", "tests/models/test_kimi_k3.py", "tests/kernels/test_moe.py")
_DOCS_FILES = ("docs/features/spec_decode.md", "docs/serving/parallelism.md", "README.md")
_CI_FILES = (".buildkite/test-pipeline.yaml", ".github/workflows/pre-commit.yml", ".buildkite/ci-image.yaml")
# What a commit touches: (label, share, files drawn, extra test files).
_KINDS = (("docs", 0.09), ("tests", 0.05), ("ci", 0.03), ("python", 0.70), ("native", 0.13))
_TAGS = {"docs": "Doc", "tests": "CI/Test", "ci": "CI", "python": "Core", "native": "Kernel"}


@dataclass(frozen=True)
class SimCommit:
    sha: str
    merged_at: datetime
    paths: tuple[str, ...]
    subject: str
    kind: str  # what it touches, as the world drew it (docs, tests, ci, python, native)


@dataclass(frozen=True)
class SimStep:
    suite: str
    commit_index: int
    moves: dict[Key, float]
    noise_multiple: float
    label: str
    span: int = 1


@dataclass
class _SuiteModel:
    noise: dict[Key, float]
    stretches: list[tuple[int, int, float]]  # [first, last) commit index, noise multiple
    slow_center: float
    drift: float  # total log drift of throughput over the history
    levels: dict[Key, list[float]] = field(default_factory=dict)  # cumulative log factor per commit


@dataclass
class VllmWorld:
    """The project's own world (see the module docstring)."""

    commits: list[SimCommit]
    suites: dict[str, list[int]]
    steps: list[SimStep]
    models: dict[str, _SuiteModel]
    node_offsets: list[float]
    runners: int = 2

    def noise_at(self, suite: str, commit_index: int, key: Key) -> float:
        """The run-to-run noise (log scale) of one series at one commit, its noisy stretches included."""
        model = self.models[suite]
        multiple = next(
            (factor for first, last, factor in model.stretches if first <= commit_index < last), 1.0
        )
        return model.noise[key] * multiple

    def measure(
        self, suite: str, commit_index: int, runner_index: int, rng: random.Random
    ) -> dict[Key, float]:
        model = self.models[suite]
        shared = rng.gauss(0.0, 1.0)  # how slow this run is everywhere
        slow = model.slow_center * rng.uniform(0.75, 1.25) if rng.random() < SLOW_MODE_SHARE else 0.0
        progress = commit_index / max(len(self.commits) - 1, 1)
        values: dict[Key, float] = {}
        for concurrency in self.suites[suite]:
            for metric in METRICS:
                key = (concurrency, metric)
                sign = SLOWNESS_SIGN[metric]
                sigma = self.noise_at(suite, commit_index, key)
                noise = sigma * (
                    math.sqrt(RUN_CORRELATION) * shared * math.copysign(1.0, sign)
                    + math.sqrt(1 - RUN_CORRELATION) * rng.gauss(0.0, 1.0)
                )
                log_value = (
                    math.log(BASE_VALUES[metric][concurrency])
                    + model.levels[key][commit_index]
                    - (model.drift * progress + self.node_offsets[runner_index]) * math.copysign(1.0, sign)
                    + sign * slow
                    + noise
                )
                values[key] = math.exp(log_value)
        return values


def vllm_world(seed: int, days: int, suites: int) -> VllmWorld:
    """The project's own world: `days` of main from a Monday, `suites` suites on two B300 nodes."""
    rng = random.Random(seed)
    commits = _commits(rng=rng, days=days)
    names = [f"sim-suite-{number + 1}" for number in range(suites)]
    models = {name: _suite_model(rng=rng, commits=len(commits)) for name in names}
    steps = _steps(rng=rng, commits=commits, models=models)
    commits = _with_revert_subjects(commits=commits, steps=steps)
    for name, model in models.items():
        for concurrency in CONCURRENCIES:
            for metric in METRICS:
                key = (concurrency, metric)
                per_commit = [0.0] * len(commits)
                for step in steps:
                    if step.suite == name and key in step.moves:
                        share = math.log(step.moves[key]) / step.span
                        for offset in range(step.span):
                            per_commit[step.commit_index + offset] += share
                total, levels = 0.0, []
                for change in per_commit:
                    total += change
                    levels.append(total)
                model.levels[key] = levels
    return VllmWorld(
        commits=commits,
        suites={name: list(CONCURRENCIES) for name in names},
        steps=sorted(steps, key=lambda step: (step.commit_index, step.suite)),
        models=models,
        node_offsets=[0.0, rng.uniform(*NODE_OFFSET_RANGE) * rng.choice((-1, 1))],
    )


def _commits(*, rng: random.Random, days: int) -> list[SimCommit]:
    commits: list[SimCommit] = []
    for day in range(days):
        start = START + timedelta(days=day)
        low, high = WEEKEND_COMMITS if start.weekday() >= 5 else WEEKDAY_COMMITS
        for offset in sorted(rng.uniform(0, 86400) for _ in range(rng.randint(low, high))):
            index = len(commits)
            kind = rng.choices([k for k, _ in _KINDS], [share for _, share in _KINDS])[0]
            paths = _paths(rng=rng, kind=kind)
            commits.append(
                SimCommit(
                    sha=f"{rng.getrandbits(160):040x}",
                    merged_at=start + timedelta(seconds=offset),
                    paths=paths,
                    subject=f"[{_TAGS[kind]}] simulated change {index} (#{60000 + index})",
                    kind=kind,
                )
            )
    return commits


def _paths(*, rng: random.Random, kind: str) -> tuple[str, ...]:
    if kind == "docs":
        return tuple(rng.sample(_DOCS_FILES, rng.randint(1, 2)))
    if kind == "tests":
        return tuple(rng.sample(_TEST_FILES, rng.randint(1, 2)))
    if kind == "ci":
        return (rng.choice(_CI_FILES),)
    paths = rng.sample(_PYTHON_FILES, rng.randint(1, 3))
    if kind == "native":
        paths = [*rng.sample(_NATIVE_FILES, rng.randint(1, 2)), *paths[:1]]
    if rng.random() < 0.5:
        paths.append(rng.choice(_TEST_FILES))
    if rng.random() < 0.15:
        paths.append(rng.choice(_DOCS_FILES))
    return tuple(paths)


def _suite_model(*, rng: random.Random, commits: int) -> _SuiteModel:
    noise = {
        (concurrency, metric): rng.uniform(*NOISE_RANGES[metric])
        for concurrency in CONCURRENCIES
        for metric in METRICS
    }
    stretches = []
    for _ in range(rng.randint(1, 2)):
        length = rng.randint(*NOISY_STRETCH_COMMITS)
        first = rng.randrange(0, max(commits - length, 1))
        stretches.append((first, first + length, rng.uniform(*NOISY_STRETCH_MULTIPLE)))
    return _SuiteModel(
        noise=noise,
        stretches=stretches,
        slow_center=rng.uniform(*SLOW_MODE_RANGE),
        drift=rng.uniform(-DRIFT_RANGE, DRIFT_RANGE),
    )


def _shape(*, rng: random.Random, kind: str, magnitude: float) -> dict[Key, float]:
    """The moves of one change of `kind` whose main series moves by `magnitude` (log, signed: > 0 is
    faster), in the order that makes the main series first."""
    top, low = CONCURRENCIES[-1], CONCURRENCIES[0]
    up, down = math.exp(magnitude), math.exp(-magnitude)
    if kind == "everything":
        moves = {}
        for concurrency in CONCURRENCIES:
            moves[(concurrency, THROUGHPUT)] = up
            moves[(concurrency, ITL)] = down
            moves[(concurrency, TTFT)] = math.exp(-magnitude / 2)
        return moves
    if kind == "top concurrency":
        return {(top, THROUGHPUT): up, (top, ITL): down, (top, TTFT): math.exp(-magnitude / 2)}
    if kind == "ttft only":
        return {(concurrency, TTFT): down for concurrency in CONCURRENCIES}
    # A trade-off: more throughput at the top level, paid for with latency at c=1.
    size = abs(magnitude)
    cost = size * rng.uniform(0.6, 1.0)
    return {(top, THROUGHPUT): math.exp(size), (low, ITL): math.exp(cost), (low, TTFT): math.exp(cost)}


def _main_key(moves: Mapping[Key, float]) -> Key:
    return max(moves, key=lambda key: abs(math.log(moves[key])))


def _new_step(
    *, rng: random.Random, suite: str, model: _SuiteModel, index: int, kind: str | None = None, sign: int = 0
) -> SimStep:
    kind = kind or rng.choices(["everything", "top concurrency", "ttft only", "trade-off"], [5, 2, 2, 1])[0]
    sign = sign or rng.choice((-1, -1, 1))  # regressions a little more often than improvements
    multiple = math.exp(rng.uniform(math.log(NOISE_MULTIPLES[0]), math.log(NOISE_MULTIPLES[1])))
    probe = _shape(rng=random.Random(0), kind=kind, magnitude=1.0)
    key = _main_key(probe)
    # Never below the metric's minimum change: a smaller step is not one the product should report.
    floor = math.log(1 + threshold_resolve(metric=key[1], suite_id=0, rows=()).min_relative_change * 1.05)
    size = max(multiple * model.noise[key], floor)
    moves = _shape(rng=rng, kind=kind, magnitude=sign * size / abs(math.log(probe[key])))
    main = _main_key(moves)
    label = "trade-off" if kind == "trade-off" else f"{'improvement' if sign > 0 else 'regression'}: {kind}"
    return SimStep(
        suite=suite,
        commit_index=index,
        moves=moves,
        noise_multiple=abs(math.log(moves[main])) / model.noise[main],
        label=label,
    )


def _steps(
    *, rng: random.Random, commits: Sequence[SimCommit], models: Mapping[str, _SuiteModel]
) -> list[SimStep]:
    performance = [
        change_class_from_paths(paths=commit.paths) != ChangeClass.DOCS_TESTS_CI for commit in commits
    ]
    steps: list[SimStep] = []
    taken: dict[str, set[int]] = {name: set() for name in models}

    def free(suite: str, first: int, span: int = 1) -> bool:
        return all(
            0 < index < len(commits) and index not in taken[suite] and (performance[index] or span == 1)
            for index in range(first, first + span)
        )

    def add(step: SimStep) -> None:
        taken[step.suite].update(range(step.commit_index, step.commit_index + step.span))
        steps.append(step)

    for index in range(10, len(commits)):
        commit = commits[index]
        if commit.kind == "ci" and rng.random() < CI_IMAGE_BUMP_SHARE:
            # A CI image bump: the classifier says it cannot matter; it moves every suite.
            sign = rng.choice((-1, 1))
            for name, model in models.items():
                if free(name, index):
                    step = _new_step(
                        rng=rng, suite=name, model=model, index=index, kind="everything", sign=sign
                    )
                    add(SimStep(**{**step.__dict__, "label": f"CI image bump ({step.label})"}))
            continue
        if not performance[index]:
            continue
        for name, model in models.items():
            if rng.random() >= STEP_RATE or not free(name, index):
                continue
            step = _new_step(rng=rng, suite=name, model=model, index=index)
            roll = rng.random()
            if roll < GRADUAL_SHARE:
                span = rng.randint(2, 3)
                if free(name, index, span):
                    step = SimStep(
                        **{**step.__dict__, "span": span, "label": f"{step.label}, over {span} commits"}
                    )
            add(step)
            if step.label.startswith("regression") and rng.random() < REVERT_SHARE:
                revert_at = index + step.span - 1 + rng.randint(3, 8)
                if free(name, revert_at) and performance[min(revert_at, len(commits) - 1)]:
                    add(
                        SimStep(
                            suite=name,
                            commit_index=revert_at,
                            moves={key: 1 / factor for key, factor in step.moves.items()},
                            noise_multiple=step.noise_multiple,
                            label=f"revert of {index}",
                        )
                    )
            elif rng.random() < CLOSE_PAIR_SHARE:
                second = index + step.span - 1 + rng.randint(1, 6)
                if free(name, second) and performance[min(second, len(commits) - 1)]:
                    pair = _new_step(rng=rng, suite=name, model=model, index=second)
                    add(SimStep(**{**pair.__dict__, "label": f"{pair.label} (close to {index})"}))
    return steps


def _with_revert_subjects(*, commits: list[SimCommit], steps: Sequence[SimStep]) -> list[SimCommit]:
    """Reverts are titled as GitHub's revert button titles them."""
    reverts = {
        step.commit_index: int(step.label.removeprefix("revert of "))
        for step in steps
        if step.label.startswith("revert of ")
    }
    out = list(commits)
    for index, original in reverts.items():
        out[index] = SimCommit(
            **{
                **commits[index].__dict__,
                "subject": f'Revert "{commits[original].subject}" (#{60000 + index})',
                "paths": commits[original].paths,
            }
        )
    return out

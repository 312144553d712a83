"""The demo's world, with no Django in it: where each change lands on main, what every suite measures
at every commit without noise (its truth), and one run's values drawn from that truth with fresh
run-to-run noise per metric and level. The history, the demo's re-runs and `demo_truth` all read it, so
what the pages show can be checked against what the generator did.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

DEMO_SEED = 50587
COMMIT_COUNT = 360
DEMO_HARDWARE = "b300"
SWEEP_HARDWARE = "cpu"
MAIN_SUITE = "kimi-k3-8k1k"
DCP_SUITE = "kimi-k3-dcp-120k"
SWEEP_SUITE = "tiny-llama-cpu-sweep"

REGRESSION_PR = 51830
REVERT_PR = 52034
DCP_PR = 52388
REGRESSION_DROP = 0.06  # output throughput at concurrency 16, until the revert

# The tracking issue's PRs in merge order, with what they were about.
TRACKING_PRS: tuple[tuple[int, str], ...] = (
    (50383, "[Perf][Kimi K3] Adaptive scheduler token budget for long prefills"),
    (51146, "[Spec Decode] ReplaySSM state handling for DSpark speculative decoding"),
    (50484, "[Kimi K3] Fuse KDA gate projection into the QKV GEMM"),
    (50585, "[Perf] In-prefill KDA prefix checkpoints"),
    (50656, "[Kernel] MXFP4 MoE: tune grouped GEMM tiles for B300"),
    (50912, "[Perf] Zero-copy mixed prefill/decode batches"),
    (51070, "[Spec Decode] Probabilistic draft sampling without host sync"),
    (51311, "[Quantization] Deferred MXFP4 weight finalization"),
    (51725, "[Perf][Kimi K3] Overlap KDA state update with attention"),
    (DCP_PR, "[Distributed] Decode context parallelism (DCP) for Kimi K3"),
    (52789, "[Perf] CUDA graph capture for speculative verification"),
    (53152, "[Kimi K3] Reduce TTFT with chunked prefill of the shared prefix"),
    (53396, "[Perf] Async output processing for DSpark"),
)

# DESIGN.md's table: (throughput tok/s, mean latency s, mean TTFT ms) at v0.27.1 and at 82a85dc1.
REFERENCE: dict[int, tuple[tuple[float, float, float], tuple[float, float, float]]] = {
    1: ((83.3, 12.37, 2262.9), (183.3, 5.30, 376.3)),
    4: ((166.7, 23.67, 2314.9), (416.7, 10.50, 640.5)),
    16: ((258.3, 55.90, 7601.1), (725.0, 22.17, 1121.0)),
}
OUTPUT_TOKENS = 1000
# The long-context post: TPOT p50 (ms) with DCP at its merge and at 82a85dc1, per concurrency, and TTFT
# (ms) of the 6,000 unique tokens after the cached 114,000-token prefix.
DCP_TPOT_P50: dict[int, tuple[float, float]] = {1: (13.8, 10.5), 2: (16.2, 11.8)}
DCP_TTFT_MS: dict[int, tuple[float, float]] = {1: (1480.0, 1020.0), 2: (1710.0, 1190.0)}
DCP_OUTPUT_TOKENS = 400
# The PRs after DCP that move the long-context suite, with their share of its TPOT and TTFT gains.
DCP_STEPS: dict[int, tuple[float, float]] = {52789: (0.55, 0.1), 53152: (0.05, 0.8), 53396: (0.4, 0.1)}
# GSM8K (1,319 problems) through the chat endpoint: the post's scores with TP 8 and with DCP 8.
GSM8K_SAMPLES = 1319
GSM8K_SHARE = {MAIN_SUITE: 1269 / GSM8K_SAMPLES, DCP_SUITE: 1279 / GSM8K_SAMPLES}
# The CPU sweep: a tiny random-weight Llama whose service rate (req/s) zero-copy batches raise.
SWEEP_SERVICE_RATE = 9.0
SWEEP_STEP_PR = 50912
SWEEP_STEP = 1.15
SWEEP_EVERY = 6
DCP_EVERY = 2

# Run-to-run noise (log standard deviation) per metric family: each metric and level draws its own.
NOISE: dict[str, float] = {
    "output_throughput": 0.012,
    "ttft_ms": 0.02,
    "latency_s": 0.012,
    "itl_ms": 0.012,
    "tpot_ms": 0.012,
}
PERCENTILE_SPREAD = {"ttft_ms": 0.35, "itl_ms": 0.10, "tpot_ms": 0.06, "latency_s": 0.08}
SLOW_RUN_FACTOR = 0.85  # two runs of the history hit a slow node: their throughput is 15 % low
MIN_STEP_DISTANCE = 10  # commits between two changes of the history, so each is seen on its own


def _noise_sigma(metric: str) -> float:
    return next((sigma for prefix, sigma in NOISE.items() if metric.startswith(prefix)), 0.0)


def _percentiles(prefix: str, mean: float) -> dict[str, float]:
    spread = PERCENTILE_SPREAD[prefix]
    return {
        f"{prefix}_mean": mean,
        f"{prefix}_p50": mean * (1.0 - spread * 0.3),
        f"{prefix}_p90": mean * (1.0 + spread),
        f"{prefix}_p99": mean * (1.0 + spread * 2.2),
    }


def _between(start: float, end: float, fraction: float) -> float:
    return start * math.exp(fraction * math.log(end / start))


@dataclass(frozen=True)
class SuiteModel:
    name: str
    hardware_class: str
    concurrencies: tuple[int, ...]


SUITES: tuple[SuiteModel, ...] = (
    SuiteModel(name=MAIN_SUITE, hardware_class=DEMO_HARDWARE, concurrencies=(1, 4, 16)),
    SuiteModel(name=DCP_SUITE, hardware_class=DEMO_HARDWARE, concurrencies=(1, 2)),
    SuiteModel(name=SWEEP_SUITE, hardware_class=SWEEP_HARDWARE, concurrencies=()),
)


@dataclass(frozen=True)
class CurvePoint:
    """One level of a sweep as guidellm names it, with its values."""

    strategy: str
    rate: float | None
    metrics: Mapping[str, float]


@dataclass(frozen=True)
class DemoModel:
    """Where the history's changes land (positions on main) and how much each moves which metric."""

    pr_positions: tuple[int, ...]
    weights: Mapping[str, tuple[float, ...]]
    regression_at: int
    revert_at: int
    slow_runs: frozenset[int]
    gaps: frozenset[int]  # unbenchmarked commits of the main suite
    inert: frozenset[int]  # unbenchmarked docs and CI commits right before the MXFP4 tuning PR

    @cached_property
    def pr_at(self) -> dict[int, int]:
        return {
            position: number for position, (number, _) in zip(self.pr_positions, TRACKING_PRS, strict=True)
        }

    @cached_property
    def position_of(self) -> dict[int, int]:
        found = {number: position for position, number in self.pr_at.items()}
        return found | {REGRESSION_PR: self.regression_at, REVERT_PR: self.revert_at}

    def merged(self, position: int) -> int:
        """How many tracking PRs are on main at `position`."""
        return sum(1 for at in self.pr_positions if at <= position)

    def step_positions(self, suite: str) -> tuple[int, ...]:
        """Commits where `suite`'s truth changes."""
        if suite == MAIN_SUITE:
            return tuple(sorted((*self.pr_positions, self.regression_at, self.revert_at)))
        if suite == DCP_SUITE:
            return tuple(sorted(self.position_of[number] for number in DCP_STEPS))
        return (self.position_of[SWEEP_STEP_PR],)

    def dcp_start(self) -> int:
        """The DCP merge: the long-context suite needs `--decode-context-parallel-size`, so starts there."""
        return self.position_of[DCP_PR]

    def benchmarked(self, suite: str, position: int) -> bool:
        """Whether the history has a routine run of `suite` at `position`: every step and the commit
        before it always, so that each change can be named at its commit."""
        steps = self.step_positions(suite)
        anchors = {0, COMMIT_COUNT - 1, *steps, *(step - 1 for step in steps)}
        if suite == MAIN_SUITE:
            return position not in self.gaps
        if suite == DCP_SUITE:
            return position >= self.dcp_start() and (position in anchors or position % DCP_EVERY == 0)
        return position in anchors or position % SWEEP_EVERY == 0

    # The truth, without noise.

    def truth(self, *, suite: str, position: int, concurrency: int) -> dict[str, float]:
        if suite == MAIN_SUITE:
            return self._main_truth(position=position, concurrency=concurrency)
        if suite == DCP_SUITE:
            return self._dcp_truth(position=position, concurrency=concurrency)
        raise KeyError(f"{suite} has no fixed concurrency levels")

    def _main_truth(self, *, position: int, concurrency: int) -> dict[str, float]:
        (thr0, lat0, ttft0), (thr1, lat1, ttft1) = REFERENCE[concurrency]
        merged = self.merged(position)
        progress = {metric: sum(shares[:merged]) / sum(shares) for metric, shares in self.weights.items()}
        penalty = (
            REGRESSION_DROP if concurrency == 16 and self.regression_at <= position < self.revert_at else 0.0
        )
        throughput = _between(thr0, thr1, progress["throughput"]) * (1.0 - penalty)
        latency = _between(lat0, lat1, progress["latency"]) / (1.0 - penalty)
        ttft_ms = _between(ttft0, ttft1, progress["ttft"])
        tpot_ms = (latency * 1000.0 - ttft_ms) / (OUTPUT_TOKENS - 1)
        values = {
            "output_throughput_tok_s": throughput,
            **_percentiles("ttft_ms", ttft_ms),
            **_percentiles("itl_ms", tpot_ms),
            **_percentiles("tpot_ms", tpot_ms),
            **_percentiles("latency_s", latency),
        }
        return values

    def _dcp_truth(self, *, position: int, concurrency: int) -> dict[str, float]:
        tpot_share = sum(
            share for number, (share, _) in DCP_STEPS.items() if self.position_of[number] <= position
        )
        ttft_share = sum(
            share for number, (_, share) in DCP_STEPS.items() if self.position_of[number] <= position
        )
        tpot_p50 = _between(*DCP_TPOT_P50[concurrency], tpot_share)
        ttft_ms = _between(*DCP_TTFT_MS[concurrency], ttft_share)
        tpot_mean = tpot_p50 / (1.0 - PERCENTILE_SPREAD["tpot_ms"] * 0.3)
        latency = (ttft_ms + tpot_mean * (DCP_OUTPUT_TOKENS - 1)) / 1000.0
        return {
            "output_throughput_tok_s": concurrency * DCP_OUTPUT_TOKENS / latency,
            **_percentiles("ttft_ms", ttft_ms),
            **_percentiles("itl_ms", tpot_mean),
            **_percentiles("tpot_ms", tpot_mean),
            **_percentiles("latency_s", latency),
        }

    def sweep_service_rate(self, position: int) -> float:
        return SWEEP_SERVICE_RATE * (SWEEP_STEP if position >= self.position_of[SWEEP_STEP_PR] else 1.0)

    # One run: the truth with fresh noise.

    def measure(
        self, *, suite: str, position: int, concurrency: int, rng: random.Random, slow: bool = False
    ) -> dict[str, float]:
        """One run's values of a level: each metric its own run-to-run noise; `slow` is the slow node."""
        values = {
            metric: value * math.exp(rng.gauss(0.0, _noise_sigma(metric)))
            for metric, value in self.truth(suite=suite, position=position, concurrency=concurrency).items()
        }
        if slow:
            values["output_throughput_tok_s"] *= SLOW_RUN_FACTOR
        output_tokens = OUTPUT_TOKENS if suite == MAIN_SUITE else DCP_OUTPUT_TOKENS
        max_seconds = 150.0 if suite == MAIN_SUITE else 300.0
        values["request_throughput_req_s"] = values["output_throughput_tok_s"] / output_tokens
        values.update(
            requests_successful=float(max(2, round(max_seconds / values["latency_s_mean"] * concurrency))),
            requests_errored=0.0,
            requests_incomplete=float(concurrency),
        )
        return values

    def exact_reference(self, *, concurrency: int, end: bool) -> dict[str, float]:
        """The first run at v0.27.1 and at 82a85dc1: the published means exactly, so compare reproduces
        DESIGN.md's table."""
        values = self.measure(
            suite=MAIN_SUITE,
            position=COMMIT_COUNT - 1 if end else 0,
            concurrency=concurrency,
            rng=random.Random(0),
        )
        throughput, latency, ttft = REFERENCE[concurrency][1 if end else 0]
        values.update(output_throughput_tok_s=throughput, latency_s_mean=latency, ttft_ms_mean=ttft)
        values["request_throughput_req_s"] = throughput / OUTPUT_TOKENS
        values["tpot_ms_mean"] = (latency * 1000.0 - ttft) / (OUTPUT_TOKENS - 1)
        values["itl_ms_mean"] = values["tpot_ms_mean"]
        return values

    def sweep_curve(self, *, position: int, rng: random.Random) -> tuple[CurvePoint, ...]:
        """guidellm's sweep on the CPU node: synchronous, throughput, then two constant rates between;
        TTFT and ITL grow as the load nears the service rate (an M/M/1-like queue)."""
        service = self.sweep_service_rate(position)
        loads = (
            ("synchronous", None, 0.18),
            ("constant", round(service * 0.45, 2), 0.45),
            ("constant", round(service * 0.72, 2), 0.72),
            ("throughput", None, 0.93),
        )
        points = []
        for strategy, rate, utilisation in loads:
            achieved = service * utilisation * math.exp(rng.gauss(0.0, 0.01))
            queueing = 1.0 / (1.0 - utilisation)
            ttft_p50 = 38.0 * queueing * math.exp(rng.gauss(0.0, 0.02))
            itl_p50 = 21.0 * (1.0 + 1.6 * utilisation**2) * math.exp(rng.gauss(0.0, 0.015))
            ttft_p99, itl_p99 = ttft_p50 * 2.4, itl_p50 * 1.9
            # Goodput: the requests that met both objectives (TTFT p99 500 ms, ITL p99 150 ms).
            within = min(1.0, 500.0 / ttft_p99) * min(1.0, 150.0 / itl_p99)
            points.append(
                CurvePoint(
                    strategy=strategy,
                    rate=rate,
                    metrics={
                        "request_throughput_req_s": achieved,
                        "output_throughput_tok_s": achieved * 16,
                        "ttft_ms_p50": ttft_p50,
                        "ttft_ms_p99": ttft_p99,
                        "itl_ms_p50": itl_p50,
                        "itl_ms_p99": itl_p99,
                        "goodput_req_s": achieved * within,
                    },
                )
            )
        return tuple(points)

    def gsm8k_correct(self, *, suite: str, rng: random.Random, exact: bool = False) -> int:
        """GSM8K problems solved in one run: the post's score, binomial noise around it."""
        share = GSM8K_SHARE[suite]
        if exact:
            return round(share * GSM8K_SAMPLES)
        return sum(1 for _ in range(GSM8K_SAMPLES) if rng.random() < share)


def demo_model(*, seed: int = DEMO_SEED) -> DemoModel:
    """The demo's world for `seed`: the same seed gives the same model, wherever it is built."""
    rng = random.Random(seed)
    while True:  # changes at least MIN_STEP_DISTANCE commits apart, so the detector sees each on its own
        pr_positions = sorted(rng.sample(range(12, COMMIT_COUNT - 12), len(TRACKING_PRS)))
        regression_at = pr_positions[7] + MIN_STEP_DISTANCE + rng.randint(0, 4)
        revert_at = regression_at + 27
        changes = sorted((*pr_positions, regression_at, revert_at))
        if all(b - a >= MIN_STEP_DISTANCE for a, b in itertools.pairwise(changes)):
            break
    weights = {
        metric: tuple(rng.uniform(0.3, 1.0) for _ in TRACKING_PRS)
        for metric in ("throughput", "latency", "ttft")
    }
    slow_runs = frozenset({pr_positions[2] + 5, pr_positions[10] + 4})
    gaps: set[int] = set()
    for start in rng.sample(range(20, COMMIT_COUNT - 20), 6):
        gaps.update(range(start, start + rng.randint(2, 7)))
    # A change's commit and the one before it are always benchmarked, so it can be named exactly.
    gaps -= {*changes, *(position - 1 for position in changes)}
    # Two unbenchmarked docs and CI commits right before the MXFP4 tuning PR: its group's range holds
    # three commits, of which only the PR can change performance.
    inert = frozenset({pr_positions[4] - 2, pr_positions[4] - 1}) - set(changes)
    gaps |= inert
    return DemoModel(
        pr_positions=tuple(pr_positions),
        weights=weights,
        regression_at=regression_at,
        revert_at=revert_at,
        slow_runs=slow_runs - set(changes) - {position - 1 for position in changes},
        gaps=frozenset(gaps),
        inert=inert,
    )


@dataclass(frozen=True)
class TruthStep:
    """One thing the generator did: at `position`, `metric` of a level of a suite moved by `change_pct`."""

    position: int
    pr: int
    suite: str
    hardware: str
    concurrency: int
    metric: str
    change_pct: float


TRUTH_METRICS: tuple[str, ...] = (
    "output_throughput_tok_s",
    "ttft_ms_mean",
    "ttft_ms_p50",
    "ttft_ms_p99",
    "latency_s_mean",
    "itl_ms_mean",
    "tpot_ms_mean",
    "tpot_ms_p50",
    "tpot_ms_p99",
)
WHOLE_RUN_LEVEL = 0
MIN_TRUTH_CHANGE_PCT = 0.05


def model_steps(*, model: DemoModel) -> list[TruthStep]:
    """Every change the generator made, per suite, level and metric, larger than rounding."""
    steps: list[TruthStep] = []
    pr_of = {position: number for number, position in model.position_of.items()}
    for suite in SUITES:
        for position in model.step_positions(suite.name):
            if suite.name == SWEEP_SUITE:
                steps.append(
                    TruthStep(
                        position=position,
                        pr=pr_of[position],
                        suite=suite.name,
                        hardware=suite.hardware_class,
                        concurrency=WHOLE_RUN_LEVEL,
                        metric="capacity_req_s",
                        change_pct=round((SWEEP_STEP - 1.0) * 100.0, 2),
                    )
                )
                continue
            for concurrency in suite.concurrencies:
                before = model.truth(suite=suite.name, position=position - 1, concurrency=concurrency)
                after = model.truth(suite=suite.name, position=position, concurrency=concurrency)
                for metric in TRUTH_METRICS:
                    change = (after[metric] / before[metric] - 1.0) * 100.0
                    if abs(change) >= MIN_TRUTH_CHANGE_PCT:
                        steps.append(
                            TruthStep(
                                position=position,
                                pr=pr_of[position],
                                suite=suite.name,
                                hardware=suite.hardware_class,
                                concurrency=concurrency,
                                metric=metric,
                                change_pct=round(change, 2),
                            )
                        )
    return steps

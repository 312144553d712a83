"""Demo data that tells the Kimi K3 story of DESIGN.md: v0.27.1-level numbers at the start of the
history, the 82a85dc1-level numbers at its end, moving in steps at the PRs of tracking issue
vllm-project/vllm#50587, with noise, one regression that a later revert fixes, and unbenchmarked gaps.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from dashboard.benchmarks.models import Commit, Run, RunKind, Runner, RunStatus, Suite
from dashboard.benchmarks.services import repository_default, run_results_store
from dashboard.benchmarks.subjects import subject_pr_number
from dashboard.benchmarks.suites import suite_upsert
from runners.guidellm_report import GuidellmReport, LevelResult
from runners.suites import suite_get

DEMO_SUITE = "kimi-k3-8k1k"
DEMO_HARDWARE = "b300"
COMMIT_COUNT = 360
BASE_SHA_PREFIX = "1f3e27b1"  # the v0.27.1-level start of the history
HEAD_SHA_PREFIX = "82a85dc1"  # DESIGN.md's measured main commit
REGRESSION_PR = 51830
REVERT_PR = 52034
OPEN_TRACKING_PR = 53611  # listed in the tracking issue, not merged
REGRESSION_DROP = 0.06  # output throughput at concurrency 16

# DESIGN.md's table: (throughput tok/s, mean latency s, mean TTFT ms) at v0.27.1 and at 82a85dc1.
REFERENCE: dict[int, tuple[tuple[float, float, float], tuple[float, float, float]]] = {
    1: ((83.3, 12.37, 2262.9), (183.3, 5.30, 376.3)),
    4: ((166.7, 23.67, 2314.9), (416.7, 10.50, 640.5)),
    16: ((258.3, 55.90, 7601.1), (725.0, 22.17, 1121.0)),
}
OUTPUT_TOKENS = 1000
DEMO_GPU_COUNT = 8
DEMO_GPU_MODEL = "NVIDIA B300"
DEMO_HOST = "gpu-b300-01"
DEMO_ENVIRONMENT: dict[str, object] = {
    "host": DEMO_HOST,
    "os": "Linux-6.14.0-1012-nvidia-x86_64-with-glibc2.39",
    "cpu_model": "Intel(R) Xeon(R) 6960P",
    "cpu_count": 288,
    "memory_total_gib": 2015.6,
    "gpu_source": "nvml",
    "gpu_model": DEMO_GPU_MODEL,
    "gpu_count": DEMO_GPU_COUNT,
    "gpu_driver_version": "600.14",
    "cuda_version": "13.3",
    "torch_version": "2.12.0",
    "guidellm_version": "0.8.1",
    "demo": True,
}
# Seconds of each stage of a run on the B300 node: (low, high). Loading ~1 TB of weights on 8 GPUs and
# capturing CUDA graphs dominates; the benchmark is three 150 s levels plus ramps.
DEMO_STAGE_SECONDS: dict[str, tuple[float, float]] = {
    RunStatus.INSTALLING: (200.0, 320.0),
    RunStatus.STARTING_SERVER: (960.0, 1140.0),
    RunStatus.BENCHMARKING: (480.0, 540.0),
    RunStatus.STORING: (2.0, 9.0),
}
TELEMETRY_INTERVAL_S = 30

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
    (52388, "[Distributed] Decode context parallelism (DCP) for Kimi K3"),
    (52789, "[Perf] CUDA graph capture for speculative verification"),
    (53152, "[Kimi K3] Reduce TTFT with chunked prefill of the shared prefix"),
    (53396, "[Perf] Async output processing for DSpark"),
)

_FILLER_SUBJECTS = (
    "[Bugfix] Fix tool-call parser edge case with empty arguments",
    "[Doc] Update the serving guide for speculative decoding",
    "[CI] Shard the distributed tests",
    "[Model] Support a new vision encoder",
    "[Misc] Clean up unused imports in the scheduler",
    "[Frontend] Validate max_tokens in chat completions",
    "[Core] Refactor KV cache manager bookkeeping",
    "[Bugfix] Handle empty prompts in the tokenizer group",
    "[Kernel] Add a fallback for non-power-of-two head sizes",
    "[Hardware][AMD] Enable fp8 KV cache",
    "[V1] Simplify request state transitions",
    "[Test] Add coverage for structured output with reasoning",
    "[Build] Bump the FlashInfer pin",
    "[Misc] Improve error message for unsupported dtype",
)


# Subjects of the two unbenchmarked commits before the MXFP4 tuning PR: they touch only docs and CI.
_INERT_SUBJECTS = (
    "[Doc] Document the MXFP4 MoE tuning knobs",
    "[CI] Run the B300 kernel tests nightly",
)
INERT_CHANGE_CLASS = "docs_tests_ci"


@dataclass(frozen=True)
class DemoStep:
    """A commit where the generator changed performance: a tracking PR's merge, the regression, its revert."""

    position: int
    sha: str
    pr_number: int


class DemoAlreadyLoaded(Exception):
    """The demo history is there already; loading it again would duplicate nothing and change nothing."""


@dataclass(frozen=True)
class DemoOutcome:
    commits: int
    runs: int
    measurements: int
    steps: tuple[DemoStep, ...]  # the truth every alert group of the demo must name


def _sha(seed: str, prefix: str = "") -> str:
    return (prefix + hashlib.sha1(seed.encode()).hexdigest())[:40]


def _level_metrics(
    *, concurrency: int, progress: dict[str, float], penalty: float, rng: random.Random
) -> dict[str, float]:
    """Headline values interpolated in log space between the reference points, with noise."""
    (thr0, lat0, ttft0), (thr1, lat1, ttft1) = REFERENCE[concurrency]

    def interpolate(start: float, end: float, fraction: float, noise: float) -> float:
        return start * math.exp(fraction * math.log(end / start)) * (1.0 + rng.gauss(0.0, noise))

    throughput = interpolate(thr0, thr1, progress["throughput"], 0.012) * (1.0 - penalty)
    latency = interpolate(lat0, lat1, progress["latency"], 0.012) / (1.0 - penalty)
    ttft_ms = interpolate(ttft0, ttft1, progress["ttft"], 0.02)
    tpot_ms = (latency * 1000.0 - ttft_ms) / (OUTPUT_TOKENS - 1)
    itl_ms = tpot_ms * (1.0 + rng.gauss(0.0, 0.004))
    metrics: dict[str, float] = {
        "output_throughput_tok_s": throughput,
        "request_throughput_req_s": throughput / OUTPUT_TOKENS,
    }
    for prefix, mean, spread in (
        ("ttft_ms", ttft_ms, 0.35),
        ("itl_ms", itl_ms, 0.10),
        ("tpot_ms", tpot_ms, 0.06),
        ("latency_s", latency, 0.08),
    ):
        metrics[f"{prefix}_mean"] = mean
        metrics[f"{prefix}_p50"] = mean * (1.0 - spread * 0.3)
        metrics[f"{prefix}_p90"] = mean * (1.0 + spread)
        metrics[f"{prefix}_p99"] = mean * (1.0 + spread * 2.2)
    successful = max(2, round(150.0 / latency * concurrency))
    metrics.update(
        requests_successful=successful, requests_errored=0.0, requests_incomplete=float(concurrency)
    )
    return metrics


def _exact_reference(concurrency: int, *, end: bool) -> dict[str, float]:
    rng = random.Random(0)
    metrics = _level_metrics(
        concurrency=concurrency,
        progress=dict.fromkeys(("throughput", "latency", "ttft"), 1.0 if end else 0.0),
        penalty=0.0,
        rng=rng,
    )
    throughput, latency, ttft = REFERENCE[concurrency][1 if end else 0]
    metrics.update(output_throughput_tok_s=throughput, latency_s_mean=latency, ttft_ms_mean=ttft)
    metrics["tpot_ms_mean"] = (latency * 1000.0 - ttft) / (OUTPUT_TOKENS - 1)
    metrics["itl_ms_mean"] = metrics["tpot_ms_mean"]
    return metrics


def demo_vllm_version(*, commit: Commit) -> str:
    """What the demo's server answers on /version at a commit: the v0.27.1 release at the start of the
    history, a development build of 0.27.2 after it, as vLLM's wheels name them."""
    if commit.position == 0:
        return "0.27.1"
    return f"0.27.2.dev{commit.position}+g{commit.sha[:9]}"


def _demo_telemetry(*, benchmark_s: float, rng: random.Random) -> list[dict[str, float | int]]:
    """NVML samples of the node's GPUs every TELEMETRY_INTERVAL_S of the benchmark: clocks near boost,
    power and temperature climbing as the levels go up, the weights and KV cache filling memory."""
    samples: list[dict[str, float | int]] = []
    steps = int(benchmark_s // TELEMETRY_INTERVAL_S) + 1
    for gpu_index in range(DEMO_GPU_COUNT):
        warmth = rng.uniform(-2.0, 2.0)
        for step in range(steps):
            load = step / max(1, steps - 1)
            samples.append(
                {
                    "elapsed_s": float(step * TELEMETRY_INTERVAL_S),
                    "gpu_index": gpu_index,
                    "sm_clock_mhz": round(rng.gauss(1965.0 - 60.0 * load, 12.0)),
                    "power_w": round(rng.gauss(640.0 + 420.0 * load, 18.0), 1),
                    "temperature_c": round(46.0 + 22.0 * load + warmth + rng.gauss(0.0, 0.6)),
                    "memory_used_mib": round(262_400.0 + 1_800.0 * load + rng.gauss(0.0, 40.0)),
                    "utilization_pct": round(min(100.0, rng.gauss(78.0 + 19.0 * load, 2.0))),
                }
            )
    return samples


def demo_run_create(
    *, commit: Commit, suite: Suite, runner: Runner, finished_at: datetime, kind: str, rng: random.Random
) -> Run:
    """A succeeded run of the demo's node as a real one records it: queued after its commit landed,
    each stage timed, the server's vLLM version, heartbeats and the GPUs' telemetry."""
    stage_durations = {
        stage: round(rng.uniform(low, high), 1) for stage, (low, high) in DEMO_STAGE_SECONDS.items()
    }
    started_at = finished_at - timedelta(seconds=sum(stage_durations.values()))
    waited = timedelta(minutes=rng.uniform(4.0, 40.0))
    committed_at = commit.committed_at or started_at
    queued_at = min(max(committed_at, started_at - waited), started_at)
    # The node's last heartbeat is the one it sent when it stored its latest run.
    Runner.objects.filter(
        Q(last_heartbeat_at__isnull=True) | Q(last_heartbeat_at__lt=finished_at), pk=runner.pk
    ).update(last_heartbeat_at=finished_at)
    return Run.objects.create(
        commit=commit,
        suite=suite,
        runner=runner,
        hardware_class=runner.hardware_class,
        source=Run.Source.RUNNER,
        status=RunStatus.SUCCEEDED,
        kind=kind,
        forced=kind != RunKind.ROUTINE,
        attempt=1,
        queued_at=queued_at,
        dispatched_at=queued_at,
        started_at=started_at,
        finished_at=finished_at,
        heartbeat_at=finished_at - timedelta(seconds=stage_durations[RunStatus.STORING]),
        stage_durations=stage_durations,
        environment={**DEMO_ENVIRONMENT, "vllm_version": demo_vllm_version(commit=commit)},
        vllm_version=demo_vllm_version(commit=commit),
        guidellm_version=str(DEMO_ENVIRONMENT["guidellm_version"]),
        telemetry=_demo_telemetry(benchmark_s=stage_durations[RunStatus.BENCHMARKING], rng=rng),
    )


def demo_load(*, seed: int = 50587) -> DemoOutcome:
    """Create the demo history once; raise DemoAlreadyLoaded when its suite already has runs."""
    rng = random.Random(seed)
    repository = repository_default()
    if Run.objects.filter(suite__name=DEMO_SUITE).exists():
        raise DemoAlreadyLoaded(f"demo data already loaded (suite {DEMO_SUITE} has runs)")

    # Where each tracking PR lands on main, and how much of the total gain it brings per metric.
    pr_positions = sorted(rng.sample(range(12, COMMIT_COUNT - 12), len(TRACKING_PRS)))
    weights = {
        metric: [rng.uniform(0.3, 1.0) for _ in TRACKING_PRS] for metric in ("throughput", "latency", "ttft")
    }
    merges = dict(zip(pr_positions, TRACKING_PRS, strict=True))
    regression_at = pr_positions[7] + 9
    revert_at = regression_at + 27
    outlier_positions = {pr_positions[2] + 5, pr_positions[10] + 4}
    gaps: set[int] = set()
    for start in rng.sample(range(20, COMMIT_COUNT - 20), 6):
        gaps.update(range(start, start + rng.randint(2, 7)))
    gaps -= {regression_at - 1, regression_at, revert_at - 1, revert_at, *pr_positions}
    # Two unbenchmarked docs and CI commits right before the MXFP4 tuning PR: its group's range holds three
    # commits, of which only the PR can change performance.
    inert = {pr_positions[4] - 2, pr_positions[4] - 1} - {regression_at, revert_at, *pr_positions}
    gaps |= inert
    reserved_prs = {number for number, _ in TRACKING_PRS} | {REGRESSION_PR, REVERT_PR, OPEN_TRACKING_PR}

    start_time = datetime(2026, 7, 28, 6, 0, tzinfo=UTC)
    span = datetime(2026, 9, 12, 18, 0, tzinfo=UTC) - start_time
    # The suite as its YAML file describes it: the demo shows the real serve, benchmark, install settings.
    suite, _ = suite_upsert(spec=suite_get(name=DEMO_SUITE))
    runner, _ = Runner.objects.update_or_create(
        name="b300-node-1",
        defaults={
            "hardware_class": DEMO_HARDWARE,
            "gpu_model": DEMO_GPU_MODEL,
            "gpu_count": DEMO_GPU_COUNT,
            "host": DEMO_HOST,
        },
    )
    # Separate from `rng`, so that the history's numbers stay what they were before runs told their stages.
    run_rng = random.Random(seed + 1)

    runs = measurements = 0
    pr_index = -1
    steps: list[DemoStep] = []
    with transaction.atomic():
        for position in range(COMMIT_COUNT):
            if position in merges:
                pr_index += 1
                pr_number, title = merges[position]
                subject = f"{title} (#{pr_number})"
            elif position == regression_at:
                subject = (
                    f"[Core] Move sampler metadata preparation onto the scheduler thread (#{REGRESSION_PR})"
                )
            elif position == revert_at:
                subject = (
                    'Revert "[Core] Move sampler metadata preparation onto the scheduler thread '
                    f'(#{REGRESSION_PR})" (#{REVERT_PR})'
                )
            else:
                filler_pr = 50300 + position * 9 + rng.randint(0, 8)
                while filler_pr in reserved_prs:  # never borrow the number of a PR the story is about
                    filler_pr += 1
                subject = f"{rng.choice(_FILLER_SUBJECTS)} (#{filler_pr})"
                if position in inert:
                    subject = f"{_INERT_SUBJECTS[min(inert) != position]} (#{filler_pr})"
            if position == 0:
                sha = _sha("v0.27.1", BASE_SHA_PREFIX)
            elif position == COMMIT_COUNT - 1:
                sha = _sha("82a85dc1", HEAD_SHA_PREFIX)
            else:
                sha = _sha(f"demo-{position}")
            committed_at = start_time + span * (position / (COMMIT_COUNT - 1))
            commit, _ = Commit.objects.update_or_create(
                repository=repository,
                sha=sha,
                defaults={
                    "subject": subject,
                    "pr_number": subject_pr_number(subject=subject),
                    "committed_at": committed_at,
                    "position": position,
                    "author_name": rng.choice(
                        ("Woosuk Kwon", "Simon Mo", "Nick Hill", "Lucas Wilkinson", "Cody Yu")
                    ),
                    "parents": [_sha(f"demo-{position - 1}")] if position else [],
                    "change_class": INERT_CHANGE_CLASS if position in inert else "",
                },
            )
            if position in merges or position in (regression_at, revert_at):
                steps.append(DemoStep(position=position, sha=sha, pr_number=commit.pr_number or 0))
            if position in gaps:
                continue

            progress = {
                metric: sum(weights[metric][: pr_index + 1]) / sum(weights[metric]) for metric in weights
            }
            levels = []
            for concurrency in (1, 4, 16):
                if position == 0 or position == COMMIT_COUNT - 1:
                    metrics = _exact_reference(concurrency, end=position == COMMIT_COUNT - 1)
                else:
                    penalty = (
                        REGRESSION_DROP
                        if concurrency == 16 and regression_at <= position < revert_at
                        else 0.0
                    )
                    metrics = _level_metrics(
                        concurrency=concurrency, progress=progress, penalty=penalty, rng=rng
                    )
                    if position in outlier_positions:
                        metrics["output_throughput_tok_s"] *= 0.85
                levels.append(LevelResult(concurrency=concurrency, metrics=metrics))
            finished_at = min(committed_at + timedelta(hours=2), timezone.now())
            run = demo_run_create(
                commit=commit,
                suite=suite,
                runner=runner,
                finished_at=finished_at,
                kind=RunKind.ROUTINE,
                rng=run_rng,
            )
            runs += 1
            # Detection runs once over the whole history afterwards (`detect_alerts`), not per run.
            measurements += run_results_store(
                run=run,
                report=GuidellmReport(guidellm_version="0.8.1", labels={}, levels=tuple(levels)),
                raw_report=None,
                detect=False,
            )
    return DemoOutcome(commits=COMMIT_COUNT, runs=runs, measurements=measurements, steps=tuple(steps))

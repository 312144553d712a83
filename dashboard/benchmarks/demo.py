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
from django.utils import timezone

from dashboard.benchmarks.models import Commit, Run, Runner, RunStatus, Suite
from dashboard.benchmarks.services import repository_default, run_results_store
from dashboard.benchmarks.subjects import subject_pr_number
from runners.guidellm_report import GuidellmReport, LevelResult

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
    suite, _ = Suite.objects.update_or_create(
        name=DEMO_SUITE,
        defaults={
            "hardware_class": DEMO_HARDWARE,
            "description": "Kimi K3 on one B300 node, TP8 with DSpark speculative decoding: "
            "8K prompt / 1K output tokens at concurrency 1, 4 and 16, 150 s per level (demo history).",
            "concurrencies": [1, 4, 16],
        },
    )
    runner, _ = Runner.objects.update_or_create(
        name="b300-node-1",
        defaults={
            "hardware_class": DEMO_HARDWARE,
            "gpu_model": "NVIDIA B300",
            "gpu_count": 8,
            "host": "gpu-b300-01",
        },
    )
    environment = {
        "gpu_model": "NVIDIA B300",
        "gpu_count": 8,
        "driver": "600.14",
        "cuda": "13.3",
        "host": "gpu-b300-01",
        "demo": True,
    }

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
            run = Run.objects.create(
                commit=commit,
                suite=suite,
                runner=runner,
                hardware_class=DEMO_HARDWARE,
                source=Run.Source.RUNNER,
                status=RunStatus.SUCCEEDED,
                started_at=finished_at - timedelta(minutes=31),
                finished_at=finished_at,
                environment={**environment, "vllm_commit": sha},
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

"""Demo data that tells the Kimi K3 story of DESIGN.md: v0.27.1-level numbers at the start of the
history, the 82a85dc1-level numbers at its end, moving in steps at the PRs of tracking issue
vllm-project/vllm#50587, with noise, one regression that a later revert fixes, and unbenchmarked gaps.

Longer than 500 lines: the demo's history is written in one pass over the model, suite by suite.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from dashboard.benchmarks.capacity import accuracy_store
from dashboard.benchmarks.models import Commit, Run, RunKind, Runner, RunStatus, Suite
from dashboard.benchmarks.services import repository_default, run_results_store
from dashboard.benchmarks.subjects import subject_pr_number
from dashboard.benchmarks.suites import suite_upsert
from dashboard.demo.model import (
    COMMIT_COUNT,
    DCP_SUITE,
    DEMO_HARDWARE,
    DEMO_SEED,
    GSM8K_SAMPLES,
    MAIN_SUITE,
    REGRESSION_PR,
    REVERT_PR,
    SWEEP_HARDWARE,
    SWEEP_SUITE,
    TRACKING_PRS,
    DemoModel,
    demo_model,
    model_steps,
)
from runners.accuracy import accuracy_result
from runners.guidellm_report import CurveLevel, GuidellmReport, LevelResult
from runners.suites import suite_get

DEMO_SUITE = MAIN_SUITE
BASE_SHA_PREFIX = "1f3e27b1"  # the v0.27.1-level start of the history
HEAD_SHA_PREFIX = "82a85dc1"  # DESIGN.md's measured main commit
OPEN_TRACKING_PR = 53611  # listed in the tracking issue, not merged
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


def demo_run_texts(*, commit: Commit, suite: Suite, rng: random.Random) -> dict[str, Any]:
    """What a node records besides the numbers: the commands to reproduce the run, the tail of each
    step's log, and the server's /metrics counters before and after the benchmark."""
    serve = suite.serve_settings or {}
    benchmark = suite.benchmark_settings or {}
    data = benchmark.get("data") or {}
    levels = ",".join(str(level) for level in suite.concurrencies) or "sweep"
    profile = "sweep" if benchmark.get("profile") == "sweep" else "concurrent"
    args = " ".join(str(arg) if not str(arg).startswith("{") else f"'{arg}'" for arg in serve.get("args", []))
    commands = {
        "install_vllm": (
            f"uv pip install vllm --torch-backend=auto --extra-index-url https://wheels.vllm.ai/{commit.sha}"
        ),
        "install_guidellm": "uv pip install guidellm==0.8.1",
        "serve": f"vllm serve {serve.get('model', '')} {args} --port ${{PORT}}",
        "benchmark": (
            f"guidellm benchmark run --target http://127.0.0.1:${{PORT}} --profile {profile} --rate {levels} "
            f"--max-seconds {benchmark.get('max_seconds', 150)} --data "
            f"prompt_tokens={data.get('prompt_tokens')},output_tokens={data.get('output_tokens')} "
            f"--random-seed {benchmark.get('seed', 42)} --output-path ${{REPRO_DIR}}/guidellm-report.json"
        ),
    }
    version = demo_vllm_version(commit=commit)
    load_s = rng.uniform(610.0, 780.0)
    logs = {
        "install": (
            f"Resolved 184 packages in 2.41s\nPrepared vllm=={version} from https://wheels.vllm.ai/{commit.sha}\n"
            f"Installed 184 packages in 38.2s\n + vllm=={version}\n"
        ),
        "server": (
            f"INFO vLLM API server version {version}\n"
            f"INFO Loading weights took {load_s:.1f} seconds\n"
            "INFO Memory profiling takes 41.8 seconds; KV cache 172.4 GiB per GPU\n"
            "INFO Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 67/67\n"
            "INFO Graph capturing finished in 96 secs\n"
            "INFO Started server process; Uvicorn running on http://127.0.0.1:8000\n"
        ),
        "guidellm": "".join(
            f"Benchmark concurrent@{level}: {round(rng.uniform(40, 900))} requests completed, 0 errored\n"
            for level in (suite.concurrencies or (1, 4, 8, 16))
        )
        + "Benchmarks complete; report written to guidellm-report.json\n",
    }
    queries = float(round(rng.uniform(3.0e6, 4.0e6)))
    drafts = float(round(rng.uniform(1.4e5, 1.8e5)))
    delta = {
        "prefix_cache_queries": queries,
        "prefix_cache_hits": round(queries * (0.93 if suite.name == DCP_SUITE else 0.0)),
        "spec_decode_num_drafts": drafts,
        "spec_decode_num_draft_tokens": drafts * 8,
        "spec_decode_num_accepted_tokens": round(drafts * 8 * rng.uniform(0.52, 0.58)),
        "prompt_tokens": queries,
        "generation_tokens": float(round(rng.uniform(2.0e5, 3.0e5))),
        "preemptions": 0.0,
    }
    before = {key: float(round(rng.uniform(1.0e3, 5.0e3))) for key in delta} | {
        "kv_cache_usage_ratio": 0.0,
        "requests_running": 0.0,
        "requests_waiting": 0.0,
    }
    after = {key: before[key] + value for key, value in delta.items()} | {
        "kv_cache_usage_ratio": round(rng.uniform(0.2, 0.6), 3),
        "requests_running": 0.0,
        "requests_waiting": 0.0,
    }
    return {
        "commands": commands,
        "logs": logs,
        "server_metrics": {"before": before, "after": after, "delta": delta},
    }


def _environment(*, runner: Runner, commit: Commit) -> dict[str, object]:
    """The node's fingerprint: the B300 node's, or the CPU node's (no GPU, its own host)."""
    environment = {**DEMO_ENVIRONMENT, "vllm_version": demo_vllm_version(commit=commit)}
    if not runner.gpu_count:
        environment.update(
            host=runner.host, gpu_source="none", gpu_model="", gpu_count=0, cuda_version="", cpu_count=16
        )
    return environment


def demo_run_create(
    *, commit: Commit, suite: Suite, runner: Runner, finished_at: datetime, kind: str, rng: random.Random
) -> Run:
    """A succeeded run of the demo's node as a real one records it: queued after its commit landed,
    each stage timed, the server's vLLM version, heartbeats and the GPUs' telemetry."""
    stage_durations = _stage_durations(rng=rng)
    started_at = finished_at - timedelta(seconds=sum(stage_durations.values()))
    waited = timedelta(minutes=rng.uniform(4.0, 40.0))
    committed_at = commit.committed_at or started_at
    queued_at = min(max(committed_at, started_at - waited), started_at)
    return Run.objects.create(
        commit=commit,
        suite=suite,
        source=Run.Source.RUNNER,
        kind=kind,
        forced=kind != RunKind.ROUTINE,
        queued_at=queued_at,
        dispatched_at=queued_at,
        **_node_record(
            commit=commit,
            suite=suite,
            runner=runner,
            started_at=started_at,
            stage_durations=stage_durations,
            rng=rng,
        ),
    )


def demo_run_finish(*, run: Run, runner: Runner, started_at: datetime, rng: random.Random) -> Run:
    """A queued run (one the product's own loop asked for) as the demo's node runs it from `started_at`:
    each stage timed, the server's vLLM version, heartbeats and the GPUs' telemetry; succeeded."""
    record = _node_record(
        commit=run.commit,
        suite=run.suite,
        runner=runner,
        started_at=started_at,
        stage_durations=_stage_durations(rng=rng),
        rng=rng,
    )
    for name, value in record.items():
        setattr(run, name, value)
    run.save()
    return run


def _stage_durations(*, rng: random.Random) -> dict[str, float]:
    return {stage: round(rng.uniform(low, high), 1) for stage, (low, high) in DEMO_STAGE_SECONDS.items()}


def _node_record(
    *,
    commit: Commit,
    suite: Suite,
    runner: Runner,
    started_at: datetime,
    stage_durations: dict[str, float],
    rng: random.Random,
) -> dict[str, Any]:
    """What the node records of a run it took at `started_at` and finished stage by stage."""
    finished_at = started_at + timedelta(seconds=sum(stage_durations.values()))
    # The node's last heartbeat is the one it sent when it stored its latest run.
    Runner.objects.filter(
        Q(last_heartbeat_at__isnull=True) | Q(last_heartbeat_at__lt=finished_at), pk=runner.pk
    ).update(last_heartbeat_at=finished_at)
    return {
        "runner": runner,
        "hardware_class": runner.hardware_class,
        "status": RunStatus.SUCCEEDED,
        "attempt": 1,
        "started_at": started_at,
        "finished_at": finished_at,
        "heartbeat_at": finished_at - timedelta(seconds=stage_durations[RunStatus.STORING]),
        "stage_durations": stage_durations,
        "environment": _environment(runner=runner, commit=commit),
        "vllm_version": demo_vllm_version(commit=commit),
        "guidellm_version": str(DEMO_ENVIRONMENT["guidellm_version"]),
        # NVML samples only where there are GPUs: the CPU node records none.
        "telemetry": _demo_telemetry(benchmark_s=stage_durations[RunStatus.BENCHMARKING], rng=rng)
        if runner.gpu_count
        else [],
        **demo_run_texts(commit=commit, suite=suite, rng=rng),
    }


def demo_report(
    *, model: DemoModel, suite: Suite, position: int, rng: random.Random, first: bool = False
) -> GuidellmReport:
    """One run of `suite` at `position`, drawn from the demo's model with fresh noise per metric and
    level. `first` is the history's own run: the slow node's runs, and the published numbers at both ends."""
    if suite.name == SWEEP_SUITE:
        curve = model.sweep_curve(position=position, rng=rng)
        return GuidellmReport(
            guidellm_version="0.8.1",
            labels={},
            levels=(),
            curve=tuple(
                CurveLevel(strategy=point.strategy, streams=None, rate=point.rate, metrics=point.metrics)
                for point in curve
            ),
        )
    levels = []
    for concurrency in suite.concurrencies:
        if first and suite.name == MAIN_SUITE and position in (0, COMMIT_COUNT - 1):
            metrics = model.exact_reference(concurrency=concurrency, end=position == COMMIT_COUNT - 1)
        else:
            metrics = model.measure(
                suite=suite.name,
                position=position,
                concurrency=concurrency,
                rng=rng,
                slow=first and suite.name == MAIN_SUITE and position in model.slow_runs,
            )
        levels.append(LevelResult(concurrency=concurrency, metrics=metrics))
    return GuidellmReport(guidellm_version="0.8.1", labels={}, levels=tuple(levels))


def demo_accuracy_store(
    *, model: DemoModel, run: Run, position: int, rng: random.Random, first: bool = False
) -> None:
    """GSM8K after the benchmark on the Kimi suites: the post's 96.21 % (TP 8) and 96.97 % (DCP 8)."""
    if run.suite.name not in (MAIN_SUITE, DCP_SUITE):
        return
    correct = model.gsm8k_correct(suite=run.suite.name, rng=rng, exact=first and position == COMMIT_COUNT - 1)
    accuracy_store(run=run, accuracy=accuracy_result(name="gsm8k", correct=correct, samples=GSM8K_SAMPLES))


def _commit_subject(*, model: DemoModel, position: int, rng: random.Random, reserved: set[int]) -> str:
    merges = dict(zip(model.pr_positions, TRACKING_PRS, strict=True))
    if position in merges:
        number, title = merges[position]
        return f"{title} (#{number})"
    if position == model.regression_at:
        return f"[Core] Move sampler metadata preparation onto the scheduler thread (#{REGRESSION_PR})"
    if position == model.revert_at:
        return (
            'Revert "[Core] Move sampler metadata preparation onto the scheduler thread '
            f'(#{REGRESSION_PR})" (#{REVERT_PR})'
        )
    if position == 0:
        return "[Release] v0.27.1"  # the tag's commit: a release, not a PR's merge
    filler_pr = 50300 + position * 9 + rng.randint(0, 8)
    while filler_pr in reserved:  # never borrow the number of a PR the story is about
        filler_pr += 1
    if position in model.inert:
        return f"{_INERT_SUBJECTS[min(model.inert) != position]} (#{filler_pr})"
    return f"{rng.choice(_FILLER_SUBJECTS)} (#{filler_pr})"


def demo_load(*, seed: int = DEMO_SEED) -> DemoOutcome:
    """Create the demo history once; raise DemoAlreadyLoaded when its suite already has runs."""
    if Run.objects.filter(suite__name=DEMO_SUITE).exists():
        raise DemoAlreadyLoaded(f"demo data already loaded (suite {DEMO_SUITE} has runs)")
    model = demo_model(seed=seed)
    rng = random.Random(seed)  # subjects and authors
    noise_rng = random.Random(seed + 2)  # the runs' numbers
    run_rng = random.Random(seed + 1)  # the runs' stages, telemetry and logs
    repository = repository_default()
    reserved = {number for number, _ in TRACKING_PRS} | {REGRESSION_PR, REVERT_PR, OPEN_TRACKING_PR}

    start_time = datetime(2026, 7, 28, 6, 0, tzinfo=UTC)
    span = datetime(2026, 9, 12, 18, 0, tzinfo=UTC) - start_time
    # The suites as their YAML files describe them: the demo shows the real serve, benchmark and install
    # settings. The long-context suite needs DCP, so it declares the DCP merge as its oldest commit.
    suites = {
        name: suite_upsert(spec=suite_get(name=name))[0] for name in (MAIN_SUITE, DCP_SUITE, SWEEP_SUITE)
    }
    runners = {
        DEMO_HARDWARE: Runner.objects.update_or_create(
            name="b300-node-1",
            defaults={
                "hardware_class": DEMO_HARDWARE,
                "gpu_model": DEMO_GPU_MODEL,
                "gpu_count": DEMO_GPU_COUNT,
                "host": DEMO_HOST,
            },
        )[0],
        SWEEP_HARDWARE: Runner.objects.update_or_create(
            name="cpu-node-1",
            defaults={"hardware_class": SWEEP_HARDWARE, "gpu_model": "", "gpu_count": 0, "host": "cpu-ci-01"},
        )[0],
    }

    runs = measurements = 0
    steps: list[DemoStep] = []
    commits: list[Commit] = []
    step_positions = {position for name in suites for position in model.step_positions(name)}
    with transaction.atomic():
        for position in range(COMMIT_COUNT):
            subject = _commit_subject(model=model, position=position, rng=rng, reserved=reserved)
            sha = demo_sha(position=position)
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
                    "parents": [commits[-1].sha] if commits else [],
                    "change_class": INERT_CHANGE_CLASS if position in model.inert else "",
                },
            )
            commits.append(commit)
            if position in step_positions:
                steps.append(DemoStep(position=position, sha=sha, pr_number=commit.pr_number or 0))
            for offset, (name, suite) in enumerate(suites.items()):
                if not model.benchmarked(name, position):
                    continue
                runner = runners[suite.hardware_class]
                finished_at = min(committed_at + timedelta(hours=2 + offset), timezone.now())
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
                    report=demo_report(
                        model=model, suite=suite, position=position, rng=noise_rng, first=True
                    ),
                    raw_report=None,
                    detect=False,
                )
                demo_accuracy_store(model=model, run=run, position=position, rng=noise_rng, first=True)
        dcp_start = commits[model.dcp_start()].sha
        Suite.objects.filter(pk=suites[DCP_SUITE].pk).update(oldest_supported_commit=dcp_start)
        demo_pending_runs_create(commits=commits, suites=suites, runners=runners, rng=run_rng)
    return DemoOutcome(commits=COMMIT_COUNT, runs=runs, measurements=measurements, steps=tuple(steps))


def demo_pending_runs_create(
    *, commits: list[Commit], suites: dict[str, Suite], runners: dict[str, Runner], rng: random.Random
) -> None:
    """The runs a live node would show on top of the history: one that failed (the server did not start,
    its log says why), one benchmarking now and one waiting in the queue."""
    now = timezone.now()
    head = commits[-1]
    main, dcp = suites[MAIN_SUITE], suites[DCP_SUITE]
    node = runners[DEMO_HARDWARE]
    texts = demo_run_texts(commit=head, suite=dcp, rng=rng)
    texts["logs"]["server"] += (
        "ERROR torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.52 GiB. GPU 5 has a total "
        "capacity of 268.00 GiB of which 1.94 GiB is free.\n"
        "ERROR Engine core initialization failed. See root cause above.\n"
    )
    del texts["logs"]["guidellm"], texts["server_metrics"]
    Run.objects.create(
        commit=head,
        suite=dcp,
        runner=node,
        hardware_class=node.hardware_class,
        source=Run.Source.RUNNER,
        status=RunStatus.FAILED,
        failure_reason="vLLM server exited during start-up: CUDA out of memory on GPU 5 (code under test)",
        kind=RunKind.BACKFILL,
        forced=True,
        attempt=1,
        queued_at=now - timedelta(hours=3),
        dispatched_at=now - timedelta(hours=3),
        started_at=now - timedelta(hours=2, minutes=50),
        finished_at=now - timedelta(hours=2, minutes=20),
        stage_durations={RunStatus.INSTALLING: 251.0, RunStatus.STARTING_SERVER: 1548.0},
        environment={**DEMO_ENVIRONMENT, "vllm_version": demo_vllm_version(commit=head)},
        vllm_version=demo_vllm_version(commit=head),
        **texts,
    )
    Runner.objects.filter(pk=node.pk).update(last_heartbeat_at=now)  # it is benchmarking right now
    running = demo_run_texts(commit=head, suite=main, rng=rng)
    del running["server_metrics"]
    running["logs"]["guidellm"] = "Benchmark concurrent@1: 9 requests completed, 0 errored\n"
    Run.objects.create(
        commit=head,
        suite=main,
        runner=node,
        hardware_class=node.hardware_class,
        source=Run.Source.RUNNER,
        status=RunStatus.BENCHMARKING,
        kind=RunKind.BACKFILL,
        forced=True,
        attempt=1,
        queued_at=now - timedelta(minutes=40),
        dispatched_at=now - timedelta(minutes=40),
        started_at=now - timedelta(minutes=38),
        stage_started_at=now - timedelta(minutes=4),
        heartbeat_at=now,
        lease_expires_at=now + timedelta(days=365),
        stage_durations={RunStatus.INSTALLING: 262.0, RunStatus.STARTING_SERVER: 1812.0},
        environment={**DEMO_ENVIRONMENT, "vllm_version": demo_vllm_version(commit=head)},
        vllm_version=demo_vllm_version(commit=head),
        **running,
    )
    Run.objects.create(
        commit=commits[-2],
        suite=dcp,
        hardware_class=node.hardware_class,
        source=Run.Source.RUNNER,
        status=RunStatus.QUEUED,
        kind=RunKind.BACKFILL,
        forced=True,
        queued_at=now - timedelta(minutes=12),
    )


def demo_truth(*, seed: int = DEMO_SEED) -> list[dict[str, object]]:
    """The generator's steps with the shas its history gives their commits (no database needed)."""
    return [
        {
            "sha": demo_sha(position=step.position),
            "pr": step.pr,
            "suite": step.suite,
            "hardware": step.hardware,
            "concurrency": step.concurrency,
            "metric": step.metric,
            "change_pct": step.change_pct,
        }
        for step in model_steps(model=demo_model(seed=seed))
    ]


def demo_sha(*, position: int) -> str:
    """The sha the demo history gives the commit at `position` on main."""
    if position == 0:
        return _sha("v0.27.1", BASE_SHA_PREFIX)
    if position == COMMIT_COUNT - 1:
        return _sha("82a85dc1", HEAD_SHA_PREFIX)
    return _sha(f"demo-{position}")

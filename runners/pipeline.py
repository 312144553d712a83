"""One benchmark run on this node: install vLLM, serve it, benchmark it with guidellm, collect the evidence.

This is what the runner's Celery task calls. It knows nothing of the database: it reports its stages
and heartbeats through callbacks, returns a `BenchmarkOutcome`, or raises `RunFailed` with a one-line
reason. Whatever happens, nothing it started is left running: the stages share one teardown (server,
sampler, heartbeat) and one mapping of failures to a stage and a reason (runners/run_control.py).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runners import reproduce
from runners.accuracy import AccuracyResult
from runners.benchmark import guidellm_argv, levels_fit
from runners.envs import cache_dir_resolve
from runners.errors import RunFailed
from runners.fingerprint import environment_fingerprint
from runners.guidellm_report import GuidellmReport
from runners.install import (
    InstalledEnv,
    guidellm_env_ensure,
    lm_eval_env_ensure,
    vllm_env_ensure,
)
from runners.metrics import MetricsSnapshot, MetricsUnreadable
from runners.node_load import node_load_measure
from runners.profiling import ProfileOutcome, ProfilingFailed, profile_record, profiler_serve_options
from runners.run_control import REASON_CHARS, Heartbeat, Stages, failures_as_run_failed
from runners.run_steps import (
    SERVER_BASE_ENV,
    accuracy_measure,
    levels_run,
    metrics_scrape,
    reproduction_commands,
)
from runners.server import (
    free_port_pick,
    server_running,
    server_warm_up,
    vllm_serve_argv,
)
from runners.stages import (
    LOG_ACCURACY,
    LOG_GUIDELLM,
    LOG_INSTALL,
    LOG_SERVER,
    STAGE_BENCHMARKING,
    STAGE_INSTALLING,
    STAGE_PROFILING,
    STAGE_STARTING_SERVER,
    log_path,
)
from runners.suites import AccuracyKind, SuiteSpec
from runners.telemetry import TelemetrySample, TelemetrySampler
from runners.text import one_line
from runners.tiny_model import tiny_model_ensure, tiny_model_name

HEARTBEAT_INTERVAL_S = 30.0
TELEMETRY_INTERVAL_S = 2.0


@dataclass(frozen=True)
class BenchmarkOutcome:
    """Everything a successful run produced; paths point into the run's work_dir."""

    raw_report: bytes
    report: GuidellmReport
    fingerprint: Mapping[str, Any]
    telemetry: tuple[TelemetrySample, ...]
    metrics_before: Mapping[str, float]
    metrics_after: Mapping[str, float]
    vllm_version: str
    stage_durations_s: Mapping[str, float]
    log_paths: Mapping[str, Path]
    commands: Mapping[str, tuple[str, ...]]
    warnings: tuple[str, ...] = ()
    accuracy: AccuracyResult | None = None
    profile: ProfileOutcome | None = None

    @property
    def metrics_delta(self) -> dict[str, float]:
        """What the server's counters grew by during the benchmark."""
        return MetricsSnapshot(values=self.metrics_after).counters_since(
            before=MetricsSnapshot(values=self.metrics_before)
        )


def _model_prepare(
    *, suite: SuiteSpec, client: InstalledEnv, cache_dir: Path, log_path: Path
) -> tuple[str, tuple[str, ...], str]:
    """(model to serve, extra serve args, tokenizer for guidellm)."""
    if suite.serve.local_model is None:
        return suite.serve.model, (), suite.benchmark.tokenizer or suite.serve.model
    directory = cache_dir / "models" / tiny_model_name()
    tiny_model_ensure(python=client.executable(name="python"), directory=directory, log_path=log_path)
    return (
        str(directory),
        ("--served-model-name", suite.serve.model),
        suite.benchmark.tokenizer or str(directory),
    )


def benchmark_execute(
    *,
    suite: SuiteSpec,
    commit_sha: str,
    runner_name: str,
    work_dir: Path,
    on_stage: Callable[[str], None],
    heartbeat: Callable[[], None],
    version: str | None = None,
    wheel_commit_sha: str | None = None,
    heartbeat_interval_s: float = HEARTBEAT_INTERVAL_S,
    cache_dir: Path | None = None,
    profile: bool = False,
) -> BenchmarkOutcome:
    """Install vLLM at `commit_sha` (or the release `version`), serve it, benchmark it with the suite.

    Stages "installing", "starting_server", "benchmarking" are announced through `on_stage`; `heartbeat`
    is called every `heartbeat_interval_s` from another thread while the run works (if it raises, the
    run is stopped and that exception is raised once everything is torn down). Logs and the report are
    written under `work_dir`. Raises RunFailed(stage, reason, log_tail) on any failure.

    `profile` (a profile run) starts the server with the torch profiler and, after the measured levels,
    runs the suite's profiling stage ("profiling"); a profile that fails is a warning, not a failed run.
    """
    work_dir.mkdir(parents=True, exist_ok=True)
    cache = cache_dir or cache_dir_resolve()
    log_paths = {
        "install": log_path(work_dir=work_dir, name=LOG_INSTALL),
        "server": log_path(work_dir=work_dir, name=LOG_SERVER),
        "benchmark": log_path(work_dir=work_dir, name=LOG_GUIDELLM),
        "accuracy": log_path(work_dir=work_dir, name=LOG_ACCURACY),
    }
    report_path = work_dir / "guidellm-report.json"
    cancel = threading.Event()
    stages = Stages(on_stage=on_stage, cancel=cancel)
    warnings: list[str] = []
    commands: dict[str, tuple[str, ...]] = {}

    with Heartbeat(heartbeat=heartbeat, interval_s=heartbeat_interval_s, cancel=cancel) as beat:
        try:
            with failures_as_run_failed(stages):
                stages.enter(STAGE_INSTALLING)
                server_env = vllm_env_ensure(
                    install=suite.install,
                    commit_sha=commit_sha,
                    cache_dir=cache,
                    log_path=log_paths["install"],
                    timeout_s=suite.timeouts.install_s,
                    version=version,
                    wheel_commit_sha=wheel_commit_sha,
                    cancel=cancel,
                )
                if server_env.note:
                    warnings.append(server_env.note)
                client_env = guidellm_env_ensure(
                    cache_dir=cache,
                    log_path=log_paths["install"],
                    timeout_s=suite.timeouts.install_s,
                    cancel=cancel,
                )
                lm_eval_env = None
                accuracy_spec = suite.benchmark.accuracy
                if accuracy_spec is not None and accuracy_spec.kind is AccuracyKind.LM_EVAL:
                    lm_eval_env = lm_eval_env_ensure(
                        cache_dir=cache,
                        log_path=log_paths["install"],
                        timeout_s=suite.timeouts.install_s,
                        cancel=cancel,
                    )
                    commands["install_lm_eval"] = lm_eval_env.commands
                commands["install_vllm"] = reproduce.recipe_lines(recipe=server_env.recipe, name="vllm")
                commands["install_guidellm"] = reproduce.recipe_lines(
                    recipe=client_env.recipe, name="guidellm"
                )
                model, model_args, tokenizer = _model_prepare(
                    suite=suite, client=client_env, cache_dir=cache, log_path=log_paths["install"]
                )

                stages.enter(STAGE_STARTING_SERVER)
                port = free_port_pick()
                profiling = suite.benchmark.profiling if profile else None
                if profile and profiling is None:
                    warnings.append(
                        f"a profile run of {suite.name}, which declares no profiling: not profiled"
                    )
                trace_dir = work_dir / "profile-traces"
                profiler_args, profiler_env = (
                    profiler_serve_options(profiling=profiling, trace_dir=trace_dir)
                    if profiling
                    else ((), {})
                )
                serve_argv = vllm_serve_argv(
                    vllm=server_env.executable(name="vllm"),
                    model=model,
                    args=(*suite.serve.args, *model_args, *profiler_args),
                    port=port,
                )
                serve_env = {**SERVER_BASE_ENV, **suite.serve.env, **profiler_env}
                labels = {
                    "vllm_commit": commit_sha,
                    "suite": suite.name,
                    "runner": runner_name,
                    "hardware_class": suite.hardware_class,
                }
                commands.update(
                    reproduction_commands(
                        suite=suite, benchmark=suite.benchmark, serve_env=serve_env, labels=labels
                    )
                )
                with server_running(
                    argv=serve_argv,
                    env={**os.environ, **serve_env},
                    port=port,
                    log_path=log_paths["server"],
                    start_timeout_s=suite.timeouts.server_start_s,
                    cancel=cancel,
                ) as server:
                    warm_up = server_warm_up(
                        base_url=server.base_url,
                        model=suite.serve.model,
                        request_format=suite.benchmark.request_format,
                        prompt_tokens=suite.benchmark.data.prompt_tokens,
                        output_tokens=suite.benchmark.data.output_tokens,
                        timeout_s=suite.timeouts.server_start_s,
                        cancel=cancel,
                    )
                    benchmark, lengthened = levels_fit(benchmark=suite.benchmark, request_s=warm_up.request_s)
                    if lengthened:
                        warnings.append(lengthened)
                    fingerprint = environment_fingerprint(
                        vllm_python=server_env.executable(name="python"),
                        guidellm_python=client_env.executable(name="python"),
                        vllm_server_version=server.version,
                    )
                    fingerprint = {
                        **fingerprint,
                        "runner": runner_name,
                        "hardware_class": suite.hardware_class,
                        "vllm_commit": commit_sha,
                        "server_startup_s": round(server.startup_s, 3),
                        "server_warm_up_s": round(warm_up.first_s, 3),
                        "server_warm_up_attempts": warm_up.attempts,
                        "warm_request_s": round(warm_up.request_s, 3),
                        "warm_up_prompt_tokens": warm_up.prompt_tokens_measured,
                    }
                    stages.enter(STAGE_BENCHMARKING)
                    labels = {**labels, "vllm_version": server.version}
                    commands.update(
                        reproduction_commands(
                            suite=suite,
                            benchmark=benchmark,
                            serve_env=serve_env,
                            labels=labels,
                            warm_up_text=warm_up.text,
                        )
                    )
                    bench_argv = guidellm_argv(
                        guidellm=client_env.executable(name="guidellm"),
                        benchmark=benchmark,
                        target=server.base_url,
                        model=suite.serve.model,
                        tokenizer=tokenizer,
                        labels=labels,
                        output_path=report_path,
                        objectives=suite.benchmark.objectives,
                    )
                    with TelemetrySampler(interval_s=TELEMETRY_INTERVAL_S) as telemetry:
                        result, metrics_before, load_before = levels_run(
                            server=server,
                            argv=bench_argv,
                            report_path=report_path,
                            log_path=log_paths["benchmark"],
                            timeout_s=suite.timeouts.benchmark_s
                            + (benchmark.max_seconds - suite.benchmark.max_seconds)
                            * (len(benchmark.concurrencies) or benchmark.sweep_size),
                            expected_concurrencies=benchmark.concurrencies,
                            max_error_rate=suite.max_error_rate,
                            warnings=warnings,
                            cancel=cancel,
                        )
                    metrics_after = metrics_scrape(scrape=server.metrics, when="after", warnings=warnings)
                    # The server still runs: whoever else is on its GPUs now shared them with the benchmark.
                    node_load = node_load_measure(load_before=load_before, own_group=server.process.pid)
                    fingerprint = {**fingerprint, **node_load.fingerprint()}
                    warnings.extend(node_load.warnings())
                    accuracy = None
                    if suite.benchmark.accuracy is not None:
                        # Same server, after the benchmark: its counters above are the benchmark's alone.
                        accuracy = accuracy_measure(
                            accuracy=suite.benchmark.accuracy,
                            base_url=server.base_url,
                            model=suite.serve.model,
                            tokenizer=tokenizer,
                            lm_eval=lm_eval_env,
                            work_dir=work_dir,
                            log_path=log_paths["accuracy"],
                            seed=suite.benchmark.seed,
                            commands=commands,
                            cancel=cancel,
                        )
                    profile_outcome = None
                    if profiling is not None:
                        stages.enter(STAGE_PROFILING)
                        try:
                            profile_outcome = profile_record(
                                base_url=server.base_url,
                                model=suite.serve.model,
                                request_format=suite.benchmark.request_format,
                                data=suite.benchmark.data,
                                profiling=profiling,
                                trace_dir=trace_dir,
                                metrics=server.metrics,
                                cancel=cancel,
                            )
                        except (ProfilingFailed, MetricsUnreadable, OSError) as exc:
                            warnings.append(one_line(f"profiling: {exc}", limit=REASON_CHARS))
                stages.close()
        except RunFailed as failure:
            if beat.error is not None:
                raise beat.error from None
            failure.commands = dict(commands)
            failure.raw_report = report_path.read_bytes() if report_path.is_file() else None
            raise
    if beat.error is not None:
        raise beat.error
    return BenchmarkOutcome(
        raw_report=result.raw_report,
        report=result.report,
        fingerprint=fingerprint,
        telemetry=telemetry.samples,
        metrics_before=metrics_before,
        metrics_after=metrics_after,
        vllm_version=server.version,
        stage_durations_s=dict(stages.durations_s),
        log_paths=log_paths,
        commands=commands,
        warnings=tuple(warnings),
        accuracy=accuracy,
        profile=profile_outcome,
    )

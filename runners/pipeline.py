"""One benchmark run on this node: install vLLM, serve it, benchmark it with guidellm, collect the evidence.

This is what the runner's Celery task calls. It knows nothing of the database: it reports its stages
and heartbeats through callbacks, returns a `BenchmarkOutcome`, or raises `RunFailed` with a one-line
reason. Whatever happens, nothing it started is left running.

Over 400 lines on purpose: the stages share one teardown (server, sampler, heartbeat) and one mapping of
failures to a stage and a reason, and splitting them would scatter that one guarantee across modules.
"""

from __future__ import annotations

import os
import shlex
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runners import reproduce
from runners.accuracy import (
    ACCURACY_DIR,
    AccuracyFailed,
    AccuracyResult,
    lm_eval_argv,
    lm_eval_results_read,
    qa_accuracy_run,
    qa_items_load,
)
from runners.benchmark import benchmark_run, guidellm_argv, levels_fit
from runners.envs import cache_dir_resolve
from runners.errors import (
    BenchFailed,
    Cancelled,
    CommandFailed,
    InstallRefused,
    RunFailed,
    RunnerError,
    ServerFailed,
)
from runners.fingerprint import environment_fingerprint
from runners.guidellm_report import GuidellmReport
from runners.install import (
    InstalledEnv,
    WheelIndexUnreachable,
    guidellm_env_ensure,
    lm_eval_env_ensure,
    vllm_env_ensure,
)
from runners.metrics import MetricsSnapshot, MetricsUnreadable
from runners.process import command_run, log_tail
from runners.server import (
    error_line,
    failure_line,
    free_port_pick,
    server_running,
    server_warm_up,
    vllm_serve_argv,
    warm_up_body,
)
from runners.stages import (
    LOG_ACCURACY,
    LOG_GUIDELLM,
    LOG_INSTALL,
    LOG_SERVER,
    STAGE_BENCHMARKING,
    STAGE_INSTALLING,
    STAGE_STARTING_SERVER,
    log_path,
)
from runners.suites import AccuracyKind, AccuracySpec, BenchmarkSpec, SuiteSpec
from runners.telemetry import TelemetrySample, TelemetrySampler
from runners.text import one_line
from runners.tiny_model import tiny_model_ensure, tiny_model_name

HEARTBEAT_INTERVAL_S = 30.0
TELEMETRY_INTERVAL_S = 2.0
# Never phone home from a benchmark node, whatever the suite says.
SERVER_BASE_ENV = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
# The tokenizer is local and the server is on this node: no hub, no proxy.
CLIENT_BASE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
}


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

    @property
    def metrics_delta(self) -> dict[str, float]:
        """What the server's counters grew by during the benchmark."""
        return MetricsSnapshot(values=self.metrics_after).counters_since(
            before=MetricsSnapshot(values=self.metrics_before)
        )


class _Heartbeat:
    """Calls `heartbeat` every interval in a daemon thread; if it raises, the run is cancelled and the
    exception is raised again by the run once everything is torn down."""

    def __init__(self, *, heartbeat: Callable[[], None], interval_s: float, cancel: threading.Event):
        self._heartbeat = heartbeat
        self._interval_s = interval_s
        self._cancel = cancel
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name="run-heartbeat", daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self._heartbeat()
            except BaseException as exc:  # handed to the run's thread, never lost
                self.error = exc
                self._cancel.set()
                return

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


class _Stages:
    """Tracks the current stage, its start, and each finished stage's duration; a cancelled run goes
    no further than the stage it is in."""

    def __init__(self, *, on_stage: Callable[[str], None], cancel: threading.Event):
        self._on_stage = on_stage
        self._cancel = cancel
        self.current = ""
        self._started = 0.0
        self.durations_s: dict[str, float] = {}

    def enter(self, stage: str) -> None:
        if self._cancel.is_set():
            raise Cancelled(f"the run was cancelled before {stage}")
        self.close()
        self.current = stage
        self._started = time.monotonic()
        self._on_stage(stage)

    def close(self) -> None:
        if self.current and self.current not in self.durations_s:
            self.durations_s[self.current] = round(time.monotonic() - self._started, 3)


def _shell_line(*, argv: tuple[str, ...], env: Mapping[str, str]) -> str:
    assignments = [f"{key}={shlex.quote(value)}" for key, value in sorted(env.items())]
    return " ".join([*assignments, *(shlex.quote(part) for part in argv)])


REASON_CHARS = 300


@contextmanager
def _failures_as_run_failed(stages: _Stages) -> Iterator[None]:
    """Turn the domain exceptions of the steps into RunFailed at the stage where they happened."""
    try:
        yield
    except RunFailed:
        raise
    except CommandFailed as exc:
        what = "timed out" if exc.timed_out else f"exited with status {exc.returncode}"
        reason = f"{Path(exc.argv[0]).name} {what}: {failure_line(tail=exc.log_tail)}"
        raise RunFailed(
            stage=stages.current,
            reason=one_line(reason, limit=REASON_CHARS),
            log_tail=exc.log_tail,
            retryable=exc.timed_out,
        ) from exc
    except ServerFailed as exc:
        raise RunFailed(
            stage=stages.current, reason=one_line(exc.reason, limit=REASON_CHARS), log_tail=exc.log_tail
        ) from exc
    except BenchFailed as exc:
        raise RunFailed(
            stage=stages.current,
            reason=one_line(f"the bench failed: {exc.reason}", limit=REASON_CHARS),
            log_tail=exc.log_tail,
            retryable=True,
        ) from exc
    except (InstallRefused, WheelIndexUnreachable, Cancelled, AccuracyFailed, RunnerError) as exc:
        raise RunFailed(stage=stages.current, reason=one_line(exc, limit=REASON_CHARS)) from exc
    except OSError as exc:
        raise RunFailed(
            stage=stages.current, reason=one_line(f"{type(exc).__name__}: {exc}", limit=REASON_CHARS)
        ) from exc


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


def _model_reproduction(*, suite: SuiteSpec) -> tuple[str, tuple[str, ...], str, tuple[str, ...]]:
    """As _model_prepare, for the commands that reproduce the run in ${REPRO_DIR}."""
    if suite.serve.local_model is None:
        return suite.serve.model, (), suite.benchmark.tokenizer or suite.serve.model, ()
    directory = str(reproduce.REPRO_DIR / "model")
    python = reproduce.REPRO_DIR / "guidellm" / "bin" / "python"
    command = "PYTHONPATH=. " + reproduce.shell_line(
        argv=(str(python), "-m", "runners.tiny_model", directory)
    )
    tokenizer = suite.benchmark.tokenizer or directory
    return directory, ("--served-model-name", suite.serve.model), tokenizer, (command,)


def _reproduction_commands(
    *, suite: SuiteSpec, benchmark: BenchmarkSpec, serve_env: Mapping[str, str], labels: Mapping[str, str]
) -> dict[str, tuple[str, ...]]:
    """serve, warm-up and benchmark as a person runs them: fresh directory, free port, absolute paths."""
    model, model_args, tokenizer, model_commands = _model_reproduction(suite=suite)
    serve_argv = vllm_serve_argv(
        vllm=reproduce.REPRO_DIR / "vllm" / "bin" / "vllm",
        model=model,
        args=(*suite.serve.args, *model_args),
        port=reproduce.PORT,
    )
    bench_argv = guidellm_argv(
        guidellm=reproduce.REPRO_DIR / "guidellm" / "bin" / "guidellm",
        benchmark=benchmark,
        target=reproduce.SERVER_URL,
        model=suite.serve.model,
        tokenizer=tokenizer,
        labels=labels,
        output_path=reproduce.REPRO_DIR / reproduce.REPORT_NAME,
        objectives=suite.benchmark.objectives,
    )
    body = warm_up_body(
        model=suite.serve.model,
        request_format=benchmark.request_format,
        prompt_tokens=benchmark.data.prompt_tokens,
        output_tokens=benchmark.data.output_tokens,
    )
    return {
        "model": model_commands,
        "serve": (reproduce.shell_line(argv=reproduce.port_argv(serve_argv), env=serve_env),),
        "warm_up": reproduce.warm_up_lines(
            request_format=benchmark.request_format, body=body, timeout_s=suite.timeouts.server_start_s
        ),
        "benchmark": (reproduce.shell_line(argv=bench_argv, env=CLIENT_BASE_ENV),),
    }


def _metrics_scrape(
    *, scrape: Callable[[], MetricsSnapshot], when: str, warnings: list[str]
) -> dict[str, float]:
    # The numbers of the run are guidellm's; a /metrics page that fails to load is noted, not fatal.
    try:
        return dict(scrape().values)
    except (MetricsUnreadable, OSError) as exc:
        warnings.append(f"/metrics {when} the benchmark could not be read: {exc}")
        return {}


def _accuracy_measure(
    *,
    accuracy: AccuracySpec,
    base_url: str,
    model: str,
    tokenizer: str,
    lm_eval: InstalledEnv | None,
    work_dir: Path,
    log_path: Path,
    seed: int,
    commands: dict[str, tuple[str, ...]],
    cancel: threading.Event,
) -> AccuracyResult:
    """The suite's accuracy task against the server that was just benchmarked."""
    if accuracy.kind is AccuracyKind.QA_JSONL:
        assert accuracy.path is not None  # the suite's validation requires it
        path = ACCURACY_DIR / accuracy.path
        items = qa_items_load(path=path)
        if accuracy.limit is not None:
            items = items[: accuracy.limit]
        commands["accuracy"] = (
            f"exact match of {len(items)} answers from {path.relative_to(ACCURACY_DIR.parent.parent)} "
            f"({accuracy.max_tokens} tokens, greedy) on {base_url}/v1/completions",
        )
        return qa_accuracy_run(
            name=accuracy.name,
            items=items,
            base_url=base_url,
            model=model,
            max_tokens=accuracy.max_tokens,
            num_concurrent=accuracy.num_concurrent,
            timeout_s=accuracy.timeout_s,
            cancel=cancel,
        )
    assert lm_eval is not None and accuracy.task is not None
    output_dir = work_dir / "lm-eval"
    argv = lm_eval_argv(
        lm_eval=lm_eval.executable(name="lm_eval"),
        task=accuracy.task,
        base_url=base_url,
        model=model,
        tokenizer=tokenizer,
        output_path=output_dir,
        num_concurrent=accuracy.num_concurrent,
        limit=accuracy.limit,
        seed=seed,
        max_gen_toks=accuracy.max_tokens,
    )
    commands["accuracy"] = (_shell_line(argv=argv, env={}),)
    command_run(
        argv=argv,
        log_path=log_path,
        timeout_s=accuracy.timeout_s,
        env={**os.environ, **CLIENT_BASE_ENV},
        cancel=cancel,
    )
    return lm_eval_results_read(output_dir=output_dir, name=accuracy.name, task=accuracy.task)


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
) -> BenchmarkOutcome:
    """Install vLLM at `commit_sha` (or the release `version`), serve it, benchmark it with the suite.

    Stages "installing", "starting_server", "benchmarking" are announced through `on_stage`; `heartbeat`
    is called every `heartbeat_interval_s` from another thread while the run works (if it raises, the
    run is stopped and that exception is raised once everything is torn down). Logs and the report are
    written under `work_dir`. Raises RunFailed(stage, reason, log_tail) on any failure.
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
    stages = _Stages(on_stage=on_stage, cancel=cancel)
    warnings: list[str] = []
    commands: dict[str, tuple[str, ...]] = {}

    with _Heartbeat(heartbeat=heartbeat, interval_s=heartbeat_interval_s, cancel=cancel) as beat:
        try:
            with _failures_as_run_failed(stages):
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
                serve_argv = vllm_serve_argv(
                    vllm=server_env.executable(name="vllm"),
                    model=model,
                    args=(*suite.serve.args, *model_args),
                    port=port,
                )
                serve_env = {**SERVER_BASE_ENV, **suite.serve.env}
                labels = {
                    "vllm_commit": commit_sha,
                    "suite": suite.name,
                    "runner": runner_name,
                    "hardware_class": suite.hardware_class,
                }
                commands.update(
                    _reproduction_commands(
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
                    }
                    metrics_before = _metrics_scrape(scrape=server.metrics, when="before", warnings=warnings)

                    stages.enter(STAGE_BENCHMARKING)
                    labels = {**labels, "vllm_version": server.version}
                    commands.update(
                        _reproduction_commands(
                            suite=suite, benchmark=benchmark, serve_env=serve_env, labels=labels
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
                        try:
                            result = benchmark_run(
                                argv=bench_argv,
                                env={**os.environ, **CLIENT_BASE_ENV},
                                report_path=report_path,
                                log_path=log_paths["benchmark"],
                                timeout_s=suite.timeouts.benchmark_s
                                + (benchmark.max_seconds - suite.benchmark.max_seconds)
                                * (len(benchmark.concurrencies) or benchmark.sweep_size),
                                expected_concurrencies=benchmark.concurrencies,
                                max_error_rate=suite.max_error_rate,
                                cancel=cancel,
                            )
                        except RunFailed as exc:
                            status = server.exit_status()
                            said = error_line(tail=log_tail(path=server.log_path))
                            if status is None and exc.server_errors and said:
                                # guidellm names the client's error; the server's log says what went wrong.
                                raise RunFailed(
                                    stage=STAGE_BENCHMARKING,
                                    reason=one_line(f"{exc.reason}; server log: {said}", limit=REASON_CHARS),
                                    log_tail=exc.log_tail,
                                    server_errors=True,
                                ) from exc
                            if status is None:
                                raise
                            # The client only saw refused connections; the server's log says why.
                            tail = failure_line(tail=log_tail(path=server.log_path))
                            raise RunFailed(
                                stage=STAGE_BENCHMARKING,
                                reason=one_line(
                                    f"vllm serve died during the benchmark (status {status}): {tail}",
                                    limit=REASON_CHARS,
                                ),
                                log_tail=log_tail(path=server.log_path),
                            ) from exc
                    metrics_after = _metrics_scrape(scrape=server.metrics, when="after", warnings=warnings)
                    accuracy = None
                    if suite.benchmark.accuracy is not None:
                        # Same server, after the benchmark: its counters above are the benchmark's alone.
                        accuracy = _accuracy_measure(
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
    )

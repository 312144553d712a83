"""The steps of a run that need no teardown of their own: the commands that reproduce it by hand, the
levels of guidellm against the running server, and the suite's accuracy task against the server that was
just benchmarked."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from runners import reproduce
from runners.accuracy import (
    ACCURACY_DIR,
    AccuracyResult,
    lm_eval_argv,
    lm_eval_results_read,
    qa_accuracy_run,
    qa_items_load,
)
from runners.benchmark import BenchmarkResult, benchmark_run, guidellm_argv
from runners.errors import RunFailed
from runners.install import InstalledEnv
from runners.metrics import MetricsSnapshot, MetricsUnreadable
from runners.node_load import load_1m
from runners.process import command_run, log_tail
from runners.run_control import KILLED_RETRIES, REASON_CHARS, shell_line
from runners.server import (
    RunningServer,
    death_line,
    error_line,
    killed_by_signal,
    vllm_serve_argv,
    warm_up_body,
)
from runners.stages import STAGE_BENCHMARKING
from runners.suites import AccuracyKind, AccuracySpec, BenchmarkSpec, SuiteSpec
from runners.text import one_line

# Never phone home from a benchmark node, whatever the suite says.
SERVER_BASE_ENV = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
# The tokenizer is local and the server is on this node: no hub, no proxy.
CLIENT_BASE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
}


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


def reproduction_commands(
    *,
    suite: SuiteSpec,
    benchmark: BenchmarkSpec,
    serve_env: Mapping[str, str],
    labels: Mapping[str, str],
    warm_up_text: str | None = None,
) -> dict[str, tuple[str, ...]]:
    """serve, warm-up and benchmark as a person runs them: fresh directory, free port, absolute paths;
    the warm-up sends the prompt the runner sent (`warm_up_text`, sized with the served tokenizer)."""
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
        text=warm_up_text,
    )
    return {
        "model": model_commands,
        "serve": (reproduce.shell_line(argv=reproduce.port_argv(serve_argv), env=serve_env),),
        "warm_up": reproduce.warm_up_lines(
            request_format=benchmark.request_format, body=body, timeout_s=suite.timeouts.server_start_s
        ),
        "benchmark": (reproduce.shell_line(argv=bench_argv, env=CLIENT_BASE_ENV),),
    }


def accuracy_measure(
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
    commands["accuracy"] = (shell_line(argv=argv, env={}),)
    command_run(
        argv=argv,
        log_path=log_path,
        timeout_s=accuracy.timeout_s,
        env={**os.environ, **CLIENT_BASE_ENV},
        cancel=cancel,
    )
    return lm_eval_results_read(output_dir=output_dir, name=accuracy.name, task=accuracy.task)


def metrics_scrape(
    *, scrape: Callable[[], MetricsSnapshot], when: str, warnings: list[str]
) -> dict[str, float]:
    # The numbers of the run are guidellm's; a /metrics page that fails to load is noted, not fatal.
    try:
        return dict(scrape().values)
    except (MetricsUnreadable, OSError) as exc:
        warnings.append(f"/metrics {when} the benchmark could not be read: {exc}")
        return {}


# guidellm is known to stall now and then after a level's end with nothing left in the server
# (vllm-project/guidellm#431, #1152): one more attempt in the same server before the run fails.
CLIENT_STALL_ATTEMPTS = 2


def _requests_in_flight(*, server: RunningServer) -> int | None:
    """Requests the server holds (running or waiting) now; None when its /metrics cannot say."""
    try:
        values = server.metrics().values
    except (MetricsUnreadable, OSError):
        return None
    if "requests_running" not in values:
        return None
    return round(values["requests_running"] + values.get("requests_waiting", 0.0))


def levels_run(
    *,
    server: RunningServer,
    argv: tuple[str, ...],
    report_path: Path,
    log_path: Path,
    timeout_s: float,
    expected_concurrencies: tuple[int, ...],
    max_error_rate: float,
    warnings: list[str],
    cancel: threading.Event,
) -> tuple[BenchmarkResult, dict[str, float], float]:
    """guidellm's levels against the running server: its result, the server's counters and the node's
    load just before the attempt that succeeded. A client that times out while the server holds no
    request stalled on its own and is run once more; one that waited on the server's requests, or stalled
    twice, fails the run with what the server held (retryable: the next attempt starts afresh)."""
    attempt = 1
    while True:
        metrics_before = metrics_scrape(scrape=server.metrics, when="before", warnings=warnings)
        load_before = load_1m()
        try:
            result = benchmark_run(
                argv=argv,
                env={**os.environ, **CLIENT_BASE_ENV},
                report_path=report_path,
                log_path=log_path,
                timeout_s=timeout_s,
                expected_concurrencies=expected_concurrencies,
                max_error_rate=max_error_rate,
                cancel=cancel,
            )
            return result, metrics_before, load_before
        except RunFailed as exc:
            failure = _levels_failure(exc=exc, server=server, attempt=attempt)
            if failure is exc:
                raise
            if failure is not None:
                raise failure from exc
            warnings.append(
                one_line(
                    f"guidellm stalled with no request left in the server ({exc.reason}); its levels were "
                    "run again in the same server",
                    limit=REASON_CHARS,
                )
            )
            attempt += 1


def _levels_failure(*, exc: RunFailed, server: RunningServer, attempt: int) -> RunFailed | None:
    """What guidellm's failure on its `attempt` means for the run, from the server's side: None when the
    client stalled on its own and may run once more, else the failure to raise (`exc` itself when the
    server has nothing to add)."""
    status = server.exit_status()
    if status is None and exc.timed_out:
        in_flight = _requests_in_flight(server=server)
        if in_flight == 0 and attempt < CLIENT_STALL_ATTEMPTS:
            return None
        if in_flight is None:
            held = "the server's /metrics could not say what it still held"
        elif in_flight:
            held = f"the server still held {in_flight} request(s): it stopped answering, not the client"
        else:
            held = f"the server held no request: guidellm stalled, {attempt} times in this server"
        return RunFailed(
            stage=STAGE_BENCHMARKING,
            reason=one_line(f"{exc.reason}; {held}", limit=REASON_CHARS),
            log_tail=exc.log_tail,
            retryable=True,
            timed_out=True,
        )
    if status is None:
        said = error_line(tail=log_tail(path=server.log_path))
        if exc.server_errors and said:
            # guidellm names the client's error; the server's log says what went wrong.
            return RunFailed(
                stage=STAGE_BENCHMARKING,
                reason=one_line(f"{exc.reason}; server log: {said}", limit=REASON_CHARS),
                log_tail=exc.log_tail,
                server_errors=True,
            )
        return exc
    # The client only saw refused connections; the server's end says why.
    tail = log_tail(path=server.log_path)
    died = death_line(status=status, tail=tail, within_s=server.age_s() + 5, when="during the benchmark")
    return RunFailed(
        stage=STAGE_BENCHMARKING,
        reason=one_line(died, limit=REASON_CHARS),
        log_tail=tail,
        retryable=killed_by_signal(status),
        retries_max=KILLED_RETRIES if killed_by_signal(status) else None,
    )

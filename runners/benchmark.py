"""The guidellm client: build its `guidellm run` command from a suite, run it as a group, parse its report.

guidellm's exit status is not health (all requests failing with HTTP 500 still exits 0 and writes a
report), so the report is always parsed and validated; a non-zero exit or a missing report is a failure
with the log's tail.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from runners.errors import CommandFailed, RunFailed
from runners.guidellm_report import BLAME_BENCH, BLAME_SERVER, GuidellmReport, ReportInvalid, report_parse
from runners.process import command_run, log_tail
from runners.server import failure_line
from runners.suites import BenchmarkSpec, LoadProfile, ObjectiveSpec

# Our objective metric prefix -> guidellm's per-request objective (its `tpot` is the inter-token latency)
# and the factor from our unit to its milliseconds.
_GUIDELLM_OBJECTIVES: dict[str, tuple[str, float]] = {
    "ttft_ms": ("ttft_ms", 1.0),
    "itl_ms": ("tpot_ms", 1.0),
    "latency_s": ("e2el_ms", 1000.0),
}


@dataclass(frozen=True)
class BenchmarkResult:
    raw_report: bytes
    report: GuidellmReport
    report_path: Path
    log_path: Path


def _profile_args(benchmark: BenchmarkSpec) -> tuple[str, ...]:
    windows = ""
    if benchmark.warmup_s:
        windows += f",warmup={benchmark.warmup_s:g}"
    if benchmark.cooldown_s:
        windows += f",cooldown={benchmark.cooldown_s:g}"
    if benchmark.profile is LoadProfile.SWEEP:
        profile = f"kind=sweep,sweep_size={benchmark.sweep_size}"
        if benchmark.max_concurrency is not None:
            profile += f",max_concurrency={benchmark.max_concurrency}"
        return ("--profile", profile + windows)
    streams = ",".join(str(level) for level in benchmark.concurrencies)
    return ("--profile", "kind=concurrent" + windows, "--override", "profile.streams", streams)


def guidellm_slo(*, objectives: Sequence[ObjectiveSpec]) -> dict[str, float]:
    """guidellm's per-request objectives for a suite's: the tightest limit per kind; objectives on
    guidellm's time per output token (which it does not judge per request) are left to PerfWatch."""
    slo: dict[str, float] = {}
    for objective in objectives:
        prefix = objective.metric.rsplit("_", 1)[0]
        if prefix in _GUIDELLM_OBJECTIVES:
            name, factor = _GUIDELLM_OBJECTIVES[prefix]
            slo[name] = min(slo.get(name, float("inf")), objective.max * factor)
    return slo


def _data_arg(benchmark: BenchmarkSpec) -> str:
    data = benchmark.data
    text = f"kind=synthetic_text,prompt_tokens={data.prompt_tokens},output_tokens={data.output_tokens}"
    if data.prefix_tokens:
        text += f",prefix_tokens={data.prefix_tokens},prefix_count={data.prefix_count}"
    return text


def guidellm_argv(
    *,
    guidellm: Path,
    benchmark: BenchmarkSpec,
    target: str,
    model: str,
    tokenizer: str,
    labels: Mapping[str, str],
    output_path: Path,
    objectives: Sequence[ObjectiveSpec] = (),
) -> tuple[str, ...]:
    """`guidellm run` (0.8.x syntax: every option a `kind=...,key=value` string) for one suite.

    Each level is capped by max_duration: synthetic data never runs out on its own; its first warmup_s
    and last cooldown_s seconds are left out of the statistics by guidellm itself. With objectives,
    guidellm also reports each level's SLO attainment and request goodput.
    """
    label_args: list[str] = []
    for key, value in labels.items():
        label_args += ["--label", f"{key}={value}"]
    slo = guidellm_slo(objectives=objectives)
    # sample_size=0: every request keeps its timings and token counts (and an errored one its error), but
    # no request keeps its prompt or output text, which made most of a long-prompt report's bytes.
    metrics_options = ["kind=generative", "sample_size=0"]
    metrics_options += [f"slo.{name}={limit:g}" for name, limit in sorted(slo.items())]
    return (
        str(guidellm),
        "run",
        "--backend",
        f"kind=openai_http,target={target},model={model},request_format={benchmark.request_format}",
        *_profile_args(benchmark),
        "--constraint",
        f"kind=max_duration,seconds={benchmark.max_seconds:g}",
        "--data",
        _data_arg(benchmark),
        # A local tokenizer: without one guidellm asks the model hub, and fails a minute later.
        "--tokenizer",
        f"kind=huggingface_auto,model={tokenizer}",
        "--seed",
        f"kind=static,value={benchmark.seed}",
        "--metrics",
        ",".join(metrics_options),
        *label_args,
        "--output",
        f"kind=json,path={output_path}",
        "--disable-console-interactive",
    )


MIN_REQUESTS_PER_LEVEL = 3


def levels_fit(*, benchmark: BenchmarkSpec, request_s: float) -> tuple[BenchmarkSpec, str]:
    """The suite's client settings with levels long enough to complete MIN_REQUESTS_PER_LEVEL requests
    of `request_s` seconds (one warm request of the suite's shape on this node), and the warning that
    says so when a level had to be lengthened ('' when it did not)."""
    measured_s = benchmark.max_seconds - benchmark.warmup_s - benchmark.cooldown_s
    needed_s = MIN_REQUESTS_PER_LEVEL * request_s
    if measured_s >= needed_s:
        return benchmark, ""
    seconds = float(math.ceil(needed_s + benchmark.warmup_s + benchmark.cooldown_s))
    warning = (
        f"levels lengthened from {benchmark.max_seconds:g} s to {seconds:g} s: one request of "
        f"{benchmark.data.prompt_tokens}/{benchmark.data.output_tokens} tokens takes {request_s:.1f} s "
        f"on this node, too long for {MIN_REQUESTS_PER_LEVEL} to complete in a level"
    )
    return benchmark.model_copy(update={"max_seconds": seconds}), warning


def benchmark_run(
    *,
    argv: Sequence[str],
    env: Mapping[str, str],
    report_path: Path,
    log_path: Path,
    timeout_s: float,
    expected_concurrencies: Sequence[int],
    max_error_rate: float,
    cancel: threading.Event | None = None,
) -> BenchmarkResult:
    """Run guidellm in its own process group (killed as a group on timeout) and validate its report.

    Raises RunFailed(stage="benchmarking") with a one-line reason and the log's tail.
    """
    report_path.unlink(missing_ok=True)
    try:
        command_run(argv=argv, log_path=log_path, timeout_s=timeout_s, env=env, cancel=cancel)
    except CommandFailed as exc:
        what = (
            f"timed out after {timeout_s:.0f} s" if exc.timed_out else f"exited with status {exc.returncode}"
        )
        raise RunFailed(
            stage="benchmarking",
            reason=f"guidellm {what}: {failure_line(tail=exc.log_tail)}",
            log_tail=exc.log_tail,
            retryable=exc.timed_out,
            timed_out=exc.timed_out,
        ) from exc
    if not report_path.is_file():
        tail = log_tail(path=log_path)
        raise RunFailed(stage="benchmarking", reason="guidellm wrote no report", log_tail=tail)
    raw = report_path.read_bytes()
    try:
        report = report_parse(
            raw=raw, expected_concurrencies=expected_concurrencies, max_error_rate=max_error_rate
        )
    except ReportInvalid as exc:
        if exc.blame == BLAME_BENCH and exc.level_index:
            # Lower levels completed and this one did not: the same node will not meet it next time.
            raise RunFailed(
                stage="benchmarking",
                reason=f"this node cannot meet a level: {exc.reason}; the {exc.level_index} level(s) "
                "before it completed and are kept in the run's report. Lengthen the suite's levels "
                "(max_seconds) or lower that level's streams",
                log_tail=log_tail(path=log_path),
            ) from exc
        whose = {BLAME_SERVER: "the server failed requests", BLAME_BENCH: "the bench failed"}
        raise RunFailed(
            stage="benchmarking",
            reason=f"{whose.get(exc.blame, 'invalid report')}: {exc.reason}",
            log_tail=log_tail(path=log_path),
            retryable=exc.blame == BLAME_BENCH,
            server_errors=exc.blame == BLAME_SERVER,
        ) from exc
    return BenchmarkResult(raw_report=raw, report=report, report_path=report_path, log_path=log_path)

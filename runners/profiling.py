"""The profiling stage of a profile run: a short, fixed load traced by vLLM's torch profiler.

It runs after the measured levels, in the same server (started with the profiler switched on), and is
never part of a measurement: `requests` completions of the suite's own shape, `concurrency` at a time,
between `POST /start_profile` and `POST /stop_profile`. The server writes one gzip'd Chrome trace per
process that profiles (the engine's workers; the API server too unless `ignore_frontend`); their summary,
the worker trace to download and the server's /metrics deltas over the load are the stage's outcome.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runners.errors import RunnerError
from runners.metrics import MetricsSnapshot
from runners.profiles import ProfileSummary, TraceUnreadable, traces_summarise
from runners.server import warm_up_body
from runners.suites import DataSpec, ProfilerSwitch, ProfilingSpec

TRACE_GLOB = "*.pt.trace.json*"
# The API server's own trace is named after it; the engine's workers' traces hold the model's ops.
FRONTEND_TRACE_PREFIX = "async_llm"
TRACE_SETTLE_S = 2.0
_LOCAL_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ProfilingFailed(RunnerError):
    """The profiling stage recorded no usable trace; the message says why in one line."""


def profiler_serve_options(
    *, profiling: ProfilingSpec, trace_dir: Path
) -> tuple[tuple[str, ...], dict[str, str]]:
    """(extra `vllm serve` arguments, extra environment) that make the server record traces into
    `trace_dir`, in the spelling the suite's vLLM takes (see ProfilerSwitch)."""
    if profiling.switch is ProfilerSwitch.ENVIRONMENT:
        return (), {"VLLM_TORCH_PROFILER_DIR": str(trace_dir)}
    config = {"profiler": "torch", "torch_profiler_dir": str(trace_dir), **profiling.options}
    return ("--profiler-config", json.dumps(config, sort_keys=True)), {}


@dataclass(frozen=True)
class ProfileOutcome:
    """What the profiling stage produced: the trace to download (gzip'd), the summary of every worker
    trace, the server's counters over the profiled load, and how the load was made."""

    trace_gzip: bytes
    trace_name: str
    summary: ProfileSummary
    metrics_delta: Mapping[str, float]
    settings: Mapping[str, Any]


def _post(*, url: str, timeout_s: float, body: bytes = b"") -> bytes:
    request = urllib.request.Request(
        url, data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    with _LOCAL_OPENER.open(request, timeout=timeout_s) as response:
        return bytes(response.read())


def _request_body(*, base_url: str, model: str, request_format: str, data: DataSpec) -> bytes:
    """A request of the suite's shape. A word is several tokens in some tokenizers ("hello" is about 3 in
    the tiny model's), so the completions endpoint gets exactly `prompt_tokens` token ids, tokenized by
    the server itself (/tokenize); the chat endpoint, which takes only text, the warm-up's text."""
    body = json.loads(
        warm_up_body(
            model=model,
            request_format=request_format,
            prompt_tokens=data.prompt_tokens,
            output_tokens=data.output_tokens,
        )
    )
    if "prompt" in body:
        try:
            answer = json.loads(
                _post(
                    url=f"{base_url}/tokenize",
                    body=json.dumps({"model": model, "prompt": body["prompt"]}).encode(),
                    timeout_s=60,
                )
            )
            tokens = [int(token) for token in answer["tokens"]]
        except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError):
            tokens = []
        if len(tokens) >= data.prompt_tokens:
            body["prompt"] = tokens[: data.prompt_tokens]
    return json.dumps(body).encode()


def _load_send(
    *, base_url: str, request_format: str, body: bytes, profiling: ProfilingSpec, deadline: float
) -> None:
    def one(_: int) -> None:
        _post(url=f"{base_url}{request_format}", body=body, timeout_s=max(1.0, deadline - time.monotonic()))

    with ThreadPoolExecutor(max_workers=profiling.concurrency) as pool:
        list(pool.map(one, range(profiling.requests)))


def _traces_settled(*, trace_dir: Path, deadline: float) -> list[Path]:
    """The trace files, once their sizes stop changing (the workers flush them after /stop_profile)."""
    sizes: dict[Path, int] = {}
    while True:
        traces = sorted(path for path in trace_dir.rglob(TRACE_GLOB) if path.is_file())
        now = {path: path.stat().st_size for path in traces}
        if traces and now == sizes:
            return traces
        if time.monotonic() > deadline:
            return traces
        sizes = now
        time.sleep(TRACE_SETTLE_S)


def _gzipped(raw: bytes) -> bytes:
    return raw if raw[:2] == b"\x1f\x8b" else gzip.compress(raw, compresslevel=6)


def _profiler_post(*, base_url: str, action: str, timeout_s: float) -> None:
    try:
        _post(url=f"{base_url}/{action}", timeout_s=timeout_s)
    except urllib.error.HTTPError as error:
        raise ProfilingFailed(
            f"/{action} answered HTTP {error.code}: the server may not have been started with the profiler "
            "(see the suite's profiling.switch)"
        ) from None
    except (urllib.error.URLError, OSError) as error:
        raise ProfilingFailed(f"/{action} failed: {getattr(error, 'reason', error)}") from None


def profile_record(
    *,
    base_url: str,
    model: str,
    request_format: str,
    data: DataSpec,
    profiling: ProfilingSpec,
    trace_dir: Path,
    metrics: Callable[[], MetricsSnapshot],
    cancel: threading.Event | None = None,
) -> ProfileOutcome:
    """Trace the suite's fixed profiling load on a server started with `profiler_serve_options`."""
    if cancel is not None and cancel.is_set():
        raise ProfilingFailed("the profiling stage was cancelled")
    deadline = time.monotonic() + profiling.timeout_s
    body = _request_body(base_url=base_url, model=model, request_format=request_format, data=data)
    before = metrics()
    _profiler_post(base_url=base_url, action="start_profile", timeout_s=60)
    try:
        _load_send(
            base_url=base_url,
            request_format=request_format,
            body=body,
            profiling=profiling,
            deadline=deadline,
        )
    except (urllib.error.URLError, OSError) as error:
        raise ProfilingFailed(f"the profiled load failed: {getattr(error, 'reason', error)}") from None
    finally:
        # Stopping flushes the traces: on a big model that takes long (vLLM's own RPC timeout too).
        _profiler_post(
            base_url=base_url, action="stop_profile", timeout_s=max(60.0, deadline - time.monotonic())
        )
    after = metrics()
    traces = _traces_settled(trace_dir=trace_dir, deadline=deadline)
    workers = [path for path in traces if not path.name.startswith(FRONTEND_TRACE_PREFIX)]
    if not workers:
        found = ", ".join(path.name for path in traces) or "nothing"
        raise ProfilingFailed(f"no worker trace under {trace_dir} after /stop_profile (found {found})")
    raws = [path.read_bytes() for path in workers]
    try:
        summary = traces_summarise(raws=raws)
    except TraceUnreadable as error:
        raise ProfilingFailed(f"the worker traces cannot be read: {error}") from None
    # The largest worker trace is rank 0's on a tensor-parallel server: the one to look at in Perfetto.
    chosen = max(range(len(workers)), key=lambda index: (len(raws[index]), -index))
    return ProfileOutcome(
        trace_gzip=_gzipped(raws[chosen]),
        trace_name=workers[chosen].name if workers[chosen].suffix == ".gz" else f"{workers[chosen].name}.gz",
        summary=summary,
        metrics_delta=after.counters_since(before=before),
        settings={
            "requests": profiling.requests,
            "concurrency": profiling.concurrency,
            "prompt_tokens": data.prompt_tokens,
            "output_tokens": data.output_tokens,
            "switch": str(profiling.switch),
            "traces": [path.name for path in traces],
        },
    )

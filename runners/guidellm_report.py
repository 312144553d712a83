"""Read a guidellm 0.8.x JSON report into typed values, one set per concurrency level.

Pure Python: it never imports guidellm (importing its report models costs seconds and ~1 GB).
guidellm exits 0 and writes 0.0 for every latency when all requests failed, so a report is
validated before any number in it is trusted.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SUPPORTED_REPORT_VERSION = 2

# metric key -> (path under benchmarks[i].metrics, statistic)
_LATENCY_SOURCES: dict[str, str] = {
    "ttft_ms": "time_to_first_token_ms",
    "itl_ms": "inter_token_latency_ms",
    "tpot_ms": "time_per_output_token_ms",
    "latency_s": "request_latency",
}
_STATISTICS = ("mean", "p50", "p90", "p99")

METRIC_KEYS: tuple[str, ...] = (
    "output_throughput_tok_s",
    "request_throughput_req_s",
    *(f"{prefix}_{stat}" for prefix in _LATENCY_SOURCES for stat in _STATISTICS),
    "requests_successful",
    "requests_errored",
    "requests_incomplete",
)


BLAME_SERVER = "server"  # the code under test answered with errors
BLAME_BENCH = "bench"  # nothing completed in time: the node was too slow or too loaded, retry
BLAME_REPORT = "report"  # the report itself is malformed or incomplete


class ReportInvalid(Exception):
    """The report cannot be trusted as numbers; `reason` says why in one line, `blame` whose fault it
    is (BLAME_SERVER, BLAME_BENCH or BLAME_REPORT)."""

    def __init__(self, reason: str, *, blame: str = BLAME_REPORT) -> None:
        super().__init__(reason)
        self.reason = reason
        self.blame = blame


@dataclass(frozen=True)
class LevelResult:
    concurrency: int
    metrics: Mapping[str, float]


@dataclass(frozen=True)
class GuidellmReport:
    guidellm_version: str
    labels: Mapping[str, str]
    levels: tuple[LevelResult, ...]

    @property
    def concurrencies(self) -> tuple[int, ...]:
        return tuple(level.concurrency for level in self.levels)


def _dig(node: Any, path: Sequence[str], *, where: str) -> Any:
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            raise ReportInvalid(f"{where}: missing '{'.'.join(path)}'")
        node = node[key]
    return node


def _number(node: Any, path: Sequence[str], *, where: str) -> float:
    value = _dig(node, path, where=where)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ReportInvalid(f"{where}: '{'.'.join(path)}' is not a finite number ({value!r})")
    return float(value)


def _first_error(benchmark: Any) -> str:
    """': ' and the error guidellm recorded for the first errored request it kept ('' if none)."""
    requests = benchmark.get("requests") if isinstance(benchmark, Mapping) else None
    errored = requests.get("errored") if isinstance(requests, Mapping) else None
    for request in errored if isinstance(errored, list) else []:
        info = request.get("info") if isinstance(request, Mapping) else None
        error = info.get("error") if isinstance(info, Mapping) else None
        if error:
            return ": " + " ".join(str(error).split())[:200]
    return ""


def _level_parse(benchmark: Any, *, index: int, max_error_rate: float) -> LevelResult:
    where = f"benchmarks[{index}]"
    streams = _dig(benchmark, ("config", "strategy", "streams"), where=where)
    if isinstance(streams, bool) or not isinstance(streams, int) or streams < 1:
        raise ReportInvalid(f"{where}: config.strategy.streams is not a concurrency level ({streams!r})")
    where = f"concurrency {streams}"
    metrics_node = _dig(benchmark, ("metrics",), where=where)

    totals = {
        kind: int(_number(metrics_node, ("request_totals", kind), where=where))
        for kind in ("successful", "errored", "incomplete")
    }
    if totals["successful"] == 0 and totals["errored"] == 0:
        raise ReportInvalid(
            f"{where}: no request completed within the level ({totals['incomplete']} incomplete)",
            blame=BLAME_BENCH,
        )
    quoted = _first_error(benchmark)
    if totals["successful"] == 0:
        raise ReportInvalid(
            f"{where}: no successful request ({totals['errored']} errored, {totals['incomplete']} incomplete)"
            + quoted,
            blame=BLAME_SERVER,
        )
    completed = totals["successful"] + totals["errored"]
    error_rate = totals["errored"] / completed
    if error_rate > max_error_rate:
        raise ReportInvalid(
            f"{where}: {totals['errored']} of {completed} requests errored "
            f"({error_rate:.1%}, tolerated {max_error_rate:.1%})" + quoted,
            blame=BLAME_SERVER,
        )

    metrics: dict[str, float] = {
        "output_throughput_tok_s": _number(
            metrics_node, ("output_tokens_per_second", "total", "mean"), where=where
        ),
        "request_throughput_req_s": _number(
            metrics_node, ("requests_per_second", "total", "mean"), where=where
        ),
    }
    for prefix, source in _LATENCY_SOURCES.items():
        successful = _dig(metrics_node, (source, "successful"), where=where)
        metrics[f"{prefix}_mean"] = _number(successful, ("mean",), where=f"{where}: {source}.successful")
        for stat in ("p50", "p90", "p99"):
            metrics[f"{prefix}_{stat}"] = _number(
                successful, ("percentiles", stat), where=f"{where}: {source}.successful"
            )
    for kind, count in totals.items():
        metrics[f"requests_{kind}"] = float(count)
    return LevelResult(concurrency=streams, metrics=metrics)


def report_parse(
    *, raw: bytes | str, expected_concurrencies: Sequence[int] = (), max_error_rate: float = 0.0
) -> GuidellmReport:
    """Parse and validate a guidellm JSON report; raise ReportInvalid with a one-line reason."""
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ReportInvalid(f"not valid JSON (truncated or corrupt?): {error}") from None
    if not isinstance(document, Mapping) or "benchmarks" not in document or "metadata" not in document:
        raise ReportInvalid("not a guidellm report: expected top-level 'metadata' and 'benchmarks'")
    version = _dig(document, ("metadata", "version"), where="report")
    if version != SUPPORTED_REPORT_VERSION:
        raise ReportInvalid(
            f"unsupported guidellm report version {version!r} (supported: {SUPPORTED_REPORT_VERSION})"
        )
    benchmarks = document["benchmarks"]
    if not isinstance(benchmarks, list) or not benchmarks:
        raise ReportInvalid("report has no benchmark levels")

    levels = [
        _level_parse(benchmark, index=index, max_error_rate=max_error_rate)
        for index, benchmark in enumerate(benchmarks)
    ]
    seen = [level.concurrency for level in levels]
    duplicated = sorted({c for c in seen if seen.count(c) > 1})
    if duplicated:
        raise ReportInvalid(f"concurrency level(s) {duplicated} appear more than once")
    missing = sorted(set(expected_concurrencies) - set(seen))
    if missing:
        raise ReportInvalid(f"missing concurrency level(s) {missing} (report has {sorted(seen)})")

    config = document.get("config")
    metadata = config.get("metadata") if isinstance(config, Mapping) else None
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    return GuidellmReport(
        guidellm_version=str(document["metadata"].get("guidellm_version", "unknown")),
        labels={str(k): str(v) for k, v in (labels or {}).items()},
        levels=tuple(sorted(levels, key=lambda level: level.concurrency)),
    )

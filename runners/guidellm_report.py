"""Read a guidellm 0.8.x JSON report into typed values: every level of the load curve, and the levels
that have a fixed concurrency (concurrent, synchronous = 1) as the points of per-concurrency series.

Pure Python: it never imports guidellm (importing its report models costs seconds and ~1 GB).
guidellm exits 0 and writes 0.0 for every latency when all requests failed, so a report is
validated before any number in it is trusted: bounded in size and shape, and physically possible.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runners.text import storable_problem

SUPPORTED_REPORT_VERSION = 2

# Bounds on what one report may hold: a hostile or broken report must not become 100,000 series.
MAX_LEVELS = 32
MAX_CONCURRENCY = 100_000
MAX_LABELS = 32
MAX_LABEL_KEY_CHARS = 64
MAX_LABEL_VALUE_CHARS = 256
MAX_VERSION_CHARS = 50
# The largest believable value per unit (a day of latency, ten million tokens a second, ...).
_UPPER_BOUNDS: dict[str, float] = {
    "_tok_s": 1e7,
    "_req_s": 1e6,
    "_ms_": 86_400_000.0,
    "_s_": 86_400.0,
    "requests_": 1e9,
    "_pct": 100.0,
}

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


# Reported only when guidellm was given latency objectives (--metrics ...,slo.ttft_ms=...).
SLO_ATTAINMENT_KEY = "slo_attainment_pct"
GOODPUT_KEY = "goodput_req_s"
BLAME_SERVER = "server"  # the code under test answered with errors
BLAME_BENCH = "bench"  # nothing completed in time: the node was too slow or too loaded, retry
BLAME_REPORT = "report"  # the report itself is malformed or incomplete


class ReportInvalid(Exception):
    """The report cannot be trusted as numbers; `reason` says why in one line, `blame` whose fault it
    is (BLAME_SERVER, BLAME_BENCH or BLAME_REPORT)."""

    def __init__(self, reason: str, *, blame: str = BLAME_REPORT, level_index: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.blame = blame
        self.level_index = level_index  # the level (its index in the report) the reason is about


@dataclass(frozen=True)
class LevelResult:
    concurrency: int
    metrics: Mapping[str, float]


@dataclass(frozen=True)
class CurveLevel:
    """One level of the load curve as guidellm ran it: `strategy` is guidellm's (synchronous, concurrent,
    throughput, constant, poisson), `streams` its concurrency, `rate` its requested requests per second."""

    strategy: str
    streams: int | None
    rate: float | None
    metrics: Mapping[str, float]

    @property
    def load_req_s(self) -> float:
        """Where the level sits on the curve: the request rate it achieved."""
        return self.metrics["request_throughput_req_s"]

    @property
    def label(self) -> str:
        if self.strategy == "concurrent":
            return f"concurrency {self.streams}"
        if self.rate is not None:
            return f"{self.strategy} {self.rate:.2f} req/s"
        return self.strategy


@dataclass(frozen=True)
class GuidellmReport:
    guidellm_version: str
    labels: Mapping[str, str]
    levels: tuple[LevelResult, ...]
    curve: tuple[CurveLevel, ...] = ()

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
        raise ReportInvalid(f"{where}: '{'.'.join(path)}' is not a finite number ({str(value)[:40]!r})")
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


def _upper_bound(metric: str) -> float:
    return next(bound for marker, bound in _UPPER_BOUNDS.items() if marker in f"{metric}_")


def _sanity_check(metrics: Mapping[str, float], *, where: str) -> None:
    """Every value non-negative and believable, and each latency's p50 <= p90 <= p99; name the field."""
    for metric, value in metrics.items():
        if value < 0:
            raise ReportInvalid(f"{where}: {metric} is negative ({value:g})")
        if value > _upper_bound(metric):
            raise ReportInvalid(
                f"{where}: {metric} is {value:g}, above the bound of {_upper_bound(metric):g}"
            )
    for prefix in _LATENCY_SOURCES:
        for lower, upper in (("p50", "p90"), ("p90", "p99")):
            if metrics[f"{prefix}_{lower}"] > metrics[f"{prefix}_{upper}"]:
                raise ReportInvalid(
                    f"{where}: {prefix}_{lower} ({metrics[f'{prefix}_{lower}']:g}) is above "
                    f"{prefix}_{upper} ({metrics[f'{prefix}_{upper}']:g})"
                )


def _text(value: Any, *, what: str, max_chars: int) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ReportInvalid(f"{what} must be text, not {type(value).__name__}")
    text = str(value)
    if len(text) > max_chars:
        raise ReportInvalid(f"{what} is {len(text)} characters long, over the limit of {max_chars}")
    problem = storable_problem(text)
    if problem is not None:
        raise ReportInvalid(f"{what} {problem}")
    return text


def _labels_parse(document: Mapping[str, Any]) -> dict[str, str]:
    config = document.get("config")
    metadata = config.get("metadata") if isinstance(config, Mapping) else None
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    if labels is None:
        return {}
    if not isinstance(labels, Mapping):
        raise ReportInvalid(f"config.metadata.labels must be an object, not {type(labels).__name__}")
    if len(labels) > MAX_LABELS:
        raise ReportInvalid(
            f"config.metadata.labels has {len(labels)} labels, over the limit of {MAX_LABELS}"
        )
    return {
        _text(key, what="a label name", max_chars=MAX_LABEL_KEY_CHARS): _text(
            value, what=f"label {str(key)[:MAX_LABEL_KEY_CHARS]!r}", max_chars=MAX_LABEL_VALUE_CHARS
        )
        for key, value in labels.items()
    }


def _strategy_parse(benchmark: Any, *, where: str) -> tuple[str, int | None, float | None]:
    """(strategy kind, concurrency, requested rate) of one level."""
    strategy = _dig(benchmark, ("config", "strategy"), where=where)
    kind = _dig(strategy, ("type_",), where=where)
    if kind == "synchronous":
        return kind, 1, None
    if kind == "concurrent":
        streams = _dig(strategy, ("streams",), where=where)
        if isinstance(streams, bool) or not isinstance(streams, int) or not 1 <= streams <= MAX_CONCURRENCY:
            raise ReportInvalid(
                f"{where}: config.strategy.streams is not a concurrency level from 1 to {MAX_CONCURRENCY} "
                f"({str(streams)[:40]!r})"
            )
        return kind, streams, None
    if kind == "throughput":
        return kind, None, None
    if kind in ("constant", "poisson"):
        return kind, None, _number(strategy, ("rate",), where=where)
    raise ReportInvalid(f"{where}: unsupported strategy {kind!r}")


def _level_parse(benchmark: Any, *, index: int, max_error_rate: float) -> CurveLevel:
    where = f"benchmarks[{index}]"
    strategy, streams, rate = _strategy_parse(benchmark, where=where)
    where = f"concurrency {streams}" if strategy == "concurrent" else f"level {index} ({strategy})"
    metrics_node = _dig(benchmark, ("metrics",), where=where)

    totals = {
        kind: int(_number(metrics_node, ("request_totals", kind), where=where))
        for kind in ("successful", "errored", "incomplete")
    }
    if totals["successful"] == 0 and totals["errored"] == 0:
        raise ReportInvalid(
            f"{where}: no request completed within the level ({totals['incomplete']} incomplete)",
            blame=BLAME_BENCH,
            level_index=index,
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
    if metrics_node.get("slo_attainment") is not None:
        metrics[SLO_ATTAINMENT_KEY] = 100.0 * _number(metrics_node, ("slo_attainment",), where=where)
        metrics[GOODPUT_KEY] = _number(metrics_node, ("request_goodput", "total", "mean"), where=where)
    _sanity_check(metrics, where=where)
    return CurveLevel(strategy=strategy, streams=streams, rate=rate, metrics=metrics)


def report_parse(
    *, raw: bytes | str, expected_concurrencies: Sequence[int] = (), max_error_rate: float = 0.0
) -> GuidellmReport:
    """Parse and validate a guidellm JSON report; raise ReportInvalid with a one-line reason.

    With `expected_concurrencies`, the report's levels must be exactly those.
    """
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ReportInvalid(f"not valid JSON (truncated or corrupt?): {error}") from None
    except RecursionError:
        raise ReportInvalid("not a guidellm report: JSON nested too deeply") from None
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
    if len(benchmarks) > MAX_LEVELS:
        raise ReportInvalid(f"report has {len(benchmarks)} benchmark levels, over the limit of {MAX_LEVELS}")

    curve = [
        _level_parse(benchmark, index=index, max_error_rate=max_error_rate)
        for index, benchmark in enumerate(benchmarks)
    ]
    # Levels of a fixed concurrency are comparable from run to run; a sweep's rates are not.
    levels = [
        LevelResult(concurrency=level.streams, metrics=level.metrics)
        for level in curve
        if level.streams is not None
    ]
    seen = [level.concurrency for level in levels]
    duplicated = sorted({c for c in seen if seen.count(c) > 1})
    if duplicated:
        raise ReportInvalid(f"concurrency level(s) {duplicated} appear more than once")
    missing = sorted(set(expected_concurrencies) - set(seen))
    if missing:
        raise ReportInvalid(f"missing concurrency level(s) {missing} (report has {sorted(seen)})")
    unexpected = sorted(set(seen) - set(expected_concurrencies)) if expected_concurrencies else []
    if unexpected:
        raise ReportInvalid(
            f"unexpected concurrency level(s) {unexpected} (the suite's are {sorted(expected_concurrencies)})"
        )

    return GuidellmReport(
        guidellm_version=_text(
            document["metadata"].get("guidellm_version", "unknown"),
            what="metadata.guidellm_version",
            max_chars=MAX_VERSION_CHARS,
        ),
        labels=_labels_parse(document),
        levels=tuple(sorted(levels, key=lambda level: level.concurrency)),
        curve=tuple(curve),
    )

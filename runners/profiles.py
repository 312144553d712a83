"""Torch profiler traces: a Chrome-trace JSON (gzip'd, as vLLM's torch profiler writes it) read into a
summary per op or kernel name, and the diff of two summaries.

No Django and no torch: the runner summarises the traces it recorded, the dashboard diffs two stored
summaries. Host-side events (ATen ops, record_function ranges, CUDA runtime and driver calls) are "cpu",
their self time is their duration less that of the events nested directly inside them on the same thread;
device-side events (kernels, copies, memsets) are "gpu", their self time is their duration. A CPU op also
carries the device time of the kernels it and the ops inside it launched (linked by the trace's
"External id"), as torch's own `key_averages()` counts them.
"""

from __future__ import annotations

import gzip
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runners.errors import RunnerError

DEVICE_CPU = "cpu"
DEVICE_GPU = "gpu"
DEVICES = (DEVICE_CPU, DEVICE_GPU)
# Python stack frames (with_stack) and the profiler's own bookkeeping are left out, as key_averages() does.
CPU_CATEGORIES = frozenset({"cpu_op", "user_annotation", "cuda_runtime", "cuda_driver"})
GPU_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
# The profiler's own work (CUPTI buffer requests): it interrupts whatever op runs then, whose self time it is
# not, and is no op of the workload. It lies on no thread of the workload, so every host thread's open op
# gives the time back, as key_averages() does.
OVERHEAD_CATEGORY = "overhead"
# Kernels belong to the ATen op of their "External id"; runtime calls share the id and would count twice.
KERNEL_OWNER_CATEGORIES = frozenset({"cpu_op"})
# A summary keeps this many ops per device, the largest by self time; the rest is a rounding error.
OPS_KEPT_PER_DEVICE = 400
NAME_MAX_CHARS = 500
# Nesting on one thread is read from microsecond timestamps with nanosecond fractions.
NEST_TOLERANCE_US = 0.001
# vLLM names its per-step ranges after the batch (e.g. "execute_context_2(256)_generation_3(3)"): without
# the numbers, the same range of two runs has the same name.
_ANNOTATION_NUMBERS = re.compile(r"\d+")


class TraceUnreadable(RunnerError):
    """The bytes are not a torch profiler Chrome trace (gzip'd or plain JSON)."""


@dataclass(frozen=True)
class OpStat:
    """One op, annotation or kernel name on one device, summed over the trace."""

    name: str
    device: str
    calls: int
    self_ms: float
    total_ms: float
    gpu_ms: float | None = None  # a CPU op's kernels (its own and its children's), where there are any

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "device": self.device,
            "calls": self.calls,
            "self_ms": round(self.self_ms, 6),
            "total_ms": round(self.total_ms, 6),
        }
        if self.gpu_ms is not None:
            data["gpu_ms"] = round(self.gpu_ms, 6)
        return data


@dataclass(frozen=True)
class ProfileSummary:
    """A trace's ops, largest self time first per device, and each device's busy time (the sum of every
    event's self time there: the profiled load's whole step, not only the ops kept)."""

    ops: tuple[OpStat, ...]
    step_ms: Mapping[str, float]
    events: int

    def op(self, *, name: str, device: str) -> OpStat | None:
        return next((op for op in self.ops if op.name == name and op.device == device), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "ops": [op.to_json() for op in self.ops],
            "step_ms": {device: round(ms, 6) for device, ms in self.step_ms.items()},
            "events": self.events,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProfileSummary:
        """The summary `to_json` wrote; TraceUnreadable when it is not one."""
        try:
            ops = tuple(
                OpStat(
                    name=str(op["name"])[:NAME_MAX_CHARS],
                    device=_device(str(op["device"])),
                    calls=int(op["calls"]),
                    self_ms=_finite(op["self_ms"]),
                    total_ms=_finite(op["total_ms"]),
                    gpu_ms=None if op.get("gpu_ms") is None else _finite(op["gpu_ms"]),
                )
                for op in data["ops"]
            )
            step_ms = {_device(str(device)): _finite(ms) for device, ms in dict(data["step_ms"]).items()}
            return cls(ops=ops, step_ms=step_ms, events=int(data.get("events", 0)))
        except (KeyError, TypeError, ValueError) as error:
            raise TraceUnreadable(f"not a profile summary: {error}") from None


def _finite(value: Any) -> float:
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"{value!r} is not a finite, non-negative number of ms")
    return number


def _device(device: str) -> str:
    if device not in DEVICES:
        raise ValueError(f"device {device!r} is not one of {', '.join(DEVICES)}")
    return device


def trace_events(*, raw: bytes) -> list[dict[str, Any]]:
    """The events of a Chrome trace, gzip'd or not."""
    try:
        text = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
        document = json.loads(text)
    except (OSError, EOFError, ValueError) as error:
        raise TraceUnreadable(f"not a gzip'd JSON trace: {error}") from None
    events = document.get("traceEvents") if isinstance(document, dict) else document
    if not isinstance(events, list):
        raise TraceUnreadable("the trace has no list of traceEvents")
    return [event for event in events if isinstance(event, dict)]


def _op_name(event: Mapping[str, Any]) -> str:
    name = str(event.get("name", ""))
    if event.get("cat") == "user_annotation":
        name = _ANNOTATION_NUMBERS.sub("N", name)
    return name[:NAME_MAX_CHARS]


class _Totals:
    def __init__(self) -> None:
        self.calls = 0
        self.self_us = 0.0
        self.total_us = 0.0
        self.gpu_us = 0.0
        self.launched = False


@dataclass
class _Open:
    name: str
    start_us: float
    end_us: float
    children_us: float = 0.0
    gpu_us: float = 0.0
    launched: bool = False
    overhead: bool = False


def _duration_events(events: Iterable[Mapping[str, Any]]) -> Iterable[tuple[Mapping[str, Any], float, float]]:
    for event in events:
        if event.get("ph") != "X":
            continue
        try:
            start, duration = float(event["ts"]), float(event.get("dur", 0.0))
        except (KeyError, TypeError, ValueError):
            continue
        if math.isfinite(start) and math.isfinite(duration) and duration >= 0:
            yield event, start, duration


def _external_id(event: Mapping[str, Any]) -> Any:
    args = event.get("args")
    return args.get("External id") if isinstance(args, dict) else None


def trace_summarise(*, raw: bytes, ops_kept: int = OPS_KEPT_PER_DEVICE) -> ProfileSummary:
    """Read one torch profiler trace into its summary per (name, device)."""
    return traces_summarise(raws=(raw,), ops_kept=ops_kept)


def traces_summarise(*, raws: Sequence[bytes], ops_kept: int = OPS_KEPT_PER_DEVICE) -> ProfileSummary:
    """One summary of several traces of the same load (a server's workers, one trace each), summed."""
    totals: dict[tuple[str, str], _Totals] = {}
    count = 0
    for raw in raws:
        count += _trace_add(events=trace_events(raw=raw), totals=totals)
    step_us = dict.fromkeys(DEVICES, 0.0)
    for (_, device), total in totals.items():
        step_us[device] += total.self_us
    ops: list[OpStat] = []
    for device in DEVICES:
        kept = sorted(
            ((name, total) for (name, on), total in totals.items() if on == device),
            key=lambda item: (-item[1].self_us, item[0]),
        )[:ops_kept]
        ops.extend(
            OpStat(
                name=name,
                device=device,
                calls=total.calls,
                self_ms=total.self_us / 1000,
                total_ms=total.total_us / 1000,
                gpu_ms=total.gpu_us / 1000 if total.launched else None,
            )
            for name, total in kept
        )
    step_ms = {device: us / 1000 for device, us in step_us.items() if us > 0 or device == DEVICE_CPU}
    return ProfileSummary(ops=tuple(ops), step_ms=step_ms, events=count)


def _trace_add(*, events: list[dict[str, Any]], totals: dict[tuple[str, str], _Totals]) -> int:
    """Add one trace's events to `totals`; the number of events counted."""
    kernels_us: dict[Any, float] = {}
    host: dict[tuple[Any, Any], list[tuple[Mapping[str, Any], float, float]]] = {}
    overhead: list[tuple[Mapping[str, Any], float, float]] = []
    count = 0
    for event, start, duration in _duration_events(events):
        category = event.get("cat")
        if category == OVERHEAD_CATEGORY:
            overhead.append((event, start, duration))
        elif category in GPU_CATEGORIES:
            count += 1
            total = totals.setdefault((_op_name(event), DEVICE_GPU), _Totals())
            total.calls += 1
            total.self_us += duration
            total.total_us += duration
            owner = _external_id(event)
            if owner is not None:
                kernels_us[owner] = kernels_us.get(owner, 0.0) + duration
        elif category in CPU_CATEGORIES:
            count += 1
            host.setdefault((event.get("pid"), event.get("tid")), []).append((event, start, duration))
    for thread_events in host.values():
        thread_events.extend(overhead)
        _thread_add(events=thread_events, kernels_us=kernels_us, totals=totals)
    return count


def _thread_add(
    *,
    events: list[tuple[Mapping[str, Any], float, float]],
    kernels_us: Mapping[Any, float],
    totals: dict[tuple[str, str], _Totals],
) -> None:
    """Self time on one host thread: an event's duration less the events directly inside it."""
    events.sort(key=lambda item: (item[1], -item[2]))
    stack: list[_Open] = []

    def close(frame: _Open) -> None:
        if frame.overhead:
            return
        total = totals.setdefault((frame.name, DEVICE_CPU), _Totals())
        duration = frame.end_us - frame.start_us
        total.self_us += max(0.0, duration - frame.children_us)
        # An op that calls itself (aten::sum into aten::sum at another dispatch key) is one call, as in
        # key_averages(); its time and kernels are its caller's already.
        if not (stack and stack[-1].name == frame.name):
            total.calls += 1
            total.total_us += duration
            total.gpu_us += frame.gpu_us
            total.launched = total.launched or frame.launched
        if stack:
            stack[-1].gpu_us += frame.gpu_us
            stack[-1].launched = stack[-1].launched or frame.launched

    for event, start, duration in events:
        end = start + duration
        while stack and not (
            start >= stack[-1].start_us - NEST_TOLERANCE_US and end <= stack[-1].end_us + NEST_TOLERANCE_US
        ):
            close(stack.pop())
        if stack:
            stack[-1].children_us += duration
        frame = _Open(
            name=_op_name(event), start_us=start, end_us=end, overhead=event.get("cat") == OVERHEAD_CATEGORY
        )
        if event.get("cat") in KERNEL_OWNER_CATEGORIES:
            launched_us = kernels_us.get(_external_id(event))
            if launched_us is not None:
                frame.gpu_us, frame.launched = launched_us, True
        stack.append(frame)
    while stack:
        close(stack.pop())


@dataclass(frozen=True)
class OpChange:
    """One op's self time in the parent (base) and the culprit (head). `step_share_pct` is what the change
    adds to the step, as a share of the parent's step on that device: the shares of all ops add up to the
    step's own change."""

    name: str
    device: str
    base_ms: float
    head_ms: float
    base_calls: int
    head_calls: int

    @property
    def delta_ms(self) -> float:
        return self.head_ms - self.base_ms

    @property
    def delta_pct(self) -> float | None:
        return None if self.base_ms <= 0 else 100.0 * self.delta_ms / self.base_ms

    def step_share_pct(self, *, base_step_ms: Mapping[str, float]) -> float | None:
        step = base_step_ms.get(self.device, 0.0)
        return None if step <= 0 else 100.0 * self.delta_ms / step


def profile_diff(*, base: ProfileSummary, head: ProfileSummary) -> tuple[OpChange, ...]:
    """Every (name, device) of either summary, the largest change of self time first (ties by name)."""
    before_ops = {(op.name, op.device): op for op in base.ops}
    after_ops = {(op.name, op.device): op for op in head.ops}
    changes = []
    for name, device in before_ops.keys() | after_ops.keys():
        before, after = before_ops.get((name, device)), after_ops.get((name, device))
        changes.append(
            OpChange(
                name=name,
                device=device,
                base_ms=before.self_ms if before else 0.0,
                head_ms=after.self_ms if after else 0.0,
                base_calls=before.calls if before else 0,
                head_calls=after.calls if after else 0,
            )
        )
    return tuple(sorted(changes, key=lambda change: (-abs(change.delta_ms), change.device, change.name)))

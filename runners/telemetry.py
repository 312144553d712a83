"""GPU telemetry sampled in the background while the benchmark runs: SM clock, power, temperature,
memory used, utilization.

A throttled clock or a hot GPU explains a slow run that no code change caused; the samples make that
visible next to the numbers. Without an NVIDIA GPU the sampler takes no samples and raises nothing.
"""

from __future__ import annotations

import csv
import io
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from runners.errors import CommandFailed
from runners.process import command_output

NVIDIA_SMI_QUERY = "index,clocks.sm,power.draw,temperature.gpu,memory.used,utilization.gpu"


@dataclass(frozen=True)
class TelemetrySample:
    elapsed_s: float
    gpu_index: int
    sm_clock_mhz: float | None
    power_w: float | None
    temperature_c: float | None
    memory_used_mib: float | None
    utilization_pct: float | None


Reading = tuple[int, float | None, float | None, float | None, float | None, float | None]
Reader = Callable[[], Sequence[Reading]]


def nvml_reader() -> tuple[Reader, Callable[[], None]] | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    except pynvml.NVMLError:
        return None

    def guarded(query: Callable[[Any], Any], handle: Any) -> float | None:
        # A GPU may not support one query (e.g. power on some boards); keep the others.
        try:
            return float(query(handle))
        except pynvml.NVMLError:
            return None

    def sm_clock(handle: Any) -> Any:
        return pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)

    def power_w(handle: Any) -> Any:
        return pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0  # reported in mW

    def temperature(handle: Any) -> Any:
        return pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)

    def memory_used_mib(handle: Any) -> Any:
        return pynvml.nvmlDeviceGetMemoryInfo(handle).used / (1024 * 1024)

    def utilization(handle: Any) -> Any:
        return pynvml.nvmlDeviceGetUtilizationRates(handle).gpu

    def read() -> list[Reading]:
        return [
            (
                index,
                guarded(sm_clock, handle),
                guarded(power_w, handle),
                guarded(temperature, handle),
                guarded(memory_used_mib, handle),
                guarded(utilization, handle),
            )
            for index, handle in enumerate(handles)
        ]

    return read, pynvml.nvmlShutdown


def _number_or_none(text: str) -> float | None:
    try:
        return float(text.strip())
    except ValueError:
        # "[N/A]", "[Not Supported]"
        return None


def nvidia_smi_query_parse(*, csv_text: str) -> list[Reading]:
    """Rows of `nvidia-smi --query-gpu=<NVIDIA_SMI_QUERY> --format=csv,noheader,nounits`."""
    readings: list[Reading] = []
    for row in csv.reader(io.StringIO(csv_text)):
        if len(row) != 6:
            continue
        index, *values = row
        sm, power, temperature, memory, utilization = (_number_or_none(value) for value in values)
        readings.append((int(index), sm, power, temperature, memory, utilization))
    return readings


def nvidia_smi_reader() -> tuple[Reader, Callable[[], None]] | None:
    executable = shutil.which("nvidia-smi")
    if executable is None:
        return None

    def read() -> list[Reading]:
        output = command_output(
            argv=(executable, f"--query-gpu={NVIDIA_SMI_QUERY}", "--format=csv,noheader,nounits"),
            timeout_s=10,
        )
        return nvidia_smi_query_parse(csv_text=output)

    return read, lambda: None


class TelemetrySampler:
    """Samples every GPU each `interval_s` in a daemon thread between __enter__ and __exit__.

    `samples` is read after the block; a reading that fails is skipped, never raised into the run.
    """

    def __init__(self, *, interval_s: float = 2.0, reader: tuple[Reader, Callable[[], None]] | None = None):
        self._interval_s = interval_s
        self._reader = reader
        self._stop = threading.Event()
        self._samples: list[TelemetrySample] = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._started = 0.0
        self.source = "none"

    @property
    def samples(self) -> tuple[TelemetrySample, ...]:
        with self._lock:
            return tuple(self._samples)

    def __enter__(self) -> TelemetrySampler:
        if self._reader is None:
            nvml = nvml_reader()
            self._reader = nvml or nvidia_smi_reader()
            self.source = "nvml" if nvml else ("nvidia-smi" if self._reader else "none")
        else:
            self.source = "given"
        if self._reader is not None:
            self._started = time.monotonic()
            self._thread = threading.Thread(target=self._loop, name="gpu-telemetry", daemon=True)
            self._thread.start()
        return self

    def _loop(self) -> None:
        assert self._reader is not None
        read, _ = self._reader
        while True:
            elapsed = time.monotonic() - self._started
            try:
                readings = read()
            except (CommandFailed, OSError, ValueError):
                readings = []
            with self._lock:
                self._samples.extend(
                    TelemetrySample(
                        elapsed_s=round(elapsed, 3),
                        gpu_index=r[0],
                        sm_clock_mhz=r[1],
                        power_w=r[2],
                        temperature_c=r[3],
                        memory_used_mib=r[4],
                        utilization_pct=r[5],
                    )
                    for r in readings
                )
            if self._stop.wait(self._interval_s):
                return

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self._reader is not None:
            _, close = self._reader
            close()

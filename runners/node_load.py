"""What else the node was doing while it measured: its load, and other processes on its GPUs.

A run measured on a busy node (load 11 on a machine with 2 cores read four times slower than the same
suite on a quiet one) or on a GPU that another process also used says nothing about the code under
test; the run records both, its page shows them, and its points are flagged on the timeline.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# Load (processes running or waiting, over the last minute) per core from which the node counts as busy.
BUSY_LOAD_PER_CPU = 0.5


@dataclass(frozen=True)
class NodeLoad:
    load_1m_before: float
    load_1m_after: float
    cpus: int
    gpu_foreign_pids: tuple[int, ...] | None  # None: the node cannot tell (no NVML)

    @property
    def busy(self) -> bool:
        """Whether the node was busy before the benchmark added its own load."""
        return self.load_1m_before >= max(1.0, BUSY_LOAD_PER_CPU * self.cpus)

    @property
    def gpu_shared(self) -> bool | None:
        return None if self.gpu_foreign_pids is None else bool(self.gpu_foreign_pids)

    def fingerprint(self) -> dict[str, object]:
        return {
            "node_load_1m_before": round(self.load_1m_before, 2),
            "node_load_1m_after": round(self.load_1m_after, 2),
            "node_cpus": self.cpus,
            "node_busy": self.busy,
            "gpu_shared": self.gpu_shared,
            "gpu_foreign_pids": list(self.gpu_foreign_pids) if self.gpu_foreign_pids is not None else None,
        }

    def warnings(self) -> list[str]:
        lines = []
        if self.busy:
            lines.append(
                f"the node was busy: load {self.load_1m_before:.1f} on {self.cpus} CPUs before the benchmark "
                f"({self.load_1m_after:.1f} after); its numbers may read slower than the code is"
            )
        if self.gpu_shared:
            pids = ", ".join(str(pid) for pid in self.gpu_foreign_pids or ())
            lines.append(f"another process used the GPU during the run (pid {pids})")
        return lines


def load_1m() -> float:
    return os.getloadavg()[0]


def gpu_compute_pids() -> tuple[int, ...] | None:
    """Pids of every compute process on the node's NVIDIA GPUs (NVML), None without NVML."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        pids: list[int] = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            pids += [process.pid for process in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)]
        pynvml.nvmlShutdown()
    except pynvml.NVMLError:
        return None
    return tuple(sorted(set(pids)))


def foreign_pids(*, pids: Sequence[int] | None, own_group: int) -> tuple[int, ...] | None:
    """Those of `pids` outside the process group `own_group` (the server's): someone else's."""
    if pids is None:
        return None
    foreign = []
    for pid in pids:
        try:
            if os.getpgid(pid) != own_group:
                foreign.append(pid)
        except ProcessLookupError:
            continue
        except PermissionError:
            foreign.append(pid)
    return tuple(foreign)


def node_load_measure(
    *,
    load_before: float,
    own_group: int,
    gpu_pids: Callable[[], tuple[int, ...] | None] = gpu_compute_pids,
) -> NodeLoad:
    """The node's load around the benchmark, and who else is on its GPUs now (the server still runs)."""
    return NodeLoad(
        load_1m_before=load_before,
        load_1m_after=load_1m(),
        cpus=os.cpu_count() or 1,
        gpu_foreign_pids=foreign_pids(pids=gpu_pids(), own_group=own_group),
    )

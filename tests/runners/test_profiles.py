"""The torch-profiler trace reader and the diff of two summaries, on real traces of a real NVIDIA H200."""

import gzip
import json
from pathlib import Path

import pytest

from runners.profiles import (
    DEVICE_CPU,
    DEVICE_GPU,
    NAME_MAX_CHARS,
    ProfileSummary,
    TraceUnreadable,
    profile_diff,
    trace_summarise,
)

PROFILES = Path(__file__).resolve().parents[1] / "fixtures" / "profiles"
GEMM = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"


def summary(tag: str) -> ProfileSummary:
    return trace_summarise(raw=(PROFILES / f"{tag}_trace.json.gz").read_bytes())


def key_averages(tag: str) -> dict[str, dict]:
    rows = json.loads((PROFILES / f"{tag}_key_averages.json").read_text())["rows"]
    return {row["name"][:NAME_MAX_CHARS]: row for row in rows}


@pytest.mark.parametrize("tag", ["gpu_base", "gpu_head"])
def test_the_kernels_of_a_real_h200_trace_are_read_with_their_device_times(tag) -> None:
    ops = summary(tag)
    reference = key_averages(tag)
    kernels = [op for op in ops.ops if op.device == DEVICE_GPU]
    assert {GEMM, "Memset (Device)"} <= {op.name for op in kernels}
    assert any("SoftMax" in op.name or "softmax" in op.name for op in kernels)
    for kernel in kernels:
        expected = reference[kernel.name]
        assert kernel.calls == expected["count"]
        assert kernel.self_ms * 1000 == pytest.approx(expected["self_device_us"], abs=0.01)
        assert kernel.total_ms == kernel.self_ms
    assert ops.step_ms[DEVICE_GPU] == pytest.approx(sum(op.self_ms for op in kernels))


@pytest.mark.parametrize("tag", ["gpu_base", "gpu_head"])
def test_cpu_ops_have_the_self_and_total_times_torch_itself_reports(tag) -> None:
    ops = summary(tag)
    reference = key_averages(tag)
    cpu_ops = [op for op in ops.ops if op.device == DEVICE_CPU and op.name != "step"]
    assert {"aten::mm", "aten::_softmax", "aten::native_layer_norm", "cudaLaunchKernel"} <= {
        op.name for op in cpu_ops
    }
    for op in cpu_ops:
        expected = reference[op.name]
        assert op.calls == expected["count"], op.name
        assert op.self_ms * 1000 == pytest.approx(expected["self_cpu_us"], abs=0.01), op.name
        assert op.total_ms * 1000 == pytest.approx(expected["cpu_total_us"], abs=0.01), op.name
    mm = ops.op(name="aten::mm", device=DEVICE_CPU)
    assert mm is not None and mm.gpu_ms is not None
    # The GEMM kernel, and in head the memset of cuBLAS's workspace, are aten::mm's own kernels.
    assert mm.gpu_ms * 1000 == pytest.approx(reference["aten::mm"]["self_device_us"], abs=0.01)
    gemm = ops.op(name=GEMM, device=DEVICE_GPU)
    assert gemm is not None and mm.gpu_ms >= gemm.self_ms


def test_the_diff_of_a_bigger_matmul_puts_its_gemm_kernel_first_on_the_gpu() -> None:
    base, head = summary("gpu_base"), summary("gpu_head")
    changes = profile_diff(base=base, head=head)
    assert [abs(change.delta_ms) for change in changes] == sorted(
        (abs(change.delta_ms) for change in changes), reverse=True
    )
    gpu = [change for change in changes if change.device == DEVICE_GPU]
    assert gpu[0].name == GEMM
    assert gpu[0].delta_ms > 0.5
    assert gpu[0].delta_pct is not None and gpu[0].delta_pct > 300
    shares = [change.step_share_pct(base_step_ms=base.step_ms) for change in gpu]
    step_change_pct = 100 * (head.step_ms[DEVICE_GPU] - base.step_ms[DEVICE_GPU]) / base.step_ms[DEVICE_GPU]
    assert sum(share for share in shares if share is not None) == pytest.approx(step_change_pct)


def test_an_op_only_one_side_has_counts_from_zero() -> None:
    base, head = summary("gpu_base"), summary("gpu_head")
    changes = {(change.name, change.device): change for change in profile_diff(base=base, head=head)}
    # The 4096-wide softmax takes another kernel (cunn_SoftMaxForwardReg) than the 2048-wide one.
    gone = next(change for (name, _), change in changes.items() if "softmax_warp_forward" in name)
    assert gone.head_ms == 0 and gone.delta_pct == -100.0
    new = next(change for change in changes.values() if change.base_ms == 0 and change.device == DEVICE_GPU)
    assert new.delta_pct is None and new.delta_ms == new.head_ms


def test_a_summary_survives_its_json() -> None:
    original = summary("gpu_head")
    assert (
        ProfileSummary.from_json(json.loads(json.dumps(original.to_json()))).to_json() == original.to_json()
    )


def test_the_plain_json_of_a_trace_reads_as_its_gzip_does() -> None:
    raw = (PROFILES / "gpu_base_trace.json.gz").read_bytes()
    assert trace_summarise(raw=gzip.decompress(raw)) == trace_summarise(raw=raw)


# Named, not by their bytes: a gzip header holds the time it was made, and parallel test processes must
# collect the same tests.
@pytest.mark.parametrize(
    "raw",
    [b"not json", gzip.compress(b"{}"), gzip.compress(b"[1, 2")],
    ids=["not json", "gzip of an empty object", "gzip of cut json"],
)
def test_what_is_no_trace_is_refused(raw) -> None:
    with pytest.raises(TraceUnreadable):
        trace_summarise(raw=raw)


DEMO_TRACES = Path(__file__).resolve().parents[2] / "dashboard" / "demo" / "traces"


def test_a_real_vllm_cpu_trace_reads_as_vllms_own_key_averages_table() -> None:
    from tests.runners.test_profiling_e2e import _vllm_table

    summary = trace_summarise(raw=(DEMO_TRACES / "vllm-cpu-eager.pt.trace.json.gz").read_bytes())
    table = _vllm_table(DEMO_TRACES / "vllm-cpu-eager.profiler_out.txt")
    checked = [name for name in table if name.startswith(("aten::", "_C::", "vllm::")) and "..." not in name]
    assert len(checked) >= 10
    for name in checked:
        op = summary.op(name=name, device=DEVICE_CPU)
        self_ms, total_ms, calls = table[name]
        assert op is not None and op.calls == calls, name
        assert op.self_ms == pytest.approx(self_ms, rel=2e-3, abs=2e-3), name
        assert op.total_ms == pytest.approx(total_ms, rel=2e-3, abs=2e-3), name
    assert DEVICE_GPU not in summary.step_ms  # a CPU server: no device events


def test_the_compiled_and_eager_vllm_cpu_traces_differ_where_torch_compile_fuses() -> None:
    compiled = trace_summarise(raw=(DEMO_TRACES / "vllm-cpu-compiled.pt.trace.json.gz").read_bytes())
    eager = trace_summarise(raw=(DEMO_TRACES / "vllm-cpu-eager.pt.trace.json.gz").read_bytes())

    changes = {change.name: change for change in profile_diff(base=compiled, head=eager)}

    for fused in ("aten::silu", "aten::mean", "aten::pow"):  # SiLU and RMSNorm, one by one in eager mode
        assert changes[fused].base_calls == 0 < changes[fused].head_calls
    assert (
        changes["## Call CompiledFxGraph None ##"].head_calls
        == 0
        < changes["## Call CompiledFxGraph None ##"].base_calls
    )
    assert changes["_C::onednn_mm"].base_calls == changes["_C::onednn_mm"].head_calls > 0

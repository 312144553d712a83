"""The real guidellm 0.8.1 against a server whose first token comes later than one benchmark level lasts.

The server is a double (`fake_vllm_server.py`, its name says so): a real HTTP server that streams
completions like vLLM and makes its very first request wait 12 s, as a real server paying its one-time
costs on a busy node did; the tiny suite's levels last 8 s. guidellm's environment and the tokenizer are
the real cached ones (built on first use, about two minutes). The same run shows that guidellm accepts the
runner's `--metrics kind=generative,sample_size=0`: its report keeps every request's timings and token
counts and none of the prompt or output texts.
"""

import json

import pytest

from runners.guidellm_report import report_parse
from runners.pipeline import benchmark_execute
from runners.suites import suite_get
from tests.runners.test_pipeline import SHA

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

FIRST_TOKEN_DELAY_S = 12


def test_a_first_token_slower_than_a_level_is_absorbed_by_the_warm_up(
    tmp_path, cache_with_real_guidellm, monkeypatch
):
    suite = suite_get(name="tiny-llama-cpu")
    assert suite.benchmark.max_seconds < FIRST_TOKEN_DELAY_S
    monkeypatch.setenv("FAKE_VLLM_FIRST_TOKEN_DELAY_S", str(FIRST_TOKEN_DELAY_S))

    outcome = benchmark_execute(
        suite=suite,
        commit_sha=SHA,
        runner_name="test-runner",
        work_dir=tmp_path / "work",
        on_stage=lambda stage: None,
        heartbeat=lambda: None,
        cache_dir=cache_with_real_guidellm,
    )

    assert outcome.fingerprint["server_warm_up_s"] >= FIRST_TOKEN_DELAY_S
    assert outcome.fingerprint["warm_request_s"] < suite.benchmark.max_seconds
    report = report_parse(raw=outcome.raw_report, expected_concurrencies=suite.benchmark.concurrencies)
    assert report.concurrencies == (1, 2)
    assert all(level.metrics["requests_successful"] >= 1 for level in report.levels)
    assert all(level.metrics["requests_errored"] == 0 for level in report.levels)
    assert "sample_size=0" in outcome.commands["benchmark"][0]
    levels = json.loads(outcome.raw_report)["benchmarks"]
    assert [level["config"]["sample_size"] for level in levels] == [0, 0]
    requests = [request for level in levels for request in level["requests"]["successful"]]
    assert requests and all(r["request_latency"] > 0 and r["output_tokens"] > 0 for r in requests)
    assert all(r["request_args"] is None and r["output"] is None for r in requests)

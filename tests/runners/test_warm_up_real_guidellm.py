"""The real guidellm 0.8.1 against a server whose first token comes later than one benchmark level lasts.

The server is a double (`fake_vllm_server.py`, its name says so): a real HTTP server that streams
completions like vLLM and makes its very first request wait 12 s, as a real server paying its one-time
costs on a busy node did; the tiny suite's levels last 8 s. guidellm's environment and the tokenizer are
the real cached ones (built on first use, about two minutes).
"""

from pathlib import Path

import pytest

from runners.envs import cache_dir_resolve
from runners.guidellm_report import report_parse
from runners.install import env_python_resolve, guidellm_env_ensure, vllm_recipe
from runners.pipeline import benchmark_execute
from runners.suites import suite_get
from runners.tiny_model import tiny_model_ensure, tiny_model_name
from tests.runners.conftest import RUNNER_FIXTURES
from tests.runners.test_pipeline import SHA, fake_env_install

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

FIRST_TOKEN_DELAY_S = 12


@pytest.fixture
def cache_with_real_guidellm(tmp_path) -> Path:
    """A cache whose guidellm environment and tiny model are the real ones and whose vLLM is the double."""
    real = cache_dir_resolve()
    guidellm = guidellm_env_ensure(cache_dir=real, log_path=tmp_path / "guidellm-install.log", timeout_s=1800)
    model = real / "models" / tiny_model_name()
    tiny_model_ensure(python=guidellm.executable(name="python"), directory=model, log_path=tmp_path / "m.log")
    cache = tmp_path / "cache"
    (cache / "envs").mkdir(parents=True)
    (cache / "envs" / guidellm.path.name).symlink_to(guidellm.path)
    (cache / "models").mkdir()
    (cache / "models" / model.name).symlink_to(model)
    suite = suite_get(name="tiny-llama-cpu")
    fake_env_install(
        cache_dir=cache,
        recipe=vllm_recipe(install=suite.install, commit_sha=SHA, python=env_python_resolve()),
        executables={"vllm": RUNNER_FIXTURES / "fake_vllm_server.py"},
    )
    return cache


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

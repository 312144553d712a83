"""The tiny Llama is made offline, loads as a Hugging Face tokenizer, and is made only once.

Its tokenizer is trained with `tokenizers`, which lives in the guidellm environment (built if missing).
"""

import json
import subprocess

import pytest

from runners.envs import cache_dir_resolve
from runners.install import guidellm_env_ensure
from runners.tiny_model import CONFIG, VOCAB_SIZE, tiny_model_ensure

CHECK = """\
import json, sys
from transformers import AutoConfig, AutoTokenizer, PreTrainedTokenizerFast
tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])
config = AutoConfig.from_pretrained(sys.argv[1])
messages = [{"role": "user", "content": "hi"}]
chat = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
print(json.dumps({
    "fast": isinstance(tokenizer, PreTrainedTokenizerFast),
    "vocab": len(tokenizer),
    "ids": tokenizer("def main(): return 0")["input_ids"],
    "decoded": tokenizer.decode(tokenizer("def main(): return 0")["input_ids"]),
    "chat": chat,
    "model_type": config.model_type,
    "kv_heads": config.num_key_value_heads,
}))
"""


@pytest.mark.e2e
@pytest.mark.timeout(900)
def test_tiny_model_loads_as_a_llama_with_a_chat_template_and_is_made_once(tmp_path):
    cache = cache_dir_resolve()
    client = guidellm_env_ensure(cache_dir=cache, log_path=cache / "logs" / "guidellm-env.log", timeout_s=900)
    python = client.executable(name="python")
    directory = tmp_path / "tiny-llama"

    tiny_model_ensure(python=python, directory=directory, log_path=tmp_path / "model.log")
    made = {path.name: path.stat().st_mtime_ns for path in directory.iterdir()}
    tiny_model_ensure(python=python, directory=directory, log_path=tmp_path / "again.log")

    assert {path.name: path.stat().st_mtime_ns for path in directory.iterdir()} == made
    assert not (tmp_path / "again.log").exists()
    assert json.loads((directory / "config.json").read_text()) == CONFIG
    result = json.loads(
        subprocess.run(
            [str(python), "-c", CHECK, str(directory)],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        ).stdout
    )
    assert result["fast"]
    assert result["vocab"] == VOCAB_SIZE
    assert result["decoded"] == "def main(): return 0"
    assert len(result["ids"]) < len("def main(): return 0")
    assert result["chat"] == "<|user|>\nhi</s>\n<|assistant|>\n"
    assert (result["model_type"], result["kv_heads"]) == ("llama", 2)

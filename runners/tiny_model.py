"""A tiny Llama with no weights: config.json plus a byte-level BPE tokenizer trained offline.

`vllm serve DIR --load-format dummy` needs nothing else, so the whole serving path runs without a model
hub. Training needs the `tokenizers` library, which lives in the guidellm and vLLM environments, not in
the web app's: run it there as `<env>/bin/python -m runners.tiny_model DIR`, or call
`tiny_model_ensure` which does exactly that.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import sysconfig
import uuid
from collections.abc import Iterator
from pathlib import Path

from runners.process import command_run

REPOSITORY_ROOT = Path(__file__).resolve().parent.parent
VOCAB_SIZE = 8192
BOS_TOKEN, EOS_TOKEN, PAD_TOKEN = "<s>", "</s>", "<pad>"
# Enough text for 8192 merges; more only slows training down.
TRAINING_TEXT_BYTES = 6_000_000

CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": VOCAB_SIZE,
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "hidden_act": "silu",
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "initializer_range": 0.02,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "bos_token_id": 0,
    "eos_token_id": 1,
    "pad_token_id": 2,
    "use_cache": True,
}

CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}" + EOS_TOKEN + "\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)

TOKENIZER_CONFIG = {
    "tokenizer_class": "PreTrainedTokenizerFast",
    "bos_token": BOS_TOKEN,
    "eos_token": EOS_TOKEN,
    "pad_token": PAD_TOKEN,
    # No BOS added: guidellm's prompt_tokens then equals what the server counts.
    "add_bos_token": False,
    "add_eos_token": False,
    "model_max_length": 4096,
    "chat_template": CHAT_TEMPLATE,
    "clean_up_tokenization_spaces": False,
}


def tiny_model_name() -> str:
    """A directory name that changes whenever the model's definition does, so a cache never serves an
    older tiny model under the same name."""
    definition = json.dumps([CONFIG, TOKENIZER_CONFIG, VOCAB_SIZE, TRAINING_TEXT_BYTES], sort_keys=True)
    return f"tiny-llama-{hashlib.sha256(definition.encode()).hexdigest()[:10]}"


MODEL_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def _training_text() -> Iterator[str]:
    """The standard library's own sources, in a fixed order so that every machine trains the same."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    taken = 0
    for path in sorted(stdlib.glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        yield text
        taken += len(text)
        if taken >= TRAINING_TEXT_BYTES:
            return


def _tokenizer_train(*, path: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=[BOS_TOKEN, EOS_TOKEN, PAD_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_training_text(), trainer=trainer)
    tokenizer.save(str(path))


def _complete(directory: Path) -> bool:
    return all((directory / name).is_file() for name in MODEL_FILES)


def tiny_model_create(*, directory: Path) -> Path:
    """Make the tiny model in `directory` unless it is already complete; return `directory`.

    Built beside the target and renamed into place, so a directory that exists is always complete.
    """
    if _complete(directory):
        return directory
    directory.parent.mkdir(parents=True, exist_ok=True)
    building = directory.parent / f".{directory.name}.{uuid.uuid4().hex[:8]}"
    building.mkdir()
    try:
        _tokenizer_train(path=building / "tokenizer.json")
        (building / "config.json").write_text(json.dumps(CONFIG, indent=2))
        (building / "tokenizer_config.json").write_text(json.dumps(TOKENIZER_CONFIG, indent=2))
        (building / "special_tokens_map.json").write_text(
            json.dumps({"bos_token": BOS_TOKEN, "eos_token": EOS_TOKEN, "pad_token": PAD_TOKEN}, indent=2)
        )
        if directory.exists():
            # An incomplete leftover (made by hand or by an older layout): never reuse it.
            shutil.rmtree(directory)
        building.rename(directory)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return directory


def tiny_model_ensure(*, python: Path, directory: Path, log_path: Path, timeout_s: float = 300) -> Path:
    """Make the tiny model with another environment's interpreter (one that has `tokenizers`)."""
    if _complete(directory):
        return directory
    command_run(
        argv=(str(python), "-m", "runners.tiny_model", str(directory)),
        log_path=log_path,
        timeout_s=timeout_s,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPOSITORY_ROOT)},
    )
    return directory


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m runners.tiny_model DIRECTORY")
    print(tiny_model_create(directory=Path(sys.argv[1])))

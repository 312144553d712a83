"""Accuracy against the benchmarked server: a speed-up that changes answers is not a speed-up.

Two kinds of task, both through the server's OpenAI-compatible endpoint:

- a question/answer JSONL file (`{"question": ..., "answer": ...}` per line) scored by exact match,
  sent by this module itself (standard library only, every request with a timeout);
- an lm-evaluation-harness task such as GSM8K, run by its `lm_eval` command from its own environment;
  its results file is read here.

The score is a percentage of the samples with a 95 % Wilson interval.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from runners.errors import RunnerError

ACCURACY_DIR = Path(__file__).resolve().parent / "accuracy"
# lm-eval's GSM8K reports two filters; strict-match needs the "#### <number>" answer format.
LM_EVAL_FILTER = "strict-match"
Z_95 = 1.959963984540054
REQUEST_TIMEOUT_S = 120.0
# The slowest decode an answer may have per stream (tokens/s), for the request timeout of long answers.
MIN_DECODE_TOK_S = 20.0


class AccuracyFailed(RunnerError):
    """The accuracy task could not produce a score; the message says why in one line."""


@dataclass(frozen=True)
class QaItem:
    question: str
    answer: str


@dataclass(frozen=True)
class AccuracyResult:
    """`correct` of `samples` answers right; `score_pct` with its 95 % interval in percent."""

    name: str
    correct: float
    samples: int
    ci_low_pct: float
    ci_high_pct: float

    @property
    def metric(self) -> str:
        return f"accuracy_{self.name}"

    @property
    def score_pct(self) -> float:
        return 100.0 * self.correct / self.samples


def wilson_interval_pct(*, correct: float, samples: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a proportion, in percent; well-behaved at 0 % and 100 %."""
    if samples <= 0:
        raise ValueError("an interval needs at least one sample")
    share = correct / samples
    denominator = 1 + z * z / samples
    centre = (share + z * z / (2 * samples)) / denominator
    half = z * math.sqrt(share * (1 - share) / samples + z * z / (4 * samples * samples)) / denominator
    return 100.0 * max(0.0, centre - half), 100.0 * min(1.0, centre + half)


def accuracy_result(*, name: str, correct: float, samples: int) -> AccuracyResult:
    low, high = wilson_interval_pct(correct=correct, samples=samples)
    return AccuracyResult(name=name, correct=correct, samples=samples, ci_low_pct=low, ci_high_pct=high)


def qa_items_load(*, path: Path) -> tuple[QaItem, ...]:
    """The items of a question/answer JSONL file; AccuracyFailed names the first bad line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise AccuracyFailed(f"{path}: cannot be read: {exc.strerror}") from exc
    items = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            items.append(QaItem(question=str(record["question"]), answer=str(record["answer"])))
        except (json.JSONDecodeError, KeyError, TypeError):
            raise AccuracyFailed(f'{path}:{number}: expected {{"question": ..., "answer": ...}}') from None
    if not items:
        raise AccuracyFailed(f"{path}: no questions")
    return tuple(items)


_SPACES = re.compile(r"\s+")


def answer_normalize(text: str) -> str:
    """What exact match compares: the first line, lower case, single spaces, no closing punctuation."""
    first_line = text.strip().split("\n", 1)[0] if text.strip() else ""
    return _SPACES.sub(" ", first_line).strip().rstrip(".!?,;:").strip().lower()


def qa_prompt(question: str) -> str:
    return f"Question: {question}\nAnswer:"


def _completion(*, base_url: str, model: str, prompt: str, max_tokens: int, timeout_s: float) -> str:
    body = json.dumps(
        {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stop": ["\n"]}
    ).encode()
    request = urllib.request.Request(
        f"{base_url}/v1/completions", data=body, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            document = json.loads(response.read())
    except (urllib.error.URLError, TimeoutError, json.JSONDecodeError) as exc:
        raise AccuracyFailed(f"a completion request to {base_url} failed: {exc}") from exc
    try:
        return str(document["choices"][0]["text"])
    except (KeyError, IndexError, TypeError):
        raise AccuracyFailed(f"{base_url} answered a completion without choices[0].text") from None


def qa_accuracy_run(
    *,
    name: str,
    items: Sequence[QaItem],
    base_url: str,
    model: str,
    max_tokens: int,
    num_concurrent: int,
    timeout_s: float,
    cancel: threading.Event | None = None,
) -> AccuracyResult:
    """Ask every question (greedy, one line) and score the answers by exact match."""
    deadline = time.monotonic() + timeout_s

    def answer(item: QaItem) -> bool:
        remaining_s = deadline - time.monotonic()
        if remaining_s <= 0 or (cancel is not None and cancel.is_set()):
            raise AccuracyFailed(f"stopped after {timeout_s:.0f} s or cancelled before every answer came")
        text = _completion(
            base_url=base_url,
            model=model,
            prompt=qa_prompt(item.question),
            max_tokens=max_tokens,
            timeout_s=min(REQUEST_TIMEOUT_S, remaining_s),
        )
        return answer_normalize(text) == answer_normalize(item.answer)

    with ThreadPoolExecutor(max_workers=num_concurrent) as pool:
        verdicts = list(pool.map(answer, items))
    return accuracy_result(name=name, correct=float(sum(verdicts)), samples=len(verdicts))


def lm_eval_argv(
    *,
    lm_eval: Path,
    task: str,
    base_url: str,
    model: str,
    tokenizer: str,
    output_path: Path,
    num_concurrent: int,
    limit: int | None,
    seed: int,
    max_gen_toks: int,
) -> tuple[str, ...]:
    """`lm_eval run` of `task` through the server's chat completions endpoint, few-shot examples as
    turns of the conversation (how chat models are scored on GSM8K). `max_gen_toks` bounds each answer:
    a reasoning model thinks for thousands of tokens before it answers, so it needs room for both, and
    each request gets the time to generate them."""
    timeout_s = max(REQUEST_TIMEOUT_S, max_gen_toks / MIN_DECODE_TOK_S)
    model_args = ",".join(
        (
            f"model={model}",
            f"base_url={base_url}/v1/chat/completions",
            f"tokenizer={tokenizer}",
            f"num_concurrent={num_concurrent}",
            "max_retries=3",
            "tokenized_requests=False",
            f"timeout={timeout_s:.0f}",
        )
    )
    return (
        str(lm_eval),
        "run",
        "--model",
        "local-chat-completions",
        "--model_args",
        model_args,
        "--tasks",
        task,
        "--apply_chat_template",
        "--fewshot_as_multiturn",
        "--batch_size",
        "1",
        "--gen_kwargs",
        f"max_gen_toks={max_gen_toks}",
        "--seed",
        str(seed),
        "--output_path",
        str(output_path),
        *(("--limit", str(limit)) if limit is not None else ()),
    )


def lm_eval_results_read(*, output_dir: Path, name: str, task: str) -> AccuracyResult:
    """The score of `task` from the newest results_*.json that lm_eval wrote under `output_dir`."""
    files = sorted(output_dir.rglob("results_*.json"), key=lambda path: path.stat().st_mtime)
    if not files:
        raise AccuracyFailed(f"lm_eval wrote no results file under {output_dir}")
    return lm_eval_results_parse(raw=files[-1].read_bytes(), name=name, task=task)


def lm_eval_results_parse(*, raw: bytes, name: str, task: str) -> AccuracyResult:
    """`results.<task>["exact_match,strict-match"]` (a fraction) of `n-samples.<task>.effective`."""
    try:
        document = json.loads(raw)
        share = float(document["results"][task][f"exact_match,{LM_EVAL_FILTER}"])
        samples = int(document["n-samples"][task]["effective"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise AccuracyFailed(
            f"lm_eval results have no exact_match,{LM_EVAL_FILTER} of {task}: {exc}"
        ) from None
    if samples <= 0 or not 0.0 <= share <= 1.0:
        raise AccuracyFailed(f"lm_eval results of {task} are out of range ({share} of {samples})")
    return accuracy_result(name=name, correct=share * samples, samples=samples)

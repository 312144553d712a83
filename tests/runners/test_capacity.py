"""Capacity from a load curve: the highest load meeting every objective, interpolated between levels."""

import pytest

from runners.capacity import CurvePoint, capacity_derive
from runners.suites import ObjectiveSpec

TTFT_P99_2S = ObjectiveSpec(metric="ttft_ms_p99", max=2000)
ITL_P99_50MS = ObjectiveSpec(metric="itl_ms_p99", max=50)


def level(label, *, req_s, tok_s, ttft_p99, itl_p99, goodput=None):
    metrics = {
        "request_throughput_req_s": req_s,
        "output_throughput_tok_s": tok_s,
        "ttft_ms_p99": ttft_p99,
        "itl_ms_p99": itl_p99,
    }
    if goodput is not None:
        metrics["goodput_req_s"] = goodput
    return CurvePoint(label=label, metrics=metrics)


CURVE = [
    level("synchronous", req_s=1.0, tok_s=100.0, ttft_p99=500, itl_p99=20, goodput=1.0),
    level("constant 2.00 req/s", req_s=2.0, tok_s=200.0, ttft_p99=1000, itl_p99=30, goodput=2.0),
    level("constant 3.00 req/s", req_s=3.0, tok_s=280.0, ttft_p99=3000, itl_p99=40, goodput=1.5),
    level("throughput", req_s=3.5, tok_s=300.0, ttft_p99=9000, itl_p99=80, goodput=0.5),
]


def test_capacity_is_interpolated_where_the_broken_objective_reaches_its_limit():
    capacity = capacity_derive(curve=CURVE, objectives=[TTFT_P99_2S, ITL_P99_50MS])

    assert capacity is not None
    # TTFT p99 goes 1000 -> 3000 ms between 2 and 3 req/s: 2000 ms is halfway.
    assert capacity.capacity_req_s == pytest.approx(2.5)
    assert capacity.capacity_output_tok_s == pytest.approx(240.0)
    assert capacity.goodput_req_s == pytest.approx(1.75)
    assert capacity.breaking_level == "constant 3.00 req/s"
    assert capacity.breaking_load_req_s == 3.0
    assert capacity.broken_objectives == ("ttft_ms_p99",)
    assert capacity.bounded


def test_a_changed_objective_changes_capacity_from_the_same_levels():
    loose = capacity_derive(curve=CURVE, objectives=[ObjectiveSpec(metric="ttft_ms_p99", max=6000)])
    tight = capacity_derive(curve=CURVE, objectives=[ObjectiveSpec(metric="itl_ms_p99", max=25)])

    assert loose is not None and tight is not None
    assert loose.capacity_req_s == pytest.approx(3.25)
    assert loose.breaking_level == "throughput"
    assert tight.capacity_req_s == pytest.approx(1.5)
    assert tight.breaking_level == "constant 2.00 req/s"


def test_levels_are_taken_in_order_of_achieved_load_not_report_order():
    shuffled = [CURVE[3], CURVE[0], CURVE[2], CURVE[1]]
    capacity = capacity_derive(curve=shuffled, objectives=[TTFT_P99_2S])
    assert capacity is not None and capacity.capacity_req_s == pytest.approx(2.5)


def test_the_earliest_objective_to_break_between_two_levels_decides():
    curve = [
        level("a", req_s=1.0, tok_s=10.0, ttft_p99=1000, itl_p99=40),
        level("b", req_s=2.0, tok_s=20.0, ttft_p99=3000, itl_p99=60),
    ]
    capacity = capacity_derive(curve=curve, objectives=[TTFT_P99_2S, ITL_P99_50MS])

    assert capacity is not None
    # TTFT reaches 2000 ms halfway, ITL reaches 50 ms halfway too; both broke at b.
    assert capacity.capacity_req_s == pytest.approx(1.5)
    assert capacity.broken_objectives == ("ttft_ms_p99", "itl_ms_p99")


def test_a_curve_that_never_breaks_gives_its_highest_load_as_a_lower_bound():
    capacity = capacity_derive(curve=CURVE, objectives=[ObjectiveSpec(metric="ttft_ms_p99", max=10_000)])

    assert capacity is not None
    assert capacity.capacity_req_s == 3.5
    assert capacity.breaking_level is None
    assert not capacity.bounded


def test_a_curve_broken_at_its_lowest_level_has_no_capacity():
    capacity = capacity_derive(curve=CURVE, objectives=[ObjectiveSpec(metric="ttft_ms_p99", max=100)])

    assert capacity is not None
    assert capacity.capacity_req_s == 0.0
    assert capacity.goodput_req_s == 0.0
    assert capacity.breaking_level == "synchronous"


def test_without_objectives_there_is_no_capacity():
    assert capacity_derive(curve=CURVE, objectives=[]) is None


def test_goodput_is_absent_when_guidellm_did_not_judge_objectives():
    curve = [
        level("a", req_s=1.0, tok_s=10.0, ttft_p99=1000, itl_p99=10),
        level("b", req_s=2.0, tok_s=20.0, ttft_p99=3000, itl_p99=10),
    ]
    capacity = capacity_derive(curve=curve, objectives=[TTFT_P99_2S])
    assert capacity is not None
    assert capacity.goodput_req_s is None
    assert set(capacity.measurements()) == {"capacity_req_s", "capacity_output_tok_s"}

"""Strict scores on hand-made outcomes: what counts as true, exact, unfinished and covered."""

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from lab.scores import (
    GroupSeries,
    MissedInterval,
    NotifiedGroup,
    Outcome,
    ShownInterval,
    TrueStep,
    moves_inside,
    quantile,
    scores_compute,
)

T0 = datetime(2026, 9, 7, tzinfo=UTC)
THROUGHPUT, TTFT = "output_throughput_tok_s", "ttft_ms_mean"


def _step(index: int, moves: dict, noise_multiple: float = 5.0, span: int = 1) -> TrueStep:
    return TrueStep(
        suite="s",
        commit_index=index,
        moves=moves,
        noise_multiple=noise_multiple,
        merged_at=T0 + timedelta(hours=index),
        span=span,
    )


def _group(
    group_id: int, base: int, head: int, *series: GroupSeries, hours: float | None = None
) -> NotifiedGroup:
    return NotifiedGroup(
        group_id=group_id,
        series=series,
        base=base,
        head=head,
        judged_base=base if hours is None else base - 5,
        judged_head=head,
        culprit_at=None if hours is None else T0 + timedelta(hours=hours),
    )


def _down(metric: str = THROUGHPUT, concurrency: int = 16, minimum: float = 0.02) -> GroupSeries:
    return GroupSeries(
        suite="s", concurrency=concurrency, metric=metric, direction=-1, min_relative_change=minimum
    )


def test_a_tiny_outcome_is_scored_strictly_and_unfinished_steps_are_infinite() -> None:
    steps = (
        _step(10, {(16, THROUGHPUT): 0.90}),  # named exactly, 4 h after its merge at hour 10
        _step(30, {(1, TTFT): 1.10}),  # its group holds it but is still a range: unfinished
        _step(60, {(16, THROUGHPUT): 0.99}, noise_multiple=0.8),  # below 2x the noise: not in the hours
        _step(80, {(16, THROUGHPUT): 0.95}),  # never detected: unfinished
    )
    notified = (
        _group(1, 9, 10, _down(), hours=14),
        _group(2, 25, 35, GroupSeries("s", 1, TTFT, 1, 0.03)),
        # Holds step 60 but that step moves throughput by 1 %, under the 2 % minimum: false.
        _group(3, 59, 60, _down(), hours=70),
        # Holds step 10's commit range but in the wrong direction (an improvement of throughput): false.
        _group(4, 5, 12, GroupSeries("s", 16, THROUGHPUT, 1, 0.02)),
    )
    scores = scores_compute(Outcome(steps=steps, notified=notified, intervals=(), runs=40, gpu_hours=320.0))
    result = scores.json()

    assert result["steps"] == 4
    assert result["steps_2x"] == 3
    assert result["exact_pct"] == round(100 / 3, 1)
    assert result["false_notified_pct"] == 50.0
    assert result["unfinished_pct"] == round(200 / 3, 1)
    assert result["hours_median"] is None  # 1 of 3 found: the median is an unfinished one, infinite
    assert result["hours_p90"] is None
    assert [score.hours for score in scores.significant] == [4.0, math.inf, math.inf]
    assert result["gpu_hours_per_culprit"] == 320.0  # one culprit named exactly


def test_the_hours_of_a_step_named_exactly_are_split_into_its_phases() -> None:
    # Merged at hour 10, first measured at 11, suspected at 13, confirmed at 16, named at 19; a second
    # step merged at hour 40 is named by a group whose times are unknown but its culprit's.
    steps = (_step(10, {(16, THROUGHPUT): 0.90}), _step(40, {(16, THROUGHPUT): 0.90}))
    timed = replace(
        _group(1, 9, 10, _down(), hours=19),
        suspected_at=T0 + timedelta(hours=13),
        confirmed_at=T0 + timedelta(hours=16),
    )
    untimed = _group(2, 39, 40, _down(), hours=42)
    scores = scores_compute(
        Outcome(
            steps=steps,
            notified=(timed, untimed),
            intervals=(),
            runs=10,
            gpu_hours=80.0,
            measured_at={("s", 10): T0 + timedelta(hours=11)},
        )
    )

    assert [score.phases for score in scores.steps] == [(1.0, 3.0, 6.0, 9.0), (None, None, None, 2.0)]
    assert scores.phase_medians() == {"measured": 1.0, "suspected": 3.0, "confirmed": 6.0, "culprit": 2.0}
    assert scores.json()["hours_to_confirmed_median"] == 6.0
    assert "exact after 9.0 h (measured 1.0, suspected 3.0, confirmed 6.0)" in scores.steps[0].line()


def test_a_culprit_on_another_commit_of_its_range_is_wrong_not_unfinished() -> None:
    steps = (_step(20, {(16, THROUGHPUT): 0.9}),)
    notified = (_group(1, 18, 19, _down(), hours=30),)  # judged on (13, 19]... only up to 19
    wrong = (
        NotifiedGroup(
            group_id=2,
            series=(_down(),),
            base=21,
            head=22,
            judged_base=15,
            judged_head=22,
            culprit_at=T0 + timedelta(hours=30),
        ),
    )
    scores = scores_compute(
        Outcome(steps=steps, notified=notified + wrong, intervals=(), runs=1, gpu_hours=8)
    )
    result = scores.json()
    assert result["exact_pct"] == 0.0
    assert result["unfinished_pct"] == 0.0  # named, wrongly
    assert scores.steps[0].named_wrongly
    assert result["false_notified_pct"] == 100.0
    assert result["gpu_hours_per_culprit"] is None  # no culprit: infinite


def test_a_gradual_change_is_exact_at_its_first_commit_only() -> None:
    steps = (_step(40, {(16, THROUGHPUT): 0.88}, span=3),)
    first = scores_compute(
        Outcome(
            steps=steps, notified=(_group(1, 39, 40, _down(), hours=45),), intervals=(), runs=1, gpu_hours=8
        )
    )
    second = scores_compute(
        Outcome(
            steps=steps, notified=(_group(1, 40, 41, _down(), hours=45),), intervals=(), runs=1, gpu_hours=8
        )
    )
    assert first.json()["exact_pct"] == 100.0
    assert second.json()["exact_pct"] == 0.0
    assert second.false_notified == 0  # a third of 12 % still moves throughput by 4 %: a true group
    assert math.isclose(moves_inside(steps[0], base=39, head=40)[(16, THROUGHPUT)], 0.88 ** (1 / 3))


def test_a_gradual_change_named_at_its_first_commit_counts_whole_even_when_each_commit_moves_little() -> None:
    # -5.4 % over three commits: -1.8 % each, below the 2 % minimum change, -5.4 % in all.
    steps = (_step(40, {(16, THROUGHPUT): 0.946}, span=3),)

    def scored(base: int, head: int):
        notified = (_group(1, base, head, _down(), hours=45),)
        return scores_compute(Outcome(steps=steps, notified=notified, intervals=(), runs=1, gpu_hours=8))

    first, later, wider = scored(39, 40), scored(40, 41), scored(39, 42)
    assert (first.json()["exact_pct"], first.false_notified) == (100.0, 0)
    # A later commit of it holds only its part, below the minimum: neither exact nor true.
    assert (later.json()["exact_pct"], later.false_notified) == (0.0, 1)
    # A range holding all three commits holds it whole.
    assert wider.false_notified == 0


def test_isolated_steps_are_eight_commits_from_any_other_of_their_suite() -> None:
    steps = (
        _step(10, {(16, THROUGHPUT): 0.9}),
        _step(17, {(16, THROUGHPUT): 1.1}),
        _step(40, {(1, TTFT): 1.1}),
    )
    notified = (
        _group(1, 9, 10, _down(), hours=12),
        _group(2, 39, 40, GroupSeries("s", 1, TTFT, 1, 0.03), hours=41),
    )
    scores = scores_compute(Outcome(steps=steps, notified=notified, intervals=(), runs=1, gpu_hours=8))
    assert [score.isolated for score in scores.steps] == [False, False, True]
    assert scores.json()["exact_isolated_pct"] == 100.0
    assert scores.json()["exact_pct"] == round(200 / 3, 1)


def test_interval_coverage_compares_each_shown_interval_with_the_true_change_of_its_range() -> None:
    steps = (_step(10, {(16, THROUGHPUT): 0.90}), _step(12, {(16, THROUGHPUT): 0.95}))

    def interval(base: int, head: int, low: float, high: float) -> ShownInterval:
        return ShownInterval("s", 16, THROUGHPUT, base, head, low, high)

    intervals = (
        interval(9, 10, -12.0, -8.0),  # truth -10 %: held
        interval(9, 12, -12.0, -8.0),  # truth 0.9 * 0.95 - 1 = -14.5 %: missed
        interval(20, 30, -1.0, 1.0),  # no step: truth 0, held
        interval(20, 30, 0.5, 3.0),  # no step, interval away from 0: missed
    )
    scores = scores_compute(Outcome(steps=steps, notified=(), intervals=intervals, runs=1, gpu_hours=8))
    assert scores.json()["interval_coverage_pct"] == 50.0
    # The misses are listed with the truth of their range, for `--steps`.
    assert [(missed.interval, round(missed.truth_pct, 2)) for missed in scores.missed_intervals] == [
        (intervals[1], -14.5),
        (intervals[3], 0.0),
    ]


def test_a_missed_interval_says_where_the_truth_lay() -> None:
    shown = ShownInterval("s", 16, THROUGHPUT, 9, 12, -12.0, -8.0, group_id=7)

    line = MissedInterval(interval=shown, truth_pct=-14.5).line()

    assert line == (
        f"missed interval: group #7 s c=16 {THROUGHPUT} (9, 12]: [-12.00, -8.00] %, truth -14.50 % "
        "(2.2 half-widths from its middle)"
    )


def test_quantiles_of_partly_infinite_hours() -> None:
    assert quantile([1.0, 2.0, 3.0, math.inf], 0.5) == 2.0
    assert quantile([1.0, 2.0, 3.0, math.inf], 0.9) == math.inf
    assert quantile([], 0.5) == math.inf

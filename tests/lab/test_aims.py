"""The aims table over several seeds: the exact-culprit aim is a median with a floor, every other aim holds
on every seed, and a missing (infinite) score fails the aim that needs it."""

from collections.abc import Mapping

from lab.aims import Scores, aims_judge, aims_table

GOOD = {
    "steps": 40,
    "steps_2x": 30,
    "exact_pct": 92.0,
    "exact_isolated_pct": 100.0,
    "false_notified_pct": 0.0,
    "unfinished_pct": 3.0,
    "hours_median": 6.0,
    "hours_p90": 20.0,
    "interval_coverage_pct": 95.0,
}


def _verdicts(scores: Mapping[int, Scores]) -> dict[str, bool]:
    return {result.aim.key: result.met for result in aims_judge(scores)}


def test_every_aim_is_met_when_every_seed_meets_it() -> None:
    assert all(_verdicts({1: GOOD, 2: GOOD, 3: GOOD}).values())


def test_the_exact_aim_is_the_median_over_the_seeds_with_a_floor() -> None:
    # One seed at 85 % leaves the median at 92 %: met. One at 79 % is below the floor: not met.
    assert _verdicts({1: {**GOOD, "exact_pct": 85.0}, 2: GOOD, 3: GOOD})["exact_pct"]
    assert not _verdicts({1: {**GOOD, "exact_pct": 79.0}, 2: GOOD, 3: GOOD})["exact_pct"]
    # Two of three at 88 % put the median below 90 %.
    assert not _verdicts({1: {**GOOD, "exact_pct": 88.0}, 2: {**GOOD, "exact_pct": 88.0}, 3: GOOD})[
        "exact_pct"
    ]


def test_one_seed_failing_fails_the_other_aims_and_infinite_hours_fail() -> None:
    verdicts = _verdicts({1: {**GOOD, "false_notified_pct": 2.5, "hours_p90": None}, 2: GOOD})
    assert not verdicts["false_notified_pct"] and not verdicts["hours_p90"]
    assert verdicts["hours_median"] and verdicts["unfinished_pct"]
    assert not _verdicts({1: {**GOOD, "interval_coverage_pct": 92.7}})["interval_coverage_pct"]
    assert not _verdicts({1: {**GOOD, "interval_coverage_pct": 97.5}})["interval_coverage_pct"]


def test_the_table_shows_each_seed_the_goal_and_the_verdict() -> None:
    table = aims_table({31: {**GOOD, "hours_p90": None}, 1: GOOD}, failed=["seed 11: stopped after 3600 s"])
    lines = table.splitlines()
    assert lines[0].split()[:5] == ["aim", "seed", "1", "seed", "31"]
    p90 = next(line for line in lines if line.startswith("merge -> culprit, p90"))
    assert "20.0" in p90 and "inf/none" in p90 and p90.endswith("NOT MET")
    assert "6 of 7 aims met over 2 seed(s)" in lines
    assert lines[-1] == "no scores: seed 11: stopped after 3600 s"


def _counted(exact: int, steps_2x: int, **counts: int) -> dict[str, object]:
    return {
        **GOOD,
        "steps_2x": steps_2x,
        "exact_pct": round(100 * exact / steps_2x, 1),
        "counts": {
            "exact": exact,
            "isolated": 10,
            "exact_isolated": 10,
            "unfinished": 1,
            "notified": 20,
            "false_notified": 0,
            "intervals": 100,
            "intervals_covering": 95,
            **counts,
        },
    }


def test_the_pooled_column_counts_every_seeds_steps_together_and_judges_nothing() -> None:
    # 27 of 30 and 9 of 10 exact: 36 of 40 pooled (90 %), not the mean of 90 % and 90 % by accident:
    # 28 of 30 and 6 of 10 pool to 34 of 40 (85 %), where the seeds' shares average 76.7 %.
    table = aims_table({1: _counted(28, 30), 2: _counted(6, 10, unfinished=3, false_notified=1)})
    lines = table.splitlines()
    assert lines[0].split()[:6] == ["aim", "seed", "1", "seed", "2", "pooled"]
    exact = next(line for line in lines if line.startswith("exact culprit, steps"))
    assert exact.split()[6:9] == ["93.3", "60.0", "85.0"]
    unfinished = next(line for line in lines if line.startswith("unfinished"))
    assert "10.0" in unfinished.split()  # 4 of 40
    false = next(line for line in lines if line.startswith("false notified"))
    assert "2.5" in false.split()  # 1 of 40 groups
    assert next(line for line in lines if line.startswith("steps >= 2x")).split()[5:] == [
        "30",
        "(40)",
        "10",
        "(40)",
        "40",
        "(80)",
    ]
    # The verdicts are the seeds' own: seed 2's 60 % fails the exact aim whatever the pooled figure.
    assert not _verdicts({1: _counted(28, 30), 2: _counted(6, 10)})["exact_pct"]


def test_the_pooled_column_is_blank_without_counts() -> None:
    exact = next(
        line for line in aims_table({1: GOOD}).splitlines() if line.startswith("exact culprit, steps")
    )
    assert exact.split()[6:9] == ["92.0", "median", ">="]


def test_the_pooled_hours_are_quantiles_over_every_seeds_steps_together() -> None:
    # Seed 1's steps take 1-9 h, seed 2's 10-19 h with one unfinished (None: infinite). Together, 20
    # steps: the median is the 10th (10.0 h), not the median of the seeds' medians (5.0 and 14.0); the
    # p90 is the 18th (18.0 h), though seed 2's own p90 is infinite.
    first = {**GOOD, "hours_median": 5.0, "hours_p90": 9.0, "step_hours": [float(h) for h in range(1, 10)]}
    second = {
        **GOOD,
        "hours_median": 14.0,
        "hours_p90": None,
        "step_hours": [float(h) for h in range(10, 20)] + [None],
    }
    lines = aims_table({1: first, 2: second}).splitlines()
    median = next(line for line in lines if line.startswith("merge -> culprit, median"))
    p90 = next(line for line in lines if line.startswith("merge -> culprit, p90"))
    assert median.split()[5:8] == ["5.0", "14.0", "10.0"]
    assert p90.split()[5:8] == ["9.0", "inf/none", "18.0"]
    # Where the unfinished steps reach the quantile, the pooled cell says so.
    third = {**GOOD, "hours_p90": None, "step_hours": [1.0, None, None, None]}
    p90 = next(
        line for line in aims_table({1: third}).splitlines() if line.startswith("merge -> culprit, p90")
    )
    assert p90.split()[5:7] == ["inf/none", "inf"]


def test_the_pooled_hours_are_blank_without_every_seeds_hours() -> None:
    with_hours = {**GOOD, "step_hours": [1.0, 2.0]}
    median = next(
        line
        for line in aims_table({1: with_hours, 2: GOOD}).splitlines()
        if line.startswith("merge -> culprit, median")
    )
    assert median.split()[5:8] == ["6.0", "6.0", "<="]

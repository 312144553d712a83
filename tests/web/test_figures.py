"""Figure building, decimation and metric presentation: pure functions, no database."""

import math
from datetime import UTC, date, datetime

import numpy as np
import pytest

from dashboard.benchmarks.columns import CommitFacts, SeriesColumns, commit_values
from dashboard.benchmarks.metrics import metric_display
from dashboard.benchmarks.overview_selectors import SparklineSeries
from dashboard.benchmarks.statistics import commit_value
from dashboard.web.decimation import decimate_minmax
from dashboard.web.figures import (
    MARKERS_UP_TO_POINTS,
    concurrency_color,
    day_ticks,
    series_thin,
    sparkline_shape,
    timeline_figure,
    typed_array,
)
from tests.web.chart_data import column


def _columns(
    metric: str, concurrency: int, xs: list[float], values: list[float] | None = None
) -> SeriesColumns:
    count = len(xs)
    return SeriesColumns(
        metric=metric,
        concurrency=concurrency,
        commit_ids=np.array([int(x) + 1 for x in xs], dtype=np.int64),
        x=np.array(xs, dtype=np.float64),
        values=np.array(values or [100.0] * count, dtype=np.float64),
        runs=np.ones(count, dtype=np.int64),
        lowest=np.array(values or [100.0] * count, dtype=np.float64),
        highest=np.array(values or [100.0] * count, dtype=np.float64),
    )


def _facts(xs: list[float]) -> dict[int, CommitFacts]:
    return {
        int(x) + 1: CommitFacts(
            sha=f"{int(x):08x}" + "ab" * 16,
            subject=f"Change {int(x)}",
            pr_number=None,
            committed_at=datetime(2026, 8, 1 + int(x), 12, tzinfo=UTC),
        )
        for x in xs
    }


def _figure(metric: str, series: list[SeriesColumns], *, by_position: bool = True) -> dict:
    xs = sorted({x for item in series for x in item.x.tolist()})
    return timeline_figure(
        metric=metric,
        drawn=series_thin(series, buckets=None),
        days=day_ticks([(x, date(2026, 8, 1 + int(x))) for x in xs]),
        by_position=by_position,
    )


def test_x_and_y_travel_as_typed_arrays_in_main_order() -> None:
    figure = _figure("ttft_ms_mean", [_columns("ttft_ms_mean", 1, [3, 4, 9], [1.5, 2.5, 3.5])])
    (trace,) = figure["data"]
    assert trace["x"]["dtype"] == "i4" and trace["y"]["dtype"] == "f4"
    assert (column(trace["x"]), column(trace["y"])) == ([3, 4, 9], [1.5, 2.5, 3.5])


def test_typed_array_keeps_whole_numbers_exact_and_others_as_float32() -> None:
    assert column(typed_array(np.array([0.0, 70000.0, -3.0]))) == [0, 70000, -3]
    assert column(typed_array(np.array([0.25, 1e9 + 0.5]))) == [0.25, pytest.approx(1e9, rel=1e-6)]


def test_levels_are_drawn_in_concurrency_order_with_the_ranked_axis_title() -> None:
    figure = _figure(
        "itl_ms_mean",
        [_columns("itl_ms_mean", 16, [1, 2]), _columns("itl_ms_mean", 1, [0, 2])],
        by_position=False,
    )
    assert [trace["name"] for trace in figure["data"]] == ["c=1", "c=16"]
    assert figure["layout"]["xaxis"]["title"]["text"] == "benchmarked commits, oldest → newest"


def test_day_ticks_are_the_first_commit_of_each_day_with_the_year_when_it_changes() -> None:
    ticks = day_ticks([(5.0, date(2026, 12, 31)), (3.0, date(2026, 12, 31)), (9.0, date(2027, 1, 1))])
    assert ticks == [(3.0, "Dec 31 2026"), (9.0, "Jan 1 2027")]


def test_day_ticks_label_the_axis() -> None:
    figure = _figure("tpot_ms_mean", [_columns("tpot_ms_mean", 1, [float(i) for i in range(20)])])
    assert len(figure["layout"]["xaxis"]["tickvals"]) == 8
    assert figure["layout"]["xaxis"]["ticktext"][0] == "Aug 1"
    assert len(figure["layout"]["meta"]["day_ticks"]) == 20


def test_a_level_keeps_its_colour_whatever_else_is_shown() -> None:
    assert len({concurrency_color(concurrency=level) for level in (1, 2, 4, 8, 16, 32, 64)}) == 7
    solo = _figure("ttft_ms_mean", [_columns("ttft_ms_mean", 16, [0])])
    assert solo["data"][0]["line"]["color"] == concurrency_color(concurrency=16)


def test_an_empty_chart_says_so() -> None:
    figure = _figure("ttft_ms_mean", [])
    assert figure["data"] == []
    assert figure["layout"]["annotations"][0]["text"] == "No measurements for these filters"


def test_markers_are_added_as_finished_traces() -> None:
    marker = {"type": "scatter", "x": [1], "y": [0.5], "meta": {"kind": "markers"}}
    figure = timeline_figure(
        metric="ttft_ms_mean",
        drawn=series_thin([_columns("ttft_ms_mean", 1, [0, 1])], buckets=None),
        days=[],
        by_position=True,
        markers=[marker],
    )
    assert figure["data"][-1] == marker
    assert figure["layout"]["yaxis2"]["overlaying"] == "y"


def test_sparkline_is_the_series_scaled_into_its_box_with_the_latest_point_marked() -> None:
    series = SparklineSeries("output_throughput_tok_s", 16, tuple(float(i) for i in range(5)))
    shape = sparkline_shape(series=series)
    points = [tuple(float(v) for v in pair.split(",")) for pair in shape.line.split()]
    assert [x for x, _ in points] == [0.0, 250.0, 500.0, 750.0, 1000.0]
    heights = [y for _, y in points]
    assert heights == sorted(heights, reverse=True)  # rising values climb the box (y grows downwards)
    assert 0 < heights[-1] < heights[0] < 72
    assert (shape.last_x, round(shape.last_y, 1)) == points[-1]
    assert shape.area.startswith("0,72 ") and shape.area.endswith(" 1000.0,72")


def test_a_commit_value_is_the_median_of_its_runs_with_their_range() -> None:
    groups = np.array([7, 3, 7, 7, 3], dtype=np.int64)
    values = np.array([10.0, 5.0, 40.0, 12.0, 7.0])
    keys, medians, counts, lowest, highest = commit_values(groups, values)
    assert keys.tolist() == [3, 7]
    assert medians.tolist() == [6.0, 12.0]
    assert counts.tolist() == [2, 3]
    assert (lowest.tolist(), highest.tolist()) == ([5.0, 10.0], [7.0, 40.0])


def test_the_columns_fold_repeats_by_the_same_rule_as_the_statistics_module() -> None:
    rng = np.random.default_rng(5)
    groups = rng.integers(0, 40, 300)
    values = rng.lognormal(4, 0.1, 300)
    keys, medians, counts, lowest, highest = commit_values(groups, values)
    for key, median, runs, spread in zip(keys, medians, counts, highest - lowest, strict=True):
        rule = commit_value(values[groups == key])
        assert (median, runs, spread) == (
            pytest.approx(rule.value),
            rule.runs,
            pytest.approx(rule.high - rule.low),
        )


def _steps(count: int, *, every: int, rng: np.random.Generator) -> np.ndarray:
    """A noisy series with a 5 % level shift every `every` points and one slow outlier."""
    levels = 100.0 * 1.05 ** (np.arange(count) // every)
    values = levels * (1 + rng.normal(0, 0.005, count))
    values[count // 3] *= 1.5
    return values


def test_decimation_keeps_every_point_when_they_fit() -> None:
    x = np.arange(100, dtype=np.float64)
    assert decimate_minmax(x, x, buckets=50).tolist() == list(range(100))


def test_decimation_keeps_each_buckets_extremes_so_no_step_or_outlier_disappears() -> None:
    rng = np.random.default_rng(7)
    x = np.arange(10_000, dtype=np.float64)
    y = _steps(10_000, every=700, rng=rng)

    kept = decimate_minmax(x, y, buckets=300)

    assert len(kept) <= 2 * 300 + 2
    assert (kept[0], kept[-1]) == (0, 9_999)
    assert np.all(np.diff(kept) > 0)
    assert 10_000 // 3 in kept  # the outlier
    thin_x, thin_y = x[kept], y[kept]
    for start in range(0, 10_000, 700):  # every level of the step series is drawn, at its place
        inside = thin_y[(thin_x >= start + 50) & (thin_x < start + 650)]
        assert len(inside) >= 5
        assert np.median(inside) == pytest.approx(100.0 * 1.05 ** (start // 700), rel=0.01)

    # Within each bucket, the drawn range is the series' whole range.
    def bucket_of(values: np.ndarray) -> np.ndarray:
        return np.minimum((values / 9_999 * 300).astype(int), 299)

    bucket, thin_bucket = bucket_of(x), bucket_of(thin_x)
    for index in range(300):
        assert thin_y[thin_bucket == index].max() == y[bucket == index].max()
        assert thin_y[thin_bucket == index].min() == y[bucket == index].min()


def test_decimation_over_a_zoomed_range_uses_that_range_for_its_buckets() -> None:
    x = np.arange(1_000, dtype=np.float64)
    y = np.sin(x)
    kept = decimate_minmax(x, y, buckets=10, x_range=(0.0, 100.0))
    # Everything right of the range falls in the last bucket: its two extremes and the last point.
    assert len([index for index in kept if x[index] >= 100]) <= 3


@pytest.mark.parametrize(
    ("metric", "label", "unit", "text", "higher_is_better"),
    [
        ("output_throughput_tok_s", "Output throughput", "tok/s", "1,234.6", True),
        ("ttft_ms_mean", "Time to first token (mean)", "ms", "1,234.6", False),
        ("latency_s_p99", "Request latency (p99)", "s", "1,234.57", False),
        ("itl_ms_p50", "Inter-token latency (p50)", "ms", "1,234.6", False),
        ("requests_errored", "Errored requests", "", "1,235", False),
        ("kv_cache_usage", "kv_cache_usage", "", "1,234.57", False),
    ],
)
def test_metric_reads_with_label_unit_precision_and_direction(
    metric, label, unit, text, higher_is_better
) -> None:
    display = metric_display(metric=metric)
    assert (display.label, display.unit, display.format(1234.5678), display.higher_is_better) == (
        label,
        unit,
        text,
        higher_is_better,
    )


def test_a_dense_line_is_drawn_without_a_marker_per_point_and_a_sparse_one_with_them() -> None:
    def mode(points: int) -> str:
        series = [_columns("ttft_ms_mean", 1, [float(x) for x in range(points)])]
        figure = timeline_figure(
            metric="ttft_ms_mean", drawn=series_thin(series, buckets=None), days=[], by_position=True
        )
        return figure["data"][0]["mode"]

    assert mode(MARKERS_UP_TO_POINTS) == "lines+markers"
    assert mode(MARKERS_UP_TO_POINTS + 1) == "lines"


def test_a_repeated_commit_has_a_bar_from_its_lowest_to_its_highest_run_and_a_single_run_none() -> None:
    series = SeriesColumns(
        metric="ttft_ms_mean",
        concurrency=1,
        commit_ids=np.array([1, 2], dtype=np.int64),
        x=np.array([0.0, 1.0]),
        values=np.array([104.0, 90.0]),
        runs=np.array([3, 1], dtype=np.int64),
        lowest=np.array([100.0, 90.0]),
        highest=np.array([130.0, 90.0]),
    )
    figure = timeline_figure(
        metric="ttft_ms_mean", drawn=series_thin([series], buckets=None), days=[], by_position=True
    )

    line, spread = figure["data"]
    # The bars are a trace of their own holding only the repeated commits.
    assert "error_y" not in line
    # One line broken after each bar: the commit's x twice, its lowest and highest run, a gap.
    x, y = column(spread["x"]), column(spread["y"])
    assert (x[:2], y[:2], spread["mode"]) == ([0.0, 0.0], [100.0, 130.0], "lines")
    assert len(x) == len(y) == 3 and math.isnan(x[2]) and math.isnan(y[2])
    assert (spread["meta"], spread["legendgroup"], spread["showlegend"]) == ({"kind": "spread"}, "c=1", False)
    assert line["legendgroup"] == "c=1"
    assert column(line["repeats"]["runs"]) == [3, 1]


def test_a_thinned_line_shows_no_spread_its_points_being_buckets_not_commits() -> None:
    count = 400
    series = SeriesColumns(
        metric="ttft_ms_mean",
        concurrency=1,
        commit_ids=np.arange(count, dtype=np.int64),
        x=np.arange(count, dtype=np.float64),
        values=100.0 + np.arange(count, dtype=np.float64) % 7,
        runs=np.where(np.arange(count) % 10 == 0, 2, 1),
        lowest=99.0 + np.arange(count, dtype=np.float64) % 7,
        highest=101.0 + np.arange(count, dtype=np.float64) % 7,
    )

    thinned = timeline_figure(
        metric="ttft_ms_mean", drawn=series_thin([series], buckets=50), days=[], by_position=True
    )
    whole = timeline_figure(
        metric="ttft_ms_mean", drawn=series_thin([series], buckets=None), days=[], by_position=True
    )

    (line,) = thinned["data"]
    assert "repeats" not in line
    assert [trace.get("meta") for trace in whole["data"]] == [None, {"kind": "spread"}]
    assert len(column(whole["data"][1]["x"])) == 3 * (count // 10)

"""Figure building and metric presentation: pure functions, no database."""

from datetime import UTC, datetime

import pytest

from dashboard.benchmarks.metrics import metric_display
from dashboard.benchmarks.selectors import TimelinePoint, TimelineSeries
from dashboard.web.figures import concurrency_color, sparkline_figure, timeline_figure


def _point(index: int, *, position: int | None, value: float = 100.0, runs: int = 1) -> TimelinePoint:
    return TimelinePoint(
        commit_sha=f"{index:08x}" + "ab" * 16,
        subject=f"Change {index} (#{50000 + index})",
        pr_number=50000 + index,
        committed_at=datetime(2026, 8, 1 + index, 12, tzinfo=UTC),
        position=position,
        value=value,
        runs=runs,
    )


def _url(sha: str) -> str:
    return f"/commits/{sha}/"


def test_x_is_the_position_on_main_so_unbenchmarked_commits_leave_gaps() -> None:
    series = [
        TimelineSeries("ttft_ms_mean", 1, tuple(_point(i, position=p) for i, p in enumerate((3, 4, 9))))
    ]
    figure = timeline_figure(metric="ttft_ms_mean", series=series, commit_url=_url)
    assert list(figure.data[0].x) == [3, 4, 9]


def test_x_falls_back_to_rank_when_a_point_has_no_position() -> None:
    points = (_point(0, position=10), _point(1, position=None), _point(2, position=12))
    series = [TimelineSeries("ttft_ms_mean", 1, points)]
    figure = timeline_figure(metric="ttft_ms_mean", series=series, commit_url=_url)
    # Known positions first, then the commit that has none yet (it is newest: only its sha is known).
    assert list(figure.data[0].x) == [0, 2, 1]
    assert figure.layout.xaxis.title.text == "benchmarked commits, oldest → newest"


def test_levels_share_one_x_per_commit_when_ranked() -> None:
    low = TimelineSeries("itl_ms_mean", 1, (_point(0, position=None), _point(2, position=None)))
    high = TimelineSeries("itl_ms_mean", 16, (_point(1, position=None), _point(2, position=None)))
    figure = timeline_figure(metric="itl_ms_mean", series=[high, low], commit_url=_url)
    assert [trace.name for trace in figure.data] == ["c=1", "c=16"]
    assert [list(trace.x) for trace in figure.data] == [[0, 2], [1, 2]]


def test_point_carries_its_commit_page_first_then_the_hover_facts() -> None:
    point = _point(0, position=1, runs=3)
    figure = timeline_figure(
        metric="output_throughput_tok_s",
        series=[TimelineSeries("output_throughput_tok_s", 4, (point,))],
        commit_url=_url,
    )
    assert list(figure.data[0].customdata[0]) == [
        f"/commits/{point.commit_sha}/",
        point.commit_sha[:8],
        "Change 0 (#50000)",
        "PR #50000",
        "2026-08-01 12:00 UTC",
        " · median of 3 runs",
    ]
    assert "%{y:,.1f} tok/s</b> at concurrency 4" in figure.data[0].hovertemplate


def test_day_ticks_label_the_axis_and_commit_ticks_wait_for_a_close_zoom() -> None:
    points = tuple(_point(i, position=i * 2) for i in range(20))
    figure = timeline_figure(
        metric="tpot_ms_mean", series=[TimelineSeries("tpot_ms_mean", 1, points)], commit_url=_url
    )
    assert len(figure.layout.xaxis.tickvals) == 8
    assert figure.layout.xaxis.ticktext[0] == "Aug 1"
    assert len(figure.layout.meta["day_ticks"]) == 20
    assert figure.layout.meta["commit_ticks"][1] == (2, points[1].commit_sha[:8])


def test_a_level_keeps_its_colour_whatever_else_is_shown() -> None:
    assert len({concurrency_color(concurrency=level) for level in (1, 2, 4, 8, 16, 32, 64)}) == 7
    solo = timeline_figure(
        metric="ttft_ms_mean",
        series=[TimelineSeries("ttft_ms_mean", 16, (_point(0, position=0),))],
        commit_url=_url,
    )
    assert solo.data[0].line.color == concurrency_color(concurrency=16)


def test_sparkline_marks_the_latest_point() -> None:
    series = TimelineSeries(
        "output_throughput_tok_s", 16, tuple(_point(i, position=i, value=i) for i in range(5))
    )
    figure = sparkline_figure(series=series, commit_url=_url)
    line, latest = figure.data
    assert list(line.y) == [0, 1, 2, 3, 4]
    assert (list(latest.x), list(latest.y)) == ([4], [4])
    assert latest.customdata[0][0] == f"/commits/{series.points[-1].commit_sha}/"


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

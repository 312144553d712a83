"""A group's page charts each metric family once per level: its statistics (mean, p50, p90, p99) are the
traces of one chart, named as every page names metrics, the ones that alerted drawn bold."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from typing import cast

import pytest
from django.db import transaction
from django.test import Client

from dashboard.benchmarks.metrics import metric_display
from dashboard.benchmarks.models import Commit, Series, Suite
from dashboard.regressions.detect.alert_groups import alert_upsert
from dashboard.regressions.figures import AXIS_TICKS
from dashboard.regressions.models import Alert, AlertGroup, AlertKind
from dashboard.regressions.selectors import alert_families, family_charts
from tests.factories import CommitFactory, SuiteFactory, run_with_values
from tests.regressions.conftest import noisy

pytestmark = pytest.mark.django_db

ITL = ("itl_ms_mean", "itl_ms_p50", "itl_ms_p90", "itl_ms_p99")
LENGTH, STEP_AT = 40, 20


@dataclass(frozen=True)
class FamilyWorld:
    suite: Suite
    commits: list[Commit]
    group: AlertGroup
    alerts: dict[tuple[int, str], Alert]


def family_world(*, alerted: dict[tuple[int, str], float]) -> FamilyWorld:
    """A suite with ITL's four statistics and TTFT p50 at c=1 and c=16 over LENGTH commits; the series in
    `alerted` ((concurrency, metric): change in %) step by that much at STEP_AT and carry an alert of one
    group there, the others stay flat."""
    suite = cast(Suite, SuiteFactory(name="kimi-k3-8k1k"))
    commits = [cast(Commit, CommitFactory()) for _ in range(LENGTH)]
    keys = [(concurrency, metric) for concurrency in (1, 16) for metric in (*ITL, "ttft_ms_p50")]
    level = {key: 20.0 + 4 * index for index, key in enumerate(keys)}
    for index, commit in enumerate(commits):
        values: dict[tuple[int, str], float] = {}
        for key in keys:
            after = 1 + alerted.get(key, 0.0) / 100 if index >= STEP_AT else 1.0
            values[key] = noisy(level[key] * after, index + len(values))
        run_with_values(commit=commit, suite=suite, values=values)
    alerts = {}
    for (concurrency, metric), change_pct in alerted.items():
        series = Series.objects.get(suite=suite, concurrency=concurrency, metric=metric)
        with transaction.atomic():  # as detection stores them; browser tests run without a transaction
            alerts[(concurrency, metric)], _ = alert_upsert(
                series=series,
                base_commit_id=commits[STEP_AT - 1].pk,
                head_commit_id=commits[STEP_AT].pk,
                kind=AlertKind.REGRESSION,
                before=level[(concurrency, metric)],
                after=level[(concurrency, metric)] * (1 + change_pct / 100),
                change_pct=change_pct,
                p_value=1e-9,
            )
    group = AlertGroup.objects.get()
    return FamilyWorld(suite=suite, commits=commits, group=group, alerts=alerts)


def _legend(figure: dict) -> list[dict]:
    """The traces of a figure that the legend lists, in the legend's order."""
    shown = [trace for trace in figure["data"] if trace.get("showlegend", True)]
    return sorted(shown, key=lambda trace: trace.get("legendrank", 1000))


def test_one_chart_holds_every_statistic_of_the_family_and_the_alerted_ones_are_bold() -> None:
    world = family_world(alerted={(16, "itl_ms_p50"): 9.0, (16, "itl_ms_p99"): 12.0})

    figure = Client().get(f"/api/alerts/{world.alerts[(16, 'itl_ms_p50')].pk}/figure/").json()

    legend = _legend(figure)
    # Every statistic of ITL at c=16, named by the display rule; not TTFT, not c=1.
    assert [trace["name"] for trace in legend] == [
        metric_display(metric=metric).short_label for metric in ITL
    ]
    assert [trace["name"] for trace in legend] == ["ITL mean", "ITL p50", "ITL p90", "ITL p99"]
    width = {trace["name"]: trace["line"]["width"] for trace in legend}
    opacity = {trace["name"]: trace["opacity"] for trace in legend}
    assert min(width["ITL p50"], width["ITL p99"]) > max(width["ITL mean"], width["ITL p90"])
    assert min(opacity["ITL p50"], opacity["ITL p99"]) > max(opacity["ITL mean"], opacity["ITL p90"])
    assert all(len(trace["x"]) == LENGTH for trace in legend)
    # The means before and after are drawn for the two that alerted, in their legend group.
    means = [trace for trace in figure["data"] if not trace.get("showlegend", True)]
    assert sorted(trace["legendgroup"] for trace in means) == sorted(["itl_ms_p50", "itl_ms_p99"] * 2)
    assert figure["layout"]["showlegend"] is True
    # The x axis reads date and short sha.
    ticks = figure["layout"]["xaxis"]["ticktext"]
    every = math.ceil(LENGTH / AXIS_TICKS)
    assert ticks == [f"{c.committed_at:%b %d}<br>{c.sha[:8]}" for c in world.commits[::every]]

    # Its download has every statistic's points.
    rows = list(
        csv.DictReader(
            io.StringIO(
                Client()
                .get(f"/api/alerts/{world.alerts[(16, 'itl_ms_p99')].pk}/figure/", {"format": "csv"})
                .content.decode()
            )
        )
    )
    assert {"ITL mean", "ITL p50", "ITL p90", "ITL p99"} <= {row["series"] for row in rows}


def test_the_group_page_draws_one_chart_per_family_and_level_with_each_change_named() -> None:
    world = family_world(
        alerted={
            (16, "itl_ms_p50"): 9.0,
            (16, "itl_ms_p99"): 12.0,
            (1, "itl_ms_p90"): 7.0,
            (16, "ttft_ms_p50"): 8.0,
        }
    )

    response = Client().get(f"/alerts/{world.group.pk}/")

    charts = [
        (chart.family.metric, chart.headline.series.concurrency) for chart, _ in response.context["charts"]
    ]
    # ITL first (its p99 moved most), its c=16 chart holding both of its changes, then c=1, then TTFT.
    assert charts == [("itl_ms", 16), ("itl_ms", 1), ("ttft_ms", 16)]
    html = response.content.decode()
    assert html.count('class="card chart-card family-chart"') == 3
    itl_16 = response.context["charts"][0][0]
    assert [statistic for statistic, _ in itl_16.changes] == ["p50", "p99"]
    assert f'data-figure-url="/api/alerts/{world.alerts[(16, "itl_ms_p99")].pk}/figure/"' in html
    assert "ITL (ms)" in html and 'data-statistic="p99"' in html
    # The summary keeps one line per family.
    assert html.count('<li class="family"') == 2


def _alert(*, concurrency: int, metric: str, change_pct: float) -> Alert:
    series = Series(suite_id=1, hardware_class="b300", concurrency=concurrency, metric=metric)
    return Alert(
        series=series, kind=AlertKind.REGRESSION, change_pct=change_pct, before_value=1, after_value=1
    )


def test_under_the_chart_limit_every_family_gets_its_largest_change_before_any_gets_a_second() -> None:
    alerts = [
        _alert(concurrency=concurrency, metric=metric, change_pct=change)
        for metric, changes in (
            ("itl_ms_p50", (9.0, 8.0, 7.0)),
            ("tpot_ms_p99", (6.0, 5.0)),
            ("latency_s_mean", (4.0,)),
        )
        for concurrency, change in zip((1, 4, 16), changes, strict=False)
    ]
    families = alert_families(alerts=alerts)

    charts = family_charts(families=families, limit=4)

    # Listed by family, each family's largest first; the fourth place goes to ITL's second.
    assert [(chart.family.metric, chart.headline.change_pct) for chart in charts] == [
        ("itl_ms", 9.0),
        ("itl_ms", 8.0),
        ("tpot_ms", 6.0),
        ("latency_s", 4.0),
    ]


def test_a_metric_key_names_its_family_and_statistic_by_the_one_display_rule() -> None:
    p99, mean, throughput = (
        metric_display(metric=key) for key in ("ttft_ms_p99", "ttft_ms_mean", "output_throughput_tok_s")
    )
    assert (p99.family, p99.statistic, p99.family_label, p99.short_label) == (
        "ttft_ms",
        "p99",
        "TTFT",
        "TTFT p99",
    )
    assert (mean.family, mean.statistic, mean.family_label) == ("ttft_ms", "mean", "TTFT")
    assert (throughput.family, throughput.statistic, throughput.family_label) == (
        "output_throughput_tok_s",
        "",
        "Throughput",
    )

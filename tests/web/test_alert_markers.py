"""Alert groups are drawn on the timelines, on the charts of the metrics they concern."""

from collections.abc import Iterator

import pytest
from django.test import Client

from dashboard.demo.history import DEMO_SUITE, REGRESSION_PR, demo_load
from dashboard.regressions.detect.alerts import suite_detect_history
from dashboard.regressions.models import AlertGroup
from tests.conftest import loaded_once

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def detected_demo(django_db_setup, django_db_blocker) -> Iterator[None]:
    with loaded_once(django_db_blocker):
        demo_load()
        suite_detect_history(suite_name=DEMO_SUITE)
        yield


def _alert_trace(client: Client, metric: str) -> dict:
    figure = client.get(f"/api/suites/{DEMO_SUITE}/figures/{metric}/").json()
    traces = [trace for trace in figure["data"] if trace.get("meta", {}).get("kind") == "alerts"]
    assert len(traces) == 1
    return traces[0]


def test_the_demo_regression_is_drawn_on_the_throughput_chart_and_opens_its_group(
    detected_demo, client
) -> None:
    regression = AlertGroup.objects.get(kind="regression")
    assert regression.head_commit.pr_number == REGRESSION_PR
    trace = _alert_trace(client, "output_throughput_tok_s")
    urls = [point[0] for point in trace["customdata"]]
    assert f"/alerts/{regression.pk}/" in urls
    assert trace["marker"]["color"][urls.index(f"/alerts/{regression.pk}/")] == "#dc2626"


def test_a_chart_only_shows_the_groups_of_its_own_metric(detected_demo, client) -> None:
    throughput_groups = set(
        AlertGroup.objects.filter(alerts__series__metric="output_throughput_tok_s").values_list(
            "pk", flat=True
        )
    )
    trace = _alert_trace(client, "output_throughput_tok_s")
    assert {int(point[0].strip("/").split("/")[-1]) for point in trace["customdata"]} == throughput_groups


def test_navigation_reaches_every_section(client) -> None:
    page = client.get("/").content.decode()
    for path in ("/alerts/", "/tracking/", "/compare/", "/runs/", "/runners/"):
        assert f'href="{path}"' in page


def test_a_marker_is_coloured_good_or_bad_and_points_the_way_the_metric_moved(detected_demo, client) -> None:
    regression = AlertGroup.objects.get(kind="regression")
    revert = AlertGroup.objects.get(head_commit__subject__startswith="Revert")
    trace = _alert_trace(client, "output_throughput_tok_s")
    urls = [point[0] for point in trace["customdata"]]
    drop, rise = urls.index(f"/alerts/{regression.pk}/"), urls.index(f"/alerts/{revert.pk}/")
    # Throughput fell with the regression (bad, down) and rose again with its revert (good, up).
    assert (trace["marker"]["color"][drop], trace["marker"]["symbol"][drop]) == ("#dc2626", "triangle-down")
    assert (trace["marker"]["color"][rise], trace["marker"]["symbol"][rise]) == ("#16a34a", "triangle-up")
    assert f"PR #{REGRESSION_PR}" in trace["customdata"][drop][1]
    # On a latency chart the same regression is a rise: still red, pointing up.
    latency = _alert_trace(client, "latency_s_mean")
    urls = [point[0] for point in latency["customdata"]]
    at = urls.index(f"/alerts/{regression.pk}/")
    assert (latency["marker"]["color"][at], latency["marker"]["symbol"][at]) == ("#dc2626", "triangle-up")


def test_a_marker_carries_the_label_of_its_pr(detected_demo, client) -> None:
    regression = AlertGroup.objects.get(kind="regression")
    trace = _alert_trace(client, "output_throughput_tok_s")
    labels = {point[0]: point[2] for point in trace["customdata"]}
    assert labels[f"/alerts/{regression.pk}/"] == f"#{REGRESSION_PR}"
    assert all(label.startswith("#") for label in labels.values())


def test_a_zoomed_timeline_reads_the_markers_of_its_window_only(detected_demo, client) -> None:
    from dashboard.benchmarks.models import Suite
    from dashboard.regressions.timeline import alert_markers_by_metric

    suite = Suite.objects.get(name=DEMO_SUITE)
    metrics = ["output_throughput_tok_s", "ttft_ms_mean"]
    every = alert_markers_by_metric(suite=suite, hardware_class=suite.hardware_class, metrics=metrics)
    heads = sorted(marker.position for found in every.values() for marker in found if marker.position)
    assert heads
    window = (heads[0], heads[0])

    zoomed = alert_markers_by_metric(
        suite=suite, hardware_class=suite.hardware_class, metrics=metrics, positions=window
    )

    for metric in metrics:
        inside = [marker for marker in every[metric] if marker.position == heads[0]]
        assert zoomed[metric] == inside
    assert sum(len(found) for found in zoomed.values()) < sum(len(found) for found in every.values())
    # The zoomed chart draws that window's markers, as the whole view drew them there.
    body = client.get(
        f"/api/suites/{DEMO_SUITE}/timeline/",
        {"hardware": suite.hardware_class, "x0": heads[0] - 1, "x1": heads[0] + 1, "width": 600},
    ).json()
    drawn = [
        trace
        for trace in body["figures"]["output_throughput_tok_s"]["data"]
        if trace.get("meta", {}).get("kind") == "alerts"
    ]
    assert [point[0] for trace in drawn for point in trace["customdata"]] == [
        marker.url for marker in every["output_throughput_tok_s"] if marker.position == heads[0]
    ]

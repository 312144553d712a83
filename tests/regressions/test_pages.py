"""The alerts page and its feed, a group's page with its charts, detector precision, timeline markers."""

from __future__ import annotations

from typing import cast
from xml.etree import ElementTree

import pytest
from django.test import Client

from dashboard.benchmarks.models import Commit, Series, Suite
from dashboard.github.models import PullRequest
from dashboard.regressions.detect.alert_groups import alert_upsert
from dashboard.regressions.detect.alerts import suite_detect_history
from dashboard.regressions.models import Alert, AlertGroup, AlertKind, GroupKind, GroupState, TriageStatus
from dashboard.regressions.timeline import alert_markers
from tests.factories import CommitFactory, SeriesFactory
from tests.regressions.conftest import suite_create
from tests.regressions.test_alerts import THROUGHPUT, TTFT, step

pytestmark = pytest.mark.django_db


def group_create(
    *,
    suite: Suite,
    change_pct: float,
    metric: str = THROUGHPUT,
    hardware_class: str = "b300",
    status: str = TriageStatus.UNTRIAGED,
    commits: tuple[Commit, Commit] | None = None,
    state: str = GroupState.CONFIRMED,
) -> AlertGroup:
    """A group with an alert on `metric` at concurrency 16, over a fresh one-commit range by default."""
    base, head = commits or (cast(Commit, CommitFactory()), cast(Commit, CommitFactory()))
    series = cast(
        Series, SeriesFactory(suite=suite, hardware_class=hardware_class, concurrency=16, metric=metric)
    )
    worse = (change_pct < 0) == series.higher_is_better
    alert, _ = alert_upsert(
        series=series,
        base_commit_id=base.pk,
        head_commit_id=head.pk,
        kind=AlertKind.REGRESSION if worse else AlertKind.IMPROVEMENT,
        before=100.0,
        after=100.0 + change_pct,
        change_pct=change_pct,
        p_value=1e-9,
    )
    AlertGroup.objects.filter(pk=alert.group_id).update(status=status, state=state)
    Alert.objects.filter(pk=alert.pk).update(status=status)
    return AlertGroup.objects.get(pk=alert.group_id)


def _group_ids(client: Client, **query: str) -> list[int]:
    response = client.get("/alerts/", query)
    assert response.status_code == 200
    return [row.group.pk for row in response.context["rows"]]


def test_the_alerts_page_filters_by_suite_hardware_status_and_kind() -> None:
    kimi, tiny = suite_create(name="kimi-k3-8k1k"), suite_create(name="tiny-llama-cpu", hardware_class="cpu")
    slower = group_create(suite=kimi, change_pct=-6.0)
    faster = group_create(suite=kimi, change_pct=+9.0, status=TriageStatus.ACKNOWLEDGED)
    on_cpu = group_create(suite=tiny, change_pct=-3.0, hardware_class="cpu")
    client = Client()

    assert _group_ids(client, suite="kimi-k3-8k1k") == [faster.pk, slower.pk]
    assert _group_ids(client, hardware="cpu") == [on_cpu.pk]
    assert _group_ids(client, status="acknowledged") == [faster.pk]
    assert _group_ids(client, kind="regression") == [on_cpu.pk, slower.pk]
    assert _group_ids(client, kind="regression", suite="kimi-k3-8k1k") == [slower.pk]
    assert _group_ids(client, sort="size") == [faster.pk, slower.pk, on_cpu.pk]


def test_an_invalid_filter_is_ignored_and_said_so() -> None:
    group = group_create(suite=suite_create(), change_pct=-6.0)

    response = Client().get("/alerts/", {"kind": "catastrophe"})

    assert [row.group.pk for row in response.context["rows"]] == [group.pk]
    html = response.content.decode()
    assert (
        "&#x27;catastrophe&#x27; is not a kind (one of: regression, improvement, trade_off): "
        "this filter is ignored." in html
    )
    # The selector shows what was asked, marked, not "any kind".
    assert 'value="catastrophe" selected class="unknown" data-unknown>catastrophe (unknown, ignored)' in html


def test_an_unknown_suite_or_hardware_is_named_kept_in_its_selector_and_applied() -> None:
    group_create(suite=suite_create(name="kimi-k3-8k1k"), change_pct=-6.0)

    response = Client().get("/alerts/", {"hardware": "h100", "suite": "kimi-k3-8k1k"})

    assert response.context["rows"] == []
    html = response.content.decode()
    assert "No alert group has a hardware named &#x27;h100&#x27; (there are: b300)." in html
    assert 'value="h100" selected class="unknown" data-unknown>h100 (unknown)' in html
    assert 'value="kimi-k3-8k1k" selected>' in html  # the known one stays as it was


def test_the_alerts_page_needs_the_same_queries_for_three_groups_as_for_twelve(
    django_assert_num_queries,
) -> None:
    suite = suite_create()
    for index in range(3):
        group_create(suite=suite, change_pct=-3.0 - index)
    client = Client()
    # count, the page of groups, their alerts with series and suite, the filter choices, and the one of
    # regressions_restored (none restored: no restoring group to load)
    with django_assert_num_queries(5):
        assert client.get("/alerts/", {"suite": suite.name, "sort": "size"}).status_code == 200
    for index in range(9):
        group_create(suite=suite, change_pct=+4.0 + index, metric=TTFT)
    with django_assert_num_queries(5):
        response = client.get("/alerts/", {"suite": suite.name, "sort": "size"})
    assert len(response.context["rows"]) == 12


def test_the_feed_is_atom_with_one_entry_per_group_and_keeps_the_filters() -> None:
    suite = suite_create()
    regression = group_create(suite=suite, change_pct=-6.0)
    group_create(suite=suite, change_pct=+5.0)

    response = Client().get("/alerts/feed/", {"kind": "regression"})

    assert response["Content-Type"].startswith("application/atom+xml")
    atom = "{http://www.w3.org/2005/Atom}"
    entries = ElementTree.fromstring(response.content).findall(f"{atom}entry")
    assert len(entries) == 1
    assert entries[0].findtext(f"{atom}title", "").startswith("Regression in ")
    assert entries[0].find(f"{atom}link").get("href").endswith(f"/alerts/{regression.pk}/")  # type: ignore[union-attr]


def test_the_group_page_shows_charts_commits_prs_and_no_triage_controls_to_visitors(history_build) -> None:
    history = history_build(values={THROUGHPUT: step(before=725.0, after=681.5, at=40, length=70)})
    suite_detect_history()
    group = AlertGroup.objects.get()
    alert = group.alerts.get()
    culprit = history.commits[40]
    PullRequest.objects.create(
        repository=culprit.repository,
        number=culprit.pr_number,
        title="[Core] Move sampler metadata preparation onto the scheduler thread",
        state="merged",
        merge_commit=culprit,
    )

    response = Client().get(f"/alerts/{group.pk}/")

    page = response.content.decode()
    assert response.status_code == 200
    assert f'data-figure-url="/api/alerts/{alert.pk}/figure/"' in page
    assert f'href="/prs/{culprit.pr_number}/"' in page  # the PR page, which links on to GitHub
    assert 'title="[Core] Move sampler metadata preparation onto the scheduler thread' in page
    assert "sign in as staff" in page and 'name="status"' not in page


def test_an_alert_chart_zooms_on_the_range_and_draws_the_means_before_and_after(history_build) -> None:
    history = history_build(values={THROUGHPUT: step(before=725.0, after=681.5, at=40, length=90)})
    suite_detect_history()
    alert = Alert.objects.get()

    figure = Client().get(f"/api/alerts/{alert.pk}/figure/").json()

    values, before, after = figure["data"]
    positions = [commit.position for commit in history.commits]
    assert values["x"] == positions[10:71]  # 30 benchmarked commits each side of the head
    assert before["y"] == [pytest.approx(alert.before_value)] * 2
    assert before["x"] == [positions[10], positions[39]]
    assert after["x"] == [positions[40], positions[70]]
    [band] = figure["layout"]["shapes"]
    assert (band["x0"], band["x1"]) == (positions[39], positions[40])


def test_precision_per_suite_and_metric_counts_invalid_as_false_positives() -> None:
    suite = suite_create()
    group_create(suite=suite, change_pct=-6.0, status=TriageStatus.ACKNOWLEDGED)
    group_create(suite=suite, change_pct=-3.0, status=TriageStatus.INVALID)
    group_create(suite=suite, change_pct=-4.0, status=TriageStatus.FIXED)
    group_create(suite=suite, change_pct=-5.0)  # untriaged: not a verdict yet
    group_create(suite=suite, change_pct=+8.0, metric=TTFT, status=TriageStatus.INVALID)

    response = Client().get("/alerts/precision/")

    rows = {(row.suite, row.metric): row for row in response.context["rows"]}
    throughput = rows[(suite.name, THROUGHPUT)]
    assert (throughput.detected, throughput.decided, throughput.false_positives) == (4, 3, 1)
    assert throughput.precision == pytest.approx(2 / 3)
    assert rows[(suite.name, TTFT)].precision == 0.0
    assert response.context["overall"] == pytest.approx(2 / 4)


def test_timeline_markers_point_at_each_group_of_the_suite_and_hardware_but_not_false_positives() -> None:
    kimi = suite_create(name="kimi-k3-8k1k")
    regression = group_create(suite=kimi, change_pct=-6.0)
    improvement = group_create(suite=kimi, change_pct=+7.0)
    group_create(suite=kimi, change_pct=-2.5, status=TriageStatus.INVALID)
    group_create(suite=kimi, change_pct=-9.0, hardware_class="h200")

    markers = alert_markers(suite=kimi, hardware_class="b300")

    assert [(m.group_id, m.kind, m.url) for m in markers] == [
        (regression.pk, GroupKind.REGRESSION, f"/alerts/{regression.pk}/"),
        (improvement.pk, GroupKind.IMPROVEMENT, f"/alerts/{improvement.pk}/"),
    ]
    assert markers[0].commit_sha == regression.head_commit.sha
    assert markers[0].position == regression.head_commit.position


def test_the_means_stop_at_the_neighbouring_changes_of_the_same_series(history_build) -> None:
    values = step(before=725.0, after=681.5, at=30, length=90)
    values = [value * (1.1 if index >= 50 else 1.0) for index, value in enumerate(values)]
    history = history_build(values={THROUGHPUT: values})
    suite_detect_history()
    first = Alert.objects.get(group__head_commit=history.commits[30])

    _, before, after = Client().get(f"/api/alerts/{first.pk}/figure/").json()["data"]

    positions = [commit.position for commit in history.commits]
    assert before["x"] == [positions[0], positions[29]]
    assert after["x"] == [positions[30], positions[49]]  # up to the base of the next change


def test_a_dismissed_group_stays_visible_with_its_evidence(client: Client) -> None:
    group = group_create(suite=suite_create(), change_pct=-6.0, state=GroupState.DISMISSED)
    evidence = {
        "suite": "kimi-k3-8k1k",
        "hardware": "b300",
        "concurrency": 16,
        "metric": THROUGHPUT,
        "base_values": [100.0, 100.4, 99.8],
        "head_values": [94.0, 100.2, 99.9],
        "change_pct": -0.3,
        "ci_low_pct": -1.9,
        "ci_high_pct": 1.3,
        "p_value": 0.31,
        "holds": False,
    }
    AlertGroup.objects.filter(pk=group.pk).update(evidence={"rounds": 1, "alerts": [evidence]})

    listing = client.get("/alerts/").content.decode()
    page = client.get(f"/alerts/{group.pk}/").content.decode()

    assert f'href="/alerts/{group.pk}/"' in listing and "Dismissed" in listing
    assert "Verdict: dismissed" in page
    assert "3 + 3" in page and "-1.9 – 1.3 %" in page and "0.3100" in page


def test_a_verdict_names_the_commits_its_repeats_were_of_when_the_group_has_since_narrowed(
    client: Client,
) -> None:
    wider = (cast(Commit, CommitFactory()), cast(Commit, CommitFactory()))
    group = group_create(suite=suite_create(), change_pct=-6.0)
    verdict = {
        "suite": "kimi-k3-8k1k",
        "hardware": "b300",
        "concurrency": 16,
        "metric": THROUGHPUT,
        "base_values": [100.0, 100.4],
        "head_values": [94.0, 94.2],
        "change_pct": -6.0,
        "ci_low_pct": -7.9,
        "ci_high_pct": -4.1,
        "p_value": 0.0001,
        "holds": True,
    }
    tested = {"base": wider[0].sha, "head": wider[1].sha}
    AlertGroup.objects.filter(pk=group.pk).update(
        evidence={"rounds": 1, "alerts": [verdict], "tested": tested}
    )

    page = client.get(f"/alerts/{group.pk}/").content.decode()

    assert f'href="/commits/{wider[0].sha}/">{wider[0].sha[:8]}</a>' in page
    assert f'href="/commits/{wider[1].sha}/">{wider[1].sha[:8]}</a>, the range it was judged on' in page

    AlertGroup.objects.filter(pk=group.pk).update(
        base_commit=wider[0],
        head_commit=wider[1],
        evidence={"rounds": 1, "alerts": [verdict], "tested": tested},
    )
    page = client.get(f"/alerts/{group.pk}/").content.decode()
    assert f"{wider[1].sha[:8]}</a>: each interval" in page  # its own range: nothing more to say


def test_a_group_opened_after_another_links_it_and_is_linked_back(client: Client) -> None:
    suite = suite_create()
    dismissed = group_create(suite=suite, change_pct=-6.0, state=GroupState.DISMISSED)
    later = group_create(suite=suite, change_pct=-6.0, state=GroupState.SUSPECTED)
    AlertGroup.objects.filter(pk=later.pk).update(follows=dismissed)

    page = client.get(f"/alerts/{later.pk}/").content.decode()
    back = client.get(f"/alerts/{dismissed.pk}/").content.decode()

    link = f'<a href="/alerts/{dismissed.pk}/">#{dismissed.pk}</a>'
    assert f"opened after group {link} (dismissed)" in page
    assert "data-followed-by" not in page
    assert f'followed by group <a href="/alerts/{later.pk}/">#{later.pk}</a> (suspected)' in back
    assert "data-follows=" not in back

"""GET /api/alerts/: alert groups as JSON with full shas, verdict state and culprit, filtered and bounded."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import cast

import pytest
from django.test import Client

from dashboard.benchmarks.models import Commit
from dashboard.regressions.models import AlertGroup, GroupState
from tests.factories import CommitFactory
from tests.regressions.conftest import suite_create
from tests.regressions.test_pages import group_create

pytestmark = pytest.mark.django_db

TTFT = "ttft_ms_mean"


def _commits(count: int) -> list[Commit]:
    return [cast(Commit, CommitFactory()) for _ in range(count)]


def test_a_group_lists_its_range_culprit_pull_requests_and_alerts(client: Client) -> None:
    commits = _commits(4)
    wide = group_create(suite=suite_create(), change_pct=-6.0, commits=(commits[0], commits[3]))
    narrow = group_create(
        suite=suite_create(name="other-suite"),
        change_pct=+9.0,
        metric=TTFT,
        commits=(commits[1], commits[2]),
        state=GroupState.SUSPECTED,
    )

    body = client.get("/api/alerts/").json()

    by_id = {group["id"]: group for group in body["groups"]}
    assert list(by_id) == [narrow.pk, wide.pk]
    wide_json = by_id[wide.pk]
    assert wide_json["kind"] == "regression" and wide_json["state"] == "confirmed"
    assert wide_json["status"] == "untriaged"
    assert (wide_json["base_commit"], wide_json["head_commit"]) == (commits[0].sha, commits[3].sha)
    assert len(wide_json["head_commit"]) == 40
    assert wide_json["culprit_commit"] is None
    assert wide_json["pull_requests"] == [commit.pr_number for commit in commits[1:]]
    assert wide_json["alerts"] == [
        {
            "suite": "kimi-k3-8k1k",
            "hardware": "b300",
            "concurrency": 16,
            "metric": "output_throughput_tok_s",
            "before": 100.0,
            "after": 94.0,
            "change_pct": -6.0,
            "p_value": 1e-9,
        }
    ]
    narrow_json = by_id[narrow.pk]
    assert narrow_json["state"] == "suspected" and narrow_json["kind"] == "regression"  # TTFT up is worse
    assert narrow_json["culprit_commit"] == commits[2].sha
    assert narrow_json["pull_requests"] == [commits[2].pr_number]


def test_filters_keep_only_matching_groups(client: Client) -> None:
    suite = suite_create()
    confirmed = group_create(suite=suite, change_pct=-6.0)
    dismissed = group_create(suite=suite, change_pct=-5.0, state=GroupState.DISMISSED)
    improvement = group_create(suite=suite_create(name="other-suite"), change_pct=+7.0, hardware_class="h200")
    AlertGroup.objects.filter(pk=confirmed.pk).update(created_at=datetime(2026, 1, 1, tzinfo=UTC))

    def ids(**query: str) -> list[int]:
        response = client.get("/api/alerts/", query)
        assert response.status_code == 200, response.content
        return [group["id"] for group in response.json()["groups"]]

    assert ids(state="dismissed") == [dismissed.pk]
    assert ids(kind="improvement") == [improvement.pk]
    assert ids(suite="other-suite") == [improvement.pk]
    assert ids(hardware="b300") == [dismissed.pk, confirmed.pk]
    assert ids(status="untriaged", state="confirmed", suite="kimi-k3-8k1k") == [confirmed.pk]
    assert ids(since="2026-06-01") == [improvement.pk, dismissed.pk]
    assert ids(since="2025-12-31T23:00:00+00:00") == [improvement.pk, dismissed.pk, confirmed.pk]


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ({"state": "maybe"}, "state must be one of suspected, confirmed, dismissed, not 'maybe'"),
        ({"kind": "slower"}, "kind must be one of regression, improvement, trade_off, not 'slower'"),
        ({"status": "done"}, "status must be one of"),
        ({"since": "last week"}, "since must be an ISO 8601 date or time, not 'last week'"),
        ({"since": "2026-13-45"}, "since must be an ISO 8601 date or time"),
        ({"suite": "no such suite"}, "suite must be a name of letters"),
        ({"suite": "nosuchsuite"}, "unknown suite 'nosuchsuite'"),
        ({"hardware": "b300;drop"}, "hardware must be a name of letters"),
    ],
)
def test_a_bad_filter_value_is_a_400_with_a_one_line_reason(client: Client, query, reason) -> None:
    group_create(suite=suite_create(), change_pct=-6.0)

    response = client.get("/api/alerts/", query)

    assert response.status_code == 400
    error = response.json()["error"]
    assert error.startswith(reason) and "\n" not in error


def test_the_query_count_does_not_grow_with_the_groups(client: Client, django_assert_num_queries) -> None:
    suite = suite_create()
    commits = _commits(30)
    for index in range(0, 30, 3):
        group_create(suite=suite, change_pct=-6.0, commits=(commits[index], commits[index + 2]))
        group_create(suite=suite, change_pct=+4.0, metric=TTFT, commits=(commits[index], commits[index + 1]))

    # groups, their alerts with series and suites, the commits of all ranges
    with django_assert_num_queries(3):
        groups = client.get("/api/alerts/").json()["groups"]
    assert len(groups) == 20
    # and one more to check the suite exists when it is filtered on
    with django_assert_num_queries(4):
        assert len(client.get("/api/alerts/", {"suite": suite.name}).json()["groups"]) == 20


def test_an_answer_holds_at_most_the_cap_of_groups_the_newest(client: Client, monkeypatch) -> None:
    from dashboard.regressions import alerts_query

    monkeypatch.setattr(alerts_query, "ALERTS_MAX_GROUPS", 2)
    commits = _commits(4)
    suite = suite_create()
    groups = [
        group_create(suite=suite, change_pct=-6.0, commits=(commits[i], commits[i + 1])) for i in range(3)
    ]

    body = client.get("/api/alerts/").json()

    assert [group["id"] for group in body["groups"]] == [groups[2].pk, groups[1].pk]

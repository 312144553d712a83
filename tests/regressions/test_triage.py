"""Triage: staff only, every change kept in the group's history, bulk status over a group's alerts."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from dashboard.regressions.models import AlertGroup, TriageEvent, TriageStatus
from dashboard.regressions.triage import TriageChange, TriageRefused, group_triage
from tests.regressions.conftest import suite_create
from tests.regressions.test_alerts import TTFT
from tests.regressions.test_pages import group_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def group() -> AlertGroup:
    suite = suite_create()
    first = group_create(suite=suite, change_pct=-6.0)
    # A second series in the same range joins the same group.
    return group_create(
        suite=suite, change_pct=-9.0, metric=TTFT, commits=(first.base_commit, first.head_commit)
    )


def _post(client: Client, group: AlertGroup, **fields: object) -> None:
    response = client.post(f"/alerts/{group.pk}/triage/", fields)
    assert response.status_code == 302


def test_visitors_and_signed_in_non_staff_cannot_triage(group, django_user_model: type[User]) -> None:
    visitor = Client()
    _post(visitor, group, status="invalid")
    member = Client()
    member.force_login(django_user_model.objects.create_user("reader", password="pw"))
    _post(member, group, status="invalid")

    group.refresh_from_db()
    assert group.status == TriageStatus.UNTRIAGED
    assert not TriageEvent.objects.exists()
    with pytest.raises(TriageRefused):
        group_triage(
            group_id=group.pk,
            user=django_user_model.objects.get(username="reader"),
            change=TriageChange(status="invalid"),
        )


def test_staff_triage_changes_the_group_and_keeps_who_changed_what(group, staff_user: User) -> None:
    client = Client()
    client.force_login(staff_user)

    _post(client, group, status="investigating", assignee=staff_user.pk, notes="Sampler moved threads.")
    _post(client, group, status="acknowledged", assignee=staff_user.pk, notes="Sampler moved threads.")

    group.refresh_from_db()
    assert (group.status, group.assignee, group.notes) == (
        "acknowledged",
        staff_user,
        "Sampler moved threads.",
    )
    history = list(
        TriageEvent.objects.filter(group=group)
        .order_by("pk")
        .values_list("user__username", "field", "old_value", "new_value")
    )
    assert history == [
        ("triager", "status", "untriaged", "investigating"),
        ("triager", "assignee", "", "triager"),
        ("triager", "notes", "", "Sampler moved threads."),
        ("triager", "status", "investigating", "acknowledged"),
    ]
    page = client.get(f"/alerts/{group.pk}/").content.decode()
    assert "Sampler moved threads." in page and "investigating" in page and 'name="status"' in page


def test_a_bulk_action_sets_the_status_of_every_alert_of_the_group(group, staff_user: User) -> None:
    client = Client()
    client.force_login(staff_user)

    _post(client, group, status="invalid", alert_status="invalid")

    assert set(group.alerts.values_list("status", flat=True)) == {TriageStatus.INVALID}
    assert TriageEvent.objects.filter(group=group, alert__isnull=False, new_value="invalid").count() == 2


def test_a_bulk_action_on_chosen_alerts_leaves_the_others_and_rejudges_the_group(group, staff_user) -> None:
    throughput = group.alerts.get(series__metric="output_throughput_tok_s")
    assert group.kind == "trade_off"

    group_triage(
        group_id=group.pk,
        user=staff_user,
        change=TriageChange(alert_ids=[throughput.pk], alert_status=TriageStatus.INVALID),
    )

    statuses = dict(group.alerts.values_list("series__metric", "status"))
    assert statuses == {"output_throughput_tok_s": "invalid", TTFT: "untriaged"}
    group.refresh_from_db()
    # An alert judged invalid no longer counts: what is left is a faster first token, an improvement.
    assert group.kind == "improvement"

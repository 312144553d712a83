"""Triage: staff only, every change kept in the group's history, bulk status over a group's alerts."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from dashboard.regressions.models import AlertGroup, TriageEvent, TriageStatus
from dashboard.regressions.triage import TriageChange, TriageRefused, group_comment_add, group_triage
from tests.regressions.conftest import suite_create
from tests.regressions.test_alerts import TTFT
from tests.regressions.test_pages import group_create

pytestmark = pytest.mark.django_db

# Session and user, the group, its alerts, range commits, PRs, events, comments, notifications, bisection
# runs, related groups (by a revert or the same PR), the groups opened after it, the triage form's choices,
# what restored it (one: none here) and the message a notification would carry (its alerts and range): a
# fixed number whatever the thread's length.
QUERIES_GROUP_PAGE = 24


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

    _post(client, group, status="investigating", assignee=staff_user.pk)
    _post(client, group, status="wont_fix", assignee=staff_user.pk)

    group.refresh_from_db()
    assert (group.status, group.assignee) == ("wont_fix", staff_user)
    history = list(
        TriageEvent.objects.filter(group=group)
        .order_by("pk")
        .values_list("user__username", "field", "old_value", "new_value")
    )
    assert history == [
        ("triager", "status", "untriaged", "investigating"),
        ("triager", "assignee", "", "triager"),
        ("triager", "status", "investigating", "wont_fix"),
    ]
    response = client.get(f"/alerts/{group.pk}/")
    # The history reads as labels, newest first, with who and when.
    entries = [(e.who, e.what, e.old, e.new) for e in response.context["detail"].history]
    assert entries == [
        ("triager", "Status", "Investigating", "Won't fix"),
        ("triager", "Assignee", "", "triager"),
        ("triager", "Status", "Untriaged", "Investigating"),
    ]
    page = response.content.decode()
    assert "Untriaged → Investigating" in page and "Investigating → Won&#x27;t fix" in page
    assert "untriaged → investigating" not in page and 'name="status"' in page


def test_history_shows_a_long_old_note_whole(group, staff_user: User) -> None:
    note = "The sampler moved onto the scheduler thread; " * 6 + "the end of the note."
    TriageEvent.objects.create(group=group, user=staff_user, field="notes", old_value="", new_value=note)

    page = Client().get(f"/alerts/{group.pk}/").content.decode()

    assert "Notes" in page and "the end of the note." in page
    assert "…" not in page.split('class="data history"')[1]


def test_comments_form_a_thread_oldest_first_with_author_and_time(group, staff_user: User) -> None:
    other = User.objects.create_user("second", password="pw", is_staff=True)
    client = Client()
    client.force_login(staff_user)
    response = client.post(f"/alerts/{group.pk}/comments/", {"text": "Sampler moved threads."})
    assert response.status_code == 302 and response["Location"].endswith(f"/alerts/{group.pk}/#comments")
    group_comment_add(group_id=group.pk, user=other, text="  Confirmed on a re-run.  ")

    comments = list(group.comments.values_list("author__username", "text"))
    assert comments == [("triager", "Sampler moved threads."), ("second", "Confirmed on a re-run.")]
    page = Client().get(f"/alerts/{group.pk}/").content.decode()
    thread = page.split('id="comments"')[1].split("</section>")[0]
    assert thread.index("Sampler moved threads.") < thread.index("Confirmed on a re-run.")
    assert thread.index("triager") < thread.index("second")
    first = group.comments.first()
    assert first is not None and first.created_at.strftime("%Y-%m-%d %H:%M") + " UTC" in thread
    # Visitors read the thread but get no form.
    assert 'name="text"' not in page


def test_a_signed_in_reader_outside_the_commenters_cannot_comment_and_an_empty_comment_is_refused(
    group, staff_user: User, django_user_model: type[User]
) -> None:
    member = Client()
    member.force_login(django_user_model.objects.create_user("reader", password="pw"))
    member.post(f"/alerts/{group.pk}/comments/", {"text": "hello"})
    Client().post(f"/alerts/{group.pk}/comments/", {"text": "hello"})
    with pytest.raises(TriageRefused):
        group_comment_add(group_id=group.pk, user=staff_user, text="   ")

    assert not group.comments.exists()


def test_alerts_follow_the_group_status_unless_set_individually(group, staff_user: User) -> None:
    throughput = group.alerts.get(series__metric="output_throughput_tok_s")
    ttft = group.alerts.get(series__metric=TTFT)
    group_triage(
        group_id=group.pk,
        user=staff_user,
        change=TriageChange(alert_ids=[throughput.pk], alert_status=TriageStatus.INVALID),
    )

    group_triage(group_id=group.pk, user=staff_user, change=TriageChange(status=TriageStatus.INVESTIGATING))
    assert dict(group.alerts.values_list("series__metric", "status")) == {
        "output_throughput_tok_s": "invalid",  # set on the alert itself: kept
        TTFT: "investigating",  # followed the group
    }
    group_triage(group_id=group.pk, user=staff_user, change=TriageChange(status=TriageStatus.FIXED))
    ttft.refresh_from_db()
    throughput.refresh_from_db()
    assert (ttft.status, throughput.status) == ("fixed", "invalid")
    assert throughput.status_set_individually and not ttft.status_set_individually

    # Told to follow the group again, the alert takes its status and moves with it.
    group_triage(
        group_id=group.pk, user=staff_user, change=TriageChange(alert_ids=[throughput.pk], alerts_follow=True)
    )
    group_triage(group_id=group.pk, user=staff_user, change=TriageChange(status=TriageStatus.ACKNOWLEDGED))
    assert set(group.alerts.values_list("status", flat=True)) == {"acknowledged"}
    assert not group.alerts.filter(status_set_individually=True).exists()


def test_the_group_page_marks_alerts_set_individually(group, staff_user: User) -> None:
    client = Client()
    client.force_login(staff_user)
    throughput = group.alerts.get(series__metric="output_throughput_tok_s")

    _post(client, group, status="investigating", alerts=[throughput.pk], alert_status="invalid")

    page = client.get(f"/alerts/{group.pk}/").content.decode()
    assert page.count("set individually</span>") == 1
    assert dict(group.alerts.values_list("series__metric", "status")) == {
        "output_throughput_tok_s": "invalid",
        TTFT: "investigating",
    }


def test_the_group_page_needs_as_many_queries_for_many_comments_as_for_one(
    group, staff_user: User, django_assert_max_num_queries
) -> None:
    client = Client()
    client.force_login(staff_user)
    group_comment_add(group_id=group.pk, user=staff_user, text="first")
    group_triage(group_id=group.pk, user=staff_user, change=TriageChange(status=TriageStatus.INVESTIGATING))
    with django_assert_max_num_queries(QUERIES_GROUP_PAGE):
        assert client.get(f"/alerts/{group.pk}/").status_code == 200
    for index in range(10):
        group_comment_add(group_id=group.pk, user=staff_user, text=f"comment {index}")
        group_triage(
            group_id=group.pk,
            user=staff_user,
            change=TriageChange(status=TriageStatus.FIXED if index % 2 else TriageStatus.INVESTIGATING),
        )
    with django_assert_max_num_queries(QUERIES_GROUP_PAGE):
        response = client.get(f"/alerts/{group.pk}/")
    assert len(response.context["detail"].comments) == 11


def test_a_bulk_action_sets_the_status_of_every_alert_of_the_group(group, staff_user: User) -> None:
    client = Client()
    client.force_login(staff_user)

    _post(client, group, status="investigating", alert_status="invalid")

    assert set(group.alerts.values_list("status", "status_set_individually")) == {
        (TriageStatus.INVALID, True)
    }
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


def test_the_status_endpoint_of_the_keyboard_shortcuts_is_staff_only_and_moves_following_alerts(
    group, staff_user: User, django_user_model: type[User]
) -> None:
    url = f"/alerts/{group.pk}/status/"
    refused = Client().post(url, {"status": "investigating"})
    member = Client()
    member.force_login(django_user_model.objects.create_user("reader", password="pw"))
    assert (refused.status_code, member.post(url, {"status": "investigating"}).status_code) == (403, 403)
    assert refused.json() == {"error": "triage needs a signed-in staff user"}
    staff = Client(enforce_csrf_checks=True)
    staff.force_login(staff_user)
    assert staff.post(url, {"status": "investigating"}).status_code == 403  # no CSRF token
    token = str(staff.get("/alerts/").context["csrf_token"])

    unknown = staff.post(url, {"status": "sleeping"}, headers={"X-CSRFToken": token})
    saved = staff.post(url, {"status": "wont_fix"}, headers={"X-CSRFToken": token})

    assert (unknown.status_code, unknown.json()) == (400, {"error": "unknown status 'sleeping'"})
    assert (saved.status_code, saved.json()) == (200, {"status": "wont_fix", "label": "won't fix"})
    assert set(group.alerts.values_list("status", flat=True)) == {"wont_fix"}
    assert TriageEvent.objects.filter(group=group, alert__isnull=True).count() == 1


def test_the_alerts_list_for_staff_needs_the_same_queries_for_three_groups_as_for_twelve(
    staff_user: User, django_assert_max_num_queries
) -> None:
    suite = suite_create()
    client = Client()
    client.force_login(staff_user)
    for index in range(3):
        group_create(suite=suite, change_pct=-3.0 - index)
    # Session and user, then the list's four: count, the page of groups, their alerts, the filter choices;
    # and the one that finds restored regressions (two when any is: the groups that restored them).
    with django_assert_max_num_queries(8):
        assert client.get("/alerts/").status_code == 200
    for index in range(9):
        group_create(suite=suite, change_pct=+4.0 + index, metric=TTFT)
    with django_assert_max_num_queries(8):
        response = client.get("/alerts/")
    assert 'data-can-triage data-csrf-token="' in response.content.decode()
    assert len(response.context["rows"]) == 12

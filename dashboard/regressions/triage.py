"""Writes: triage of alert groups and their alerts by staff, every change recorded."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import transaction
from django.utils import timezone

from dashboard.regressions.detect.alert_groups import group_refresh
from dashboard.regressions.models import Alert, AlertGroup, Comment, TriageEvent, TriageStatus


class TriageRefused(Exception):
    """The user may not triage, or the change does not apply."""


def _user_check(user: AbstractBaseUser | AnonymousUser) -> None:
    if not (user.is_authenticated and getattr(user, "is_staff", False)):
        raise TriageRefused("triage needs a signed-in staff user")


def _user_label(user_id: int | None) -> str:
    if user_id is None:
        return ""
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.filter(pk=user_id).first()
    return user.get_username() if user else str(user_id)


@dataclass(frozen=True)
class TriageChange:
    """What a triage form asks for; None leaves a field as it is."""

    status: str | None = None
    assignee_id: int | None = None
    assignee_set: bool = False  # distinguishes "unassign" (None) from "leave as is"
    # With alert_status or alerts_follow: the alerts it applies to; none means all of them.
    alert_ids: Sequence[int] = ()
    # Set on the alerts themselves: from then on the group's status no longer moves them.
    alert_status: str | None = None
    # The alerts take the group's status again and follow it from then on.
    alerts_follow: bool = False


def group_triage(
    *, group_id: int, user: AbstractBaseUser | AnonymousUser, change: TriageChange
) -> list[TriageEvent]:
    """Apply a triage change to a group and, in bulk, to some of its alerts; every change is recorded.

    A new group status moves every alert whose status was not set on the alert itself."""
    _user_check(user)
    valid = set(TriageStatus.values)
    for status in (change.status, change.alert_status):
        if status is not None and status not in valid:
            raise TriageRefused(f"unknown status {status!r}")
    events: list[TriageEvent] = []
    with transaction.atomic():
        group = AlertGroup.objects.select_for_update().filter(pk=group_id).first()
        if group is None:
            raise TriageRefused(f"no alert group {group_id}")
        user_id = user.pk

        def record(field: str, old: Any, new: Any, alert: Alert | None = None) -> None:
            events.append(
                TriageEvent(
                    group=group, alert=alert, user_id=user_id, field=field, old_value=old, new_value=new
                )
            )

        if change.status is not None and change.status != group.status:
            record("status", group.status, change.status)
            group.status = change.status
            group.alerts.filter(status_set_individually=False).exclude(status=change.status).update(
                status=change.status, updated_at=timezone.now()
            )
        if change.assignee_set and change.assignee_id != group.assignee_id:
            record("assignee", _user_label(group.assignee_id), _user_label(change.assignee_id))
            group.assignee_id = change.assignee_id
        if change.alert_status is not None or change.alerts_follow:
            status = change.alert_status if change.alert_status and not change.alerts_follow else group.status
            # No alert chosen: the change applies to every alert of the group.
            chosen = group.alerts.filter(pk__in=change.alert_ids) if change.alert_ids else group.alerts.all()
            for alert in chosen.order_by("pk"):
                if alert.status != status:
                    record("status", alert.status, status, alert=alert)
                if alert.status != status or alert.status_set_individually == change.alerts_follow:
                    alert.status = status
                    alert.status_set_individually = not change.alerts_follow
                    alert.save(update_fields=["status", "status_set_individually", "updated_at"])
        if not events:
            return []
        group.save()
        TriageEvent.objects.bulk_create(events)
        group_refresh(group)
    return events


COMMENT_PERMISSION = "regressions.add_comment"  # what the Commenters group grants


def comment_allowed(*, user: AbstractBaseUser | AnonymousUser) -> bool:
    """Staff, and signed-in contributors in the Commenters group (or with its permission), may comment."""
    if not user.is_authenticated:
        return False
    has_perm = getattr(user, "has_perm", None)
    return bool(getattr(user, "is_staff", False) or (has_perm is not None and has_perm(COMMENT_PERMISSION)))


def group_comment_add(*, group_id: int, user: AbstractBaseUser | AnonymousUser, text: str) -> Comment:
    """Add a comment to a group's thread; comments are never edited, so the thread is its own record."""
    if not comment_allowed(user=user):
        raise TriageRefused("commenting needs a signed-in staff user or a member of the Commenters group")
    text = text.strip()
    if not text:
        raise TriageRefused("a comment needs some text")
    if not AlertGroup.objects.filter(pk=group_id).exists():
        raise TriageRefused(f"no alert group {group_id}")
    return Comment.objects.create(group_id=group_id, author_id=user.pk, text=text)

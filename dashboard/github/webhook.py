"""Writes: what a verified GitHub delivery asks for, queued once the transaction commits."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from dashboard import dispatch
from dashboard.benchmarks.services import repository_default
from dashboard.github.client import PullInfo
from dashboard.github.models import PullRequest, TrackingIssue, WebhookDelivery


class WebhookPayloadInvalid(ValueError):
    """A signed webhook delivery whose JSON lacks what its event must carry."""


WEBHOOK_EVENTS = frozenset({"push", "issues", "pull_request"})


@dataclass(frozen=True)
class WebhookOutcome:
    """The names of the tasks a delivery queued (none when it needed nothing, or it was a redelivery)."""

    queued: tuple[str, ...] = ()
    duplicate: bool = False


def _field(payload: Mapping[str, Any], *path: str) -> Any:
    value: Any = payload
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            raise WebhookPayloadInvalid(f"the payload has no {'.'.join(path)}")
        value = value[key]
    return value


def pull_info_from_payload(*, pull: Mapping[str, Any]) -> PullInfo:
    """A webhook's ``pull_request`` object (the REST shape) as the client's PullInfo."""
    merged = bool(pull.get("merged")) or pull.get("merged_at") is not None
    merged_at = pull.get("merged_at")
    return PullInfo(
        number=int(_field(pull, "number")),
        title=str(_field(pull, "title")),
        author=str((pull.get("user") or {}).get("login") or "ghost"),
        state=str(_field(pull, "state")),
        merged=merged,
        merge_commit_sha=pull.get("merge_commit_sha") if merged else None,
        merged_at=datetime.fromisoformat(merged_at.replace("Z", "+00:00")) if merged and merged_at else None,
        html_url=str(pull.get("html_url") or ""),
        updated_at=_payload_time(pull.get("updated_at")),
    )


def _payload_time(value: object) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise WebhookPayloadInvalid("a timestamp is not a string")
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise WebhookPayloadInvalid(f"the timestamp {value!r} has no time zone")
    return parsed


DELIVERY_KEPT = timedelta(days=30)


def webhook_delivery_handle(*, delivery_id: str, event: str, payload: Mapping[str, Any]) -> WebhookOutcome:
    """Act on a verified delivery once: a delivery id already recorded is a redelivery and needs nothing.

    The id is recorded in the transaction that queues the work, so a delivery that failed is not
    remembered and GitHub's retry of it is acted on.
    """
    with transaction.atomic():
        _, created = WebhookDelivery.objects.get_or_create(delivery_id=delivery_id, defaults={"event": event})
        if not created:
            return WebhookOutcome(duplicate=True)
        # GitHub redelivers deliveries of the past few days; older ids need not be kept (an older state
        # of a PR is refused by its updated_at all the same).
        WebhookDelivery.objects.filter(received_at__lt=timezone.now() - DELIVERY_KEPT).delete()
        return webhook_event_handle(event=event, payload=payload)


def webhook_event_handle(*, event: str, payload: Mapping[str, Any]) -> WebhookOutcome:
    """Decide what a verified delivery asks for and queue it once the transaction commits.

    push to the default branch of the configured repository → commit sync; issues on a configured
    tracking issue → its sync; pull_request closed on a listed PR → its new state. Anything else of
    those events is known but needs nothing.
    """
    if event == "push":
        repository = repository_default()
        full_name = str(_field(payload, "repository", "full_name"))
        ref = str(_field(payload, "ref"))
        if full_name.casefold() != repository.full_name.casefold():
            return WebhookOutcome()
        if ref != f"refs/heads/{repository.default_branch}":
            return WebhookOutcome()
        return WebhookOutcome(queued=(dispatch.commits_sync(),))
    if event == "issues":
        full_name = str(_field(payload, "repository", "full_name"))
        number = int(_field(payload, "issue", "number"))
        issue = (
            TrackingIssue.objects.active()
            .filter(repository__full_name__iexact=full_name, number=number)
            .values_list("pk", flat=True)
            .first()
        )
        if issue is None or _field(payload, "action") not in ("edited", "opened", "reopened", "closed"):
            return WebhookOutcome()
        return WebhookOutcome(queued=(dispatch.tracking_issue_sync(tracking_issue_id=issue),))
    if event == "pull_request":
        if _field(payload, "action") != "closed":
            return WebhookOutcome()
        full_name = str(_field(payload, "repository", "full_name"))
        pull = _field(payload, "pull_request")
        info = pull_info_from_payload(pull=pull)
        if not PullRequest.objects.filter(
            repository__full_name__iexact=full_name, number=info.number
        ).exists():
            return WebhookOutcome()
        fields = {
            key: pull.get(key)
            for key in (
                "number",
                "title",
                "state",
                "merged",
                "merge_commit_sha",
                "merged_at",
                "html_url",
                "updated_at",
            )
        }
        fields["user"] = {"login": info.author}
        return WebhookOutcome(queued=(dispatch.pull_request_record(repo=full_name, pull=fields),))
    raise WebhookPayloadInvalid(f"not an event PerfWatch listens to: {event!r}")

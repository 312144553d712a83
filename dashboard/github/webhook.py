"""Writes: what a verified GitHub delivery asks for, queued once the transaction commits."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any, Literal

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from dashboard import dispatch
from dashboard.benchmarks.services import repository_default
from dashboard.edges import BodyInvalid, Text, body_parse
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


class _Payload(BaseModel):
    """The part of a GitHub payload PerfWatch reads, typed; everything else GitHub sends is ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True, allow_inf_nan=False)


Number = Annotated[int, Field(ge=1, le=2**31 - 1)]


class RepositoryPayload(_Payload):
    full_name: Annotated[Text, Field(min_length=3, max_length=200)]


class PushPayload(_Payload):
    repository: RepositoryPayload
    ref: Annotated[Text, Field(max_length=500)]


class IssuePayload(_Payload):
    number: Number


class IssuesPayload(_Payload):
    action: Annotated[Text, Field(max_length=50)]
    repository: RepositoryPayload
    issue: IssuePayload


class UserPayload(_Payload):
    login: Annotated[Text, Field(max_length=100)] | None = None


class PullPayload(_Payload):
    """A ``pull_request`` object (the REST shape), as a webhook or the task it queues carries it."""

    number: Number
    title: Annotated[Text, Field(max_length=1000)]
    state: Literal["open", "closed"]
    merged: bool | None = None
    merge_commit_sha: Annotated[str, Field(pattern=r"^[0-9a-f]{40}$")] | None = None
    merged_at: AwareDatetime | None = None
    html_url: Annotated[Text, Field(max_length=500)] | None = None
    updated_at: AwareDatetime | None = None
    user: UserPayload | None = None


class PullRequestPayload(_Payload):
    action: Annotated[Text, Field(max_length=50)]
    repository: RepositoryPayload
    pull_request: PullPayload


def _parsed[PayloadT: BaseModel](model: type[PayloadT], payload: Mapping[str, Any]) -> PayloadT:
    try:
        return body_parse(model, payload)
    except BodyInvalid as error:
        raise WebhookPayloadInvalid(str(error)) from None


def pull_info_from_payload(*, pull: Mapping[str, Any]) -> PullInfo:
    """A webhook's ``pull_request`` object (the REST shape) as the client's PullInfo."""
    parsed = _parsed(PullPayload, pull)
    merged = bool(parsed.merged) or parsed.merged_at is not None
    return PullInfo(
        number=parsed.number,
        title=parsed.title,
        author=(parsed.user.login if parsed.user else None) or "ghost",
        state=parsed.state,
        merged=merged,
        merge_commit_sha=parsed.merge_commit_sha if merged else None,
        merged_at=parsed.merged_at if merged else None,
        html_url=parsed.html_url or "",
        updated_at=parsed.updated_at,
    )


DELIVERY_KEPT = timedelta(days=30)


def webhook_delivery_handle(
    *, delivery_id: str, event: str, payload: Mapping[str, Any], body_sha256: str
) -> WebhookOutcome:
    """Act on a verified delivery once: a delivery id already recorded is a redelivery, and a body
    already recorded under another id is a replay (a captured signed body sent again); neither needs
    anything.

    Both are recorded in the transaction that queues the work, so a delivery that failed is not
    remembered and GitHub's retry of it is acted on.
    """
    with transaction.atomic():
        # GitHub redelivers deliveries of the past few days; older ones need not be kept (an older state
        # of a PR is refused by its updated_at all the same).
        WebhookDelivery.objects.filter(received_at__lt=timezone.now() - DELIVERY_KEPT).delete()
        seen = WebhookDelivery.objects.filter(Q(delivery_id=delivery_id) | Q(body_sha256=body_sha256))
        if seen.exists():
            return WebhookOutcome(duplicate=True)
        try:
            with transaction.atomic():
                WebhookDelivery.objects.create(delivery_id=delivery_id, event=event, body_sha256=body_sha256)
        except IntegrityError:  # a concurrent copy of the same delivery won
            return WebhookOutcome(duplicate=True)
        return webhook_event_handle(event=event, payload=payload)


def webhook_event_handle(*, event: str, payload: Mapping[str, Any]) -> WebhookOutcome:
    """Decide what a verified delivery asks for and queue it once the transaction commits.

    push to the default branch of the configured repository → commit sync; issues on a configured
    tracking issue → its sync; pull_request closed on a listed PR → its new state. Anything else of
    those events is known but needs nothing.
    """
    if event == "push":
        repository = repository_default()
        push = _parsed(PushPayload, payload)
        full_name, ref = push.repository.full_name, push.ref
        if full_name.casefold() != repository.full_name.casefold():
            return WebhookOutcome()
        if ref != f"refs/heads/{repository.default_branch}":
            return WebhookOutcome()
        return WebhookOutcome(queued=(dispatch.commits_sync(),))
    if event == "issues":
        issues = _parsed(IssuesPayload, payload)
        full_name, number = issues.repository.full_name, issues.issue.number
        issue = (
            TrackingIssue.objects.active()
            .filter(repository__full_name__iexact=full_name, number=number)
            .values_list("pk", flat=True)
            .first()
        )
        if issue is None or issues.action not in ("edited", "opened", "reopened", "closed"):
            return WebhookOutcome()
        return WebhookOutcome(queued=(dispatch.tracking_issue_sync(tracking_issue_id=issue),))
    if event == "pull_request":
        delivery = _parsed(PullRequestPayload, payload)
        if delivery.action != "closed":
            return WebhookOutcome()
        full_name, number = delivery.repository.full_name, delivery.pull_request.number
        if not PullRequest.objects.filter(repository__full_name__iexact=full_name, number=number).exists():
            return WebhookOutcome()
        # What the task is given was checked here: a delivery that could not be stored is refused now,
        # while GitHub still retries it, not dropped by the worker later.
        fields = delivery.pull_request.model_dump(mode="json")
        return WebhookOutcome(queued=(dispatch.pull_request_record(repo=full_name, pull=fields),))
    raise WebhookPayloadInvalid(f"not an event PerfWatch listens to: {event!r}")

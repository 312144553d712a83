"""POST /github/webhook/: signed deliveries queue work; anything unsigned or forged changes nothing."""

import hashlib
import hmac
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.test import Client

from dashboard.benchmarks.models import Commit, Repository
from dashboard.github.models import PullRequest, PullRequestState, TrackingIssue, WebhookDelivery
from dashboard.github.tracking_issues import tracking_issue_add
from tests.factories import CommitFactory
from tests.github.recorded_github import FIXTURES, FakeGitHubRecordedServer
from tests.github.test_gitmirror import LocalVllmLikeRepository
from workers.celery import app

pytestmark = pytest.mark.django_db

URL = "/github/webhook/"
SECRET = "webhook-secret-for-tests"
# GitHub's documented example (docs: "Validating webhook deliveries", testing the webhook payload).
DOCUMENTED_SECRET = "It's a Secret to Everybody"
DOCUMENTED_PAYLOAD = b"Hello, World!"
DOCUMENTED_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
VLLM = "vllm-project/vllm"


def signed(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def deliver(
    client: Client,
    event: str,
    payload: dict,
    *,
    signature: str | None = "sign",
    delivery: str | None = None,
) -> tuple[int, dict]:
    body = json.dumps(payload).encode()
    headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery or str(uuid.uuid4())}
    if signature is not None:
        headers["X-Hub-Signature-256"] = signed(body) if signature == "sign" else signature
    response = client.post(URL, data=body, content_type="application/json", headers=headers)
    return response.status_code, (response.json() if response.content else {})


@pytest.fixture(autouse=True)
def webhook_secret(settings) -> None:
    settings.GITHUB_WEBHOOK_SECRET = SECRET


@pytest.fixture
def tasks_run_inline() -> Iterator[None]:
    """Queued tasks run in this process when the transaction commits, as a worker would run them."""
    app.conf.task_always_eager, app.conf.task_eager_propagates = True, True
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = False, False


@pytest.fixture
def remote(tmp_path: Path, settings) -> LocalVllmLikeRepository:
    repository = LocalVllmLikeRepository(tmp_path / "vllm")
    repository.commit(
        "[Perf] Adaptive scheduler token budget for Kimi K3 (#50383)",
        files={"vllm/v1/core/sched/scheduler.py": "TOKEN_BUDGET = 'adaptive'\n"},
        when="2026-08-03T17:40:05-07:00",
    )
    settings.PERFWATCH_GIT_REMOTE = str(repository.path)
    settings.PERFWATCH_GIT_MIRROR_DIR = str(tmp_path / "mirror.git")
    settings.PERFWATCH_COMMIT_SOURCE = "mirror"
    return repository


def push_payload(ref: str = "refs/heads/main", repo: str = VLLM) -> dict:
    return {"ref": ref, "before": "0" * 40, "after": "1" * 40, "repository": {"full_name": repo}}


def test_githubs_documented_test_vector_is_accepted(client, settings):
    settings.GITHUB_WEBHOOK_SECRET = DOCUMENTED_SECRET

    response = client.post(
        URL,
        data=DOCUMENTED_PAYLOAD,
        content_type="text/plain",
        HTTP_X_GITHUB_EVENT="ping",
        HTTP_X_HUB_SIGNATURE_256=DOCUMENTED_SIGNATURE,
    )

    assert response.status_code == 200


def test_a_forged_signature_is_refused_and_changes_nothing(
    client, remote, tasks_run_inline, django_capture_on_commit_callbacks
):
    forged = signed(json.dumps(push_payload()).encode(), secret="guessed-secret")

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        status, _ = deliver(client, "push", push_payload(), signature=forged)

    assert status == 403
    assert callbacks == []
    assert Commit.objects.count() == 0


def test_a_missing_signature_is_refused(client, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        status, body = deliver(client, "push", push_payload(), signature=None)

    assert (status, callbacks) == (403, [])
    assert "X-Hub-Signature-256" in body["error"]


def test_without_a_configured_secret_every_delivery_is_refused(client, settings):
    settings.GITHUB_WEBHOOK_SECRET = ""

    status, _ = deliver(
        client, "push", push_payload(), signature=signed(json.dumps(push_payload()).encode(), "")
    )

    assert status == 403


def test_an_event_not_listened_to_gets_204(client):
    status, _ = deliver(client, "star", {"action": "created", "repository": {"full_name": VLLM}})

    assert status == 204


def test_only_post_is_allowed(client):
    assert client.get(URL).status_code == 405


def test_a_push_to_main_syncs_the_commits(
    client, remote, tasks_run_inline, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        status, body = deliver(client, "push", push_payload())

    assert (status, body) == (202, {"queued": ["perfwatch.github_commits_sync"]})
    assert list(Commit.objects.values_list("sha", "pr_number", "position")) == [
        (remote.git("rev-parse", "main"), 50383, 0)
    ]


def test_a_push_to_another_branch_needs_nothing(client, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        status, body = deliver(client, "push", push_payload(ref="refs/heads/releases/v0.28.0"))

    assert (status, body, callbacks) == (200, {"queued": []}, [])


def test_an_edited_tracking_issue_is_read_again(
    client, settings, tasks_run_inline, django_capture_on_commit_callbacks
):
    issue = tracking_issue_add(repo=VLLM, number=50587)
    recorded = json.loads((FIXTURES / "recorded-issue-50587.json").read_text())["response"]["body"]
    payload = {
        "action": "edited",
        "issue": recorded,
        "changes": {"body": {"from": ""}},
        "repository": {"full_name": VLLM},
    }

    with FakeGitHubRecordedServer("recorded-issue-50587.json") as server:
        settings.GITHUB_API_URL = server.base_url
        with django_capture_on_commit_callbacks(execute=True):
            status, body = deliver(client, "issues", payload)

    assert (status, body) == (202, {"queued": ["perfwatch.github_tracking_issue_sync"]})
    issue.refresh_from_db()
    assert issue.title == "[RFC][Tracking]: Kimi K3 Performance Optimization"
    assert issue.items.count() > 10


def test_an_edit_of_an_issue_not_tracked_needs_nothing(client, django_capture_on_commit_callbacks):
    payload = {"action": "edited", "issue": {"number": 1}, "repository": {"full_name": VLLM}}

    with django_capture_on_commit_callbacks() as callbacks:
        status, _ = deliver(client, "issues", payload)

    assert (status, callbacks) == (200, [])
    assert TrackingIssue.objects.count() == 0


def test_a_merged_tracked_pr_gets_its_merge_commit(
    client, tasks_run_inline, django_capture_on_commit_callbacks
):
    repository = Repository.objects.create(full_name=VLLM)
    tracked = PullRequest.objects.create(repository=repository, number=50383)
    merge = CommitFactory(repository=repository, sha="7c50debc32cc0c35db4ff72516224142ba9d0dd7")
    pull = json.loads((FIXTURES / "recorded-pull-50383.json").read_text())["response"]["body"]
    payload = {"action": "closed", "number": 50383, "pull_request": pull, "repository": {"full_name": VLLM}}

    with django_capture_on_commit_callbacks(execute=True):
        status, body = deliver(client, "pull_request", payload)

    assert (status, body) == (202, {"queued": ["perfwatch.github_pull_request_record"]})
    tracked.refresh_from_db()
    assert (tracked.state, tracked.merge_commit, tracked.author) == (
        PullRequestState.MERGED,
        merge,
        "WoosukKwon",
    )


def test_a_pr_no_tracking_issue_lists_needs_nothing(client, django_capture_on_commit_callbacks):
    pull = json.loads((FIXTURES / "recorded-pull-50383.json").read_text())["response"]["body"]
    payload = {"action": "closed", "number": 50383, "pull_request": pull, "repository": {"full_name": VLLM}}

    with django_capture_on_commit_callbacks() as callbacks:
        status, _ = deliver(client, "pull_request", payload)

    assert (status, callbacks) == (200, [])
    assert PullRequest.objects.count() == 0


def test_a_signed_payload_without_what_its_event_needs_is_a_400(client):
    status, body = deliver(client, "push", {"zen": "Design for failure."})

    assert status == 400
    assert body["error"].startswith("unreadable push payload: field 'repository': required")


def _merged_pull_payload(*, updated_at: str, title: str) -> dict:
    pull = json.loads((FIXTURES / "recorded-pull-50383.json").read_text())["response"]["body"]
    pull = {**pull, "updated_at": updated_at, "title": title}
    return {"action": "closed", "number": 50383, "pull_request": pull, "repository": {"full_name": VLLM}}


def test_a_redelivered_delivery_is_answered_and_queues_nothing(
    client, tasks_run_inline, django_capture_on_commit_callbacks
):
    repository = Repository.objects.create(full_name=VLLM)
    PullRequest.objects.create(repository=repository, number=50383)
    payload = _merged_pull_payload(updated_at="2026-08-04T00:41:02Z", title="first")
    delivery = "72d3162e-cc78-11e3-81ab-4c9367dc0958"

    with django_capture_on_commit_callbacks(execute=True) as first:
        assert deliver(client, "pull_request", payload, delivery=delivery)[0] == 202
    with django_capture_on_commit_callbacks(execute=True) as again:
        for _ in range(4):
            assert deliver(client, "pull_request", payload, delivery=delivery) == (
                200,
                {"queued": [], "duplicate": True},
            )

    assert (len(first), len(again)) == (1, 0)
    assert WebhookDelivery.objects.filter(delivery_id=delivery).count() == 1


def test_a_captured_body_sent_again_under_a_new_delivery_id_queues_nothing(
    client, tasks_run_inline, django_capture_on_commit_callbacks
):
    repository = Repository.objects.create(full_name=VLLM)
    tracked = PullRequest.objects.create(repository=repository, number=50383)
    payload = _merged_pull_payload(updated_at="2026-08-04T00:41:02Z", title="first")

    with django_capture_on_commit_callbacks(execute=True) as first:
        assert deliver(client, "pull_request", payload)[0] == 202
    PullRequest.objects.filter(pk=tracked.pk).update(title="changed since")
    with django_capture_on_commit_callbacks(execute=True) as replayed:
        for _ in range(3):
            assert deliver(client, "pull_request", payload) == (200, {"queued": [], "duplicate": True})

    assert (len(first), len(replayed)) == (1, 0)
    assert WebhookDelivery.objects.count() == 1
    assert PullRequest.objects.get(pk=tracked.pk).title == "changed since"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"title": "Fix \x00 crash"}, "pull_request.title"),
        ({"title": "lone \ud800"}, "pull_request.title"),
        ({"title": "t" * 1001}, "pull_request.title"),
        ({"number": 2**40}, "pull_request.number"),
        ({"merge_commit_sha": "not-a-sha"}, "pull_request.merge_commit_sha"),
        ({"user": {"login": "a\x00b"}}, "pull_request.user.login"),
        ({"state": "exploded"}, "pull_request.state"),
    ],
)
def test_a_pr_field_that_cannot_be_stored_is_a_400_before_anything_is_queued(
    client, django_capture_on_commit_callbacks, change, field
):
    repository = Repository.objects.create(full_name=VLLM)
    PullRequest.objects.create(repository=repository, number=50383)
    payload = _merged_pull_payload(updated_at="2026-08-04T00:41:02Z", title="x")
    payload["pull_request"].update(change)

    with django_capture_on_commit_callbacks() as callbacks:
        status, body = deliver(client, "pull_request", payload)

    assert status == 400 and f"field {field!r}" in body["error"], body
    assert callbacks == [] and not WebhookDelivery.objects.exists()


def test_a_delivery_that_failed_is_acted_on_when_github_retries_it(client):
    delivery = "0b989ba4-242f-11e5-81e1-c7b6966d2516"

    assert deliver(client, "push", {"zen": "Design for failure."}, delivery=delivery)[0] == 400
    assert not WebhookDelivery.objects.exists()
    assert deliver(client, "push", push_payload(ref="refs/heads/other"), delivery=delivery)[0] == 200


@pytest.mark.parametrize("header", ["", "x" * 101, "../../etc", "72d3162e cc78"])
def test_a_delivery_without_a_well_formed_id_is_a_400(client, header):
    body = json.dumps(push_payload()).encode()
    response = client.post(
        URL,
        data=body,
        content_type="application/json",
        headers={"X-GitHub-Event": "push", "X-GitHub-Delivery": header, "X-Hub-Signature-256": signed(body)},
    )

    assert response.status_code == 400
    assert "X-GitHub-Delivery" in response.json()["error"]


def test_an_older_delivery_does_not_revert_a_prs_stored_state(
    client, tasks_run_inline, django_capture_on_commit_callbacks
):
    repository = Repository.objects.create(full_name=VLLM)
    tracked = PullRequest.objects.create(repository=repository, number=50383)
    newer = _merged_pull_payload(updated_at="2026-08-05T10:00:00Z", title="the newer title")
    older = _merged_pull_payload(updated_at="2026-08-04T00:41:02Z", title="the older title")

    with django_capture_on_commit_callbacks(execute=True):
        deliver(client, "pull_request", newer)
        deliver(client, "pull_request", older)

    tracked.refresh_from_db()
    assert tracked.title == "the newer title"
    assert tracked.github_updated_at == datetime(2026, 8, 5, 10, 0, tzinfo=UTC)


def test_a_delivery_with_an_unreadable_updated_at_is_a_400(client):
    repository = Repository.objects.create(full_name=VLLM)
    PullRequest.objects.create(repository=repository, number=50383)
    payload = _merged_pull_payload(updated_at="yesterday", title="x")

    status, body = deliver(client, "pull_request", payload)

    assert status == 400 and "field 'pull_request.updated_at'" in body["error"]
    assert not WebhookDelivery.objects.exists()


def test_delivery_ids_are_kept_for_thirty_days(client):
    stale = WebhookDelivery.objects.create(delivery_id="old-delivery", event="push")
    WebhookDelivery.objects.filter(pk=stale.pk).update(received_at=datetime(2020, 1, 1, tzinfo=UTC))
    recent = WebhookDelivery.objects.create(delivery_id="recent-delivery", event="push")

    assert deliver(client, "push", push_payload(ref="refs/heads/other"))[0] == 200

    assert set(WebhookDelivery.objects.values_list("delivery_id", flat=True)) >= {recent.delivery_id}
    assert not WebhookDelivery.objects.filter(pk=stale.pk).exists()

"""Tracking issues configured in the admin, and the scheduled tasks that keep GitHub data fresh."""

import pytest
from django.contrib.auth.models import User
from django.test import Client

from dashboard.benchmarks.models import Commit, Repository
from dashboard.github.models import TrackingIssue
from dashboard.github.tracking_issues import tracking_issue_add
from tests.github.recorded_github import FakeGitHubRecordedServer
from tests.github.test_gitmirror import LocalVllmLikeRepository
from workers.celery import app
from workers.tasks import github_commits_sync, github_tracking_issues_sync

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client: Client) -> Client:
    client.force_login(User.objects.create_superuser("admin", "admin@example.com", "password"))
    return client


def test_a_tracking_issue_is_added_in_the_admin(admin_client):
    repository = Repository.objects.create(full_name="vllm-project/vllm")

    response = admin_client.post(
        "/admin/github/trackingissue/add/", {"repository": repository.pk, "number": 50587, "is_active": "on"}
    )

    assert response.status_code == 302
    assert TrackingIssue.objects.get().label == "vllm-project/vllm#50587"


def test_the_admin_syncs_selected_tracking_issues_now(admin_client, settings):
    issue = tracking_issue_add(repo="vllm-project/vllm", number=50587)

    with FakeGitHubRecordedServer("recorded-issue-50587.json") as server:
        settings.GITHUB_API_URL = server.base_url
        response = admin_client.post(
            "/admin/github/trackingissue/",
            {"action": "sync_now", "_selected_action": [issue.pk]},
            follow=True,
        )

    # Django capitalises messages: "Vllm-project/vllm#50587: …".
    assert "llm-project/vllm#50587: 15 PRs, 0 on main" in response.content.decode()
    issue.refresh_from_db()
    assert issue.title == "[RFC][Tracking]: Kimi K3 Performance Optimization"


def test_the_scheduled_tracking_sync_reads_every_active_issue(settings):
    active = tracking_issue_add(repo="vllm-project/vllm", number=50587)
    inactive = tracking_issue_add(repo="vllm-project/vllm", number=99999999)
    inactive.is_active = False
    inactive.save()

    with FakeGitHubRecordedServer("recorded-issue-50587.json") as server:
        settings.GITHUB_API_URL = server.base_url
        synced = github_tracking_issues_sync()

    assert synced == [active.pk]
    assert server.received[0].path == "/repos/vllm-project/vllm/issues/50587"


def test_the_scheduled_commit_sync_follows_the_configured_mirror(tmp_path, settings):
    remote = LocalVllmLikeRepository(tmp_path / "vllm")
    remote.commit(
        "[Core] Refactor KV cache manager bookkeeping (#50511)",
        files={"vllm/a.py": "x = 1\n"},
        when="2026-08-02T10:00:00Z",
    )
    settings.PERFWATCH_GIT_REMOTE = str(remote.path)
    settings.PERFWATCH_GIT_MIRROR_DIR = str(tmp_path / "mirror.git")

    assert github_commits_sync() == 1
    assert github_commits_sync() == 0
    assert Commit.objects.get().pr_number == 50511


def test_both_syncs_are_on_the_beat_schedule():
    tasks = {entry["task"] for entry in app.conf.beat_schedule.values()}

    assert {"perfwatch.github_commits_sync", "perfwatch.github_tracking_issues_sync"} <= tasks

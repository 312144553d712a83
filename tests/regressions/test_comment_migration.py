"""Notes written before comments existed become the first comment of their group, by whoever wrote them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("regressions", "0004_alertgroup_range_reason")]
AFTER = [("regressions", "0005_group_comments_and_alert_status_override")]


def _apps_at(targets: list[tuple[str, str]]):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


@pytest.fixture(autouse=True)
def _back_to_the_latest_schema():
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_notes_become_the_first_comment_and_untouched_alerts_follow_their_group() -> None:
    old = _apps_at(BEFORE)
    user = old.get_model("auth", "User").objects.create(username="triager", is_staff=True)
    repository = old.get_model("benchmarks", "Repository").objects.create(full_name="vllm-project/vllm")
    Commit = old.get_model("benchmarks", "Commit")
    base = Commit.objects.create(repository=repository, sha="a" * 40)
    head = Commit.objects.create(repository=repository, sha="b" * 40)
    suite = old.get_model("benchmarks", "Suite").objects.create(name="kimi-k3-8k1k")
    Series = old.get_model("benchmarks", "Series")
    group = old.get_model("regressions", "AlertGroup").objects.create(
        base_commit=base, head_commit=head, kind="regression", status="investigating", notes="Sampler moved."
    )
    Alert = old.get_model("regressions", "Alert")
    untouched, judged = (
        Alert.objects.create(
            group=group,
            series=Series.objects.create(suite=suite, hardware_class="b300", concurrency=16, metric=metric),
            kind="regression",
            before_value=1.0,
            after_value=1.1,
            change_pct=10.0,
            status=status,
        )
        for metric, status in (("ttft_ms_mean", "untriaged"), ("itl_ms_mean", "invalid"))
    )
    written = datetime(2026, 11, 2, 9, 30, tzinfo=UTC)
    event = old.get_model("regressions", "TriageEvent").objects.create(
        group=group, user=user, field="notes", old_value="", new_value="Sampler moved."
    )
    old.get_model("regressions", "TriageEvent").objects.filter(pk=event.pk).update(created_at=written)

    new = _apps_at(AFTER)

    comments = list(new.get_model("regressions", "Comment").objects.filter(group_id=group.pk))
    assert [(c.author_id, c.text, c.created_at) for c in comments] == [(user.pk, "Sampler moved.", written)]
    alerts = new.get_model("regressions", "Alert").objects
    assert (alerts.get(pk=untouched.pk).status, alerts.get(pk=untouched.pk).status_set_individually) == (
        "investigating",
        False,
    )
    assert (alerts.get(pk=judged.pk).status, alerts.get(pk=judged.pk).status_set_individually) == (
        "invalid",
        True,
    )

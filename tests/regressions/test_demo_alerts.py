"""The demo history's story, detected: the −6 % step at concurrency 16 (PR 51830) is one regression group
which stays suspected and tells no one until re-runs confirm it; its revert (PR 52034) is an improvement."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.conf import settings
from django.test import TestCase, override_settings

from dashboard.benchmarks.models import Run, RunKind
from dashboard.demo.history import (
    DEMO_HARDWARE,
    DEMO_SUITE,
    REGRESSION_PR,
    REVERT_PR,
    DemoOutcome,
    demo_load,
)
from dashboard.demo.verification import demo_groups_verify
from dashboard.regressions.detect.alerts import suite_detect_history
from dashboard.regressions.models import AlertGroup, GroupKind, GroupState, Notification
from dashboard.regressions.selectors import group_range_commits
from dashboard.regressions.sheriff.settle import history_settle
from dashboard.regressions.sheriff.verdicts import group_judge
from tests.conftest import loaded_once
from tests.regressions.conftest import Channels, notification_endpoints, tasks_eager

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def demo(django_db_setup, django_db_blocker) -> Iterator[DemoOutcome]:
    """The demo history, loaded once for the module (about ten seconds a load)."""
    with loaded_once(django_db_blocker):
        yield demo_load()


@pytest.fixture(scope="module")
def demo_detected(demo, django_db_blocker) -> Iterator[Channels]:
    """The demo detected and settled with every channel on, once for the module: its channels hold what
    the settling sent. A test that detects, verifies or sends again asks for channels of its own
    (`notification_channels`), so that what it sends is not seen by another."""
    with notification_endpoints() as channels, django_db_blocker.unblock():
        with (
            override_settings(**channels.settings()),
            tasks_eager(),
            TestCase.captureOnCommitCallbacks(execute=True),
        ):
            history_settle(notify=True)
        yield channels


# First: detection on the history as loaded, before `demo_detected` settles it for the tests after it.
def test_every_demo_group_names_exactly_a_commit_the_generator_stepped_at(demo) -> None:
    """The demo knows its truth: every group's range holds one commit that can change performance (the
    others touch only docs or CI), and it is a tracking PR's merge, the regression or its revert."""
    stepped = {step.sha: step.pr_number for step in demo.steps}
    assert not AlertGroup.objects.exists()

    suite_detect_history()

    named = []
    for group in AlertGroup.objects.select_related("base_commit", "head_commit"):
        commits = group_range_commits(group=group)
        candidates = [commit for commit in commits if commit.change_class != "docs_tests_ci"]
        assert len(candidates) == 1, f"group {group.pk} holds {[c.subject for c in commits]}"
        assert candidates[0].sha in stepped, f"group {group.pk} names {candidates[0].subject}"
        named.append(stepped[candidates[0].sha])
    assert len(named) == len(set(named))  # one group per change, never one per metric
    assert {REGRESSION_PR, REVERT_PR} <= set(named)
    # Most steps are found; the smallest PR steps may stay under the noise.
    assert len(named) >= len(stepped) - 3


def _groups_naming(pr_number: int) -> list[AlertGroup]:
    return [
        group
        for group in AlertGroup.objects.select_related("base_commit", "head_commit")
        if pr_number in [commit.pr_number for commit in group_range_commits(group=group)]
    ]


def test_the_demo_regression_is_exactly_one_regression_group_naming_pr_51830(demo_detected) -> None:
    regressions = AlertGroup.objects.filter(kind=GroupKind.REGRESSION)

    assert regressions.count() == 1
    group = regressions.get()
    assert [commit.pr_number for commit in group_range_commits(group=group)] == [REGRESSION_PR]
    throughput = group.alerts.get(
        series__suite__name=DEMO_SUITE,
        series__hardware_class=DEMO_HARDWARE,
        series__concurrency=16,
        series__metric="output_throughput_tok_s",
    )
    # The generator's step is -6.0 % (demo_truth); the detector's segment means carry the noise of the
    # few benchmarked commits between the regression and the PR before it.
    assert throughput.change_pct == pytest.approx(-6.0, abs=1.0)
    # The step is at concurrency 16 only: every alert of the group is there.
    assert set(group.alerts.values_list("series__concurrency", flat=True)) == {16}


def test_the_demo_regression_stays_suspected_and_tells_no_one_before_re_runs_confirm_it(
    demo_detected,
) -> None:
    channels = demo_detected
    group = AlertGroup.objects.get(kind=GroupKind.REGRESSION)

    assert group.state == GroupState.SUSPECTED
    assert not Notification.objects.exists()
    assert (len(channels.inbox.messages), len(channels.slack.requests), len(channels.github.requests)) == (
        0,
        0,
        0,
    )


def test_the_revert_is_an_improvement_and_improvements_send_nothing(demo_detected) -> None:
    [revert] = _groups_naming(REVERT_PR)

    assert revert.kind == GroupKind.IMPROVEMENT
    assert set(revert.alerts.values_list("kind", flat=True)) == {"improvement"}
    assert not Notification.objects.filter(group=revert).exists()
    # The tracking issue's PRs made main faster: none of their groups is judged a regression.
    assert set(AlertGroup.objects.exclude(kind=GroupKind.REGRESSION).values_list("kind", flat=True)) == {
        GroupKind.IMPROVEMENT
    }


def test_detecting_the_demo_again_creates_and_sends_nothing_new(
    demo_detected, notification_channels, eager_tasks, django_capture_on_commit_callbacks
) -> None:
    channels = notification_channels
    alerts_before = list(AlertGroup.objects.order_by("pk").values_list("pk", "kind", "magnitude_pct"))

    with django_capture_on_commit_callbacks(execute=True):
        outcome = history_settle(notify=True)

    assert outcome.alerts_created == 0
    assert list(AlertGroup.objects.order_by("pk").values_list("pk", "kind", "magnitude_pct")) == alerts_before
    assert not Notification.objects.exists()
    assert (len(channels.inbox.messages), len(channels.slack.requests), len(channels.github.requests)) == (
        0,
        0,
        0,
    )


def test_the_demos_re_runs_confirm_the_regression_and_only_then_one_message_per_channel_goes_out(
    demo_detected, notification_channels, eager_tasks, django_capture_on_commit_callbacks
) -> None:
    channels = notification_channels
    group = AlertGroup.objects.get(kind=GroupKind.REGRESSION)

    with django_capture_on_commit_callbacks(execute=True):
        states = demo_groups_verify(limit=3)

    assert states[group.pk] == GroupState.CONFIRMED
    assert set(states.values()) == {GroupState.CONFIRMED}
    assert AlertGroup.objects.filter(state=GroupState.SUSPECTED).exists()  # the rest still wait for re-runs
    repeats = Run.objects.filter(kind=RunKind.VERIFICATION, commit__in=[group.base_commit, group.head_commit])
    assert repeats.count() == 2 * settings.PERFWATCH_VERIFICATION_REPEATS
    assert sorted(Notification.objects.values_list("group_id", "channel")) == [
        (group.pk, "email"),
        (group.pk, "github"),
        (group.pk, "slack"),
    ]
    assert (len(channels.inbox.messages), len(channels.slack.requests), len(channels.github.requests)) == (
        1,
        1,
        1,
    )
    assert f"/repos/vllm-project/vllm/issues/{REGRESSION_PR}/comments" == channels.github.requests[0].path

    # Judging it again finds it settled: nothing more is sent.
    with django_capture_on_commit_callbacks(execute=True):
        assert group_judge(group_id=group.pk) == GroupState.CONFIRMED
    assert (len(channels.inbox.messages), len(channels.slack.requests), len(channels.github.requests)) == (
        1,
        1,
        1,
    )

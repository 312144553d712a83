"""The culprit search of confirmed ranges: one forced run where it tells most (the middle commit of an
unbenchmarked range), a posterior that moves as results arrive, and the range narrowed to the culprit once
one commit holds it, without a second group or a second message."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import pytest
from django.test import Client

from dashboard.benchmarks.models import Commit, Measurement, Run, RunKind, RunStatus, Series, Suite
from dashboard.regressions.detect.alerts import run_detect
from dashboard.regressions.models import Alert, AlertGroup, GroupState, Notification
from dashboard.regressions.sheriff.search import group_search
from dashboard.regressions.sheriff.settle import run_settle
from tests.conftest import DispatchLog
from tests.factories import CommitFactory, run_with_values
from tests.regressions.conftest import noisy, suite_create
from tests.regressions.test_alerts import THROUGHPUT

pytestmark = pytest.mark.django_db

BEFORE, AFTER = 725.0, 681.5
GAP = range(30, 37)  # commits 30-36 are not benchmarked; 37 is the first one measured after the gap
STEP_AT = 35  # the culprit: the first commit at the lower level


@dataclass(frozen=True)
class Gapped:
    suite: Suite
    commits: list[Commit]
    last_run: Run


@pytest.fixture
def dispatched(dispatched: DispatchLog) -> list[int]:
    """The runs whose message would go out to a GPU node (there is none here)."""
    return dispatched.runs


def _level(index: int) -> float:
    return noisy(BEFORE if index < STEP_AT else AFTER, index)


def gapped_history(*, suite: Suite | None = None, docs_only: tuple[int, ...] = ()) -> Gapped:
    """67 commits with a -6 % throughput step at commit 35, of which commits 30-36 were never benchmarked."""
    suite = suite or suite_create()
    commits = [cast(Commit, CommitFactory()) for _ in range(67)]
    for index in docs_only:
        Commit.objects.filter(pk=commits[index].pk).update(change_class="docs_tests_ci")
    runs = [
        run_with_values(commit=commit, suite=suite, values={(16, THROUGHPUT): _level(index)})
        for index, commit in enumerate(commits)
        if index not in GAP
    ]
    return Gapped(suite=suite, commits=commits, last_run=runs[-1])


def _complete(run: Run, *, value: float) -> None:
    """What a runner's completion stores for a bisection run."""
    series = Series.objects.get(suite=run.suite, hardware_class=run.hardware_class, metric=THROUGHPUT)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED)
    Measurement.objects.create(run=run, series=series, commit=run.commit, value=value)


def confirm(history: Gapped) -> AlertGroup:
    """Detect the step, and let its verification runs (each measuring its commit's level) confirm it."""
    run_settle(run_id=history.last_run.pk)
    repeats = Run.objects.filter(status=RunStatus.QUEUED, kind=RunKind.VERIFICATION)
    while (repeat := repeats.first()) is not None:
        _complete(repeat, value=_level(history.commits.index(repeat.commit)))
        run_settle(run_id=repeat.pk)
    group = AlertGroup.objects.get()
    assert group.state == GroupState.CONFIRMED
    return group


def test_a_suspected_group_is_not_bisected(dispatched) -> None:
    history = gapped_history()
    run_detect(run_id=history.last_run.pk)

    assert AlertGroup.objects.get().state == GroupState.SUSPECTED
    assert group_search(group_id=AlertGroup.objects.get().pk).queued == []
    assert not Run.objects.filter(kind=RunKind.BISECTION).exists()


def test_a_new_regression_over_a_gap_queues_one_forced_run_at_the_middle_commit(dispatched) -> None:
    history = gapped_history()

    group = confirm(history)

    assert (group.base_commit, group.head_commit) == (history.commits[29], history.commits[37])
    bisection = Run.objects.get(status=RunStatus.QUEUED)
    assert bisection.commit == history.commits[33]
    assert (bisection.suite, bisection.hardware_class, bisection.kind) == (history.suite, "b300", "bisection")
    assert dispatched[-1] == bisection.pk


def test_bisecting_again_queues_nothing_new(dispatched) -> None:
    history = gapped_history()
    group = confirm(history)
    sent = len(dispatched)

    assert group_search(group_id=group.pk).queued == []
    run_settle(run_id=history.last_run.pk)

    assert Run.objects.filter(status=RunStatus.QUEUED).count() == 1
    assert len(dispatched) == sent


def test_a_docs_only_commit_starts_with_a_low_prior_but_not_zero(dispatched) -> None:
    history = gapped_history(docs_only=(33,))

    group = confirm(history)

    posterior = {row["sha"]: row["probability"] for row in group.evidence["search"]["posterior"]}
    docs, other = posterior[history.commits[33].sha], posterior[history.commits[34].sha]
    assert 0 < docs < other / 10


def test_a_release_suite_is_never_bisected(dispatched) -> None:
    releases = suite_create(name="kimi-k3-releases", install_settings={"method": "pypi_release"})
    history = gapped_history(suite=releases)

    run_detect(run_id=history.last_run.pk)

    assert group_search(group_id=AlertGroup.objects.get().pk).queued == []
    assert not Run.objects.filter(status=RunStatus.QUEUED).exists()
    assert dispatched == []


def test_the_middle_measurement_narrows_the_range_of_the_same_group_without_a_second_message(
    dispatched: list[int],
    notification_channels: Any,
    eager_tasks: None,
    django_capture_on_commit_callbacks: Any,
) -> None:
    history = gapped_history()
    with django_capture_on_commit_callbacks(execute=True):
        group = confirm(history)
    alerts = list(Alert.objects.values_list("pk", "group_id"))
    notifications = list(Notification.objects.order_by("pk").values_list("pk", "status"))
    assert len(notification_channels.inbox.messages) == 1

    first = Run.objects.get(status=RunStatus.QUEUED)
    _complete(first, value=_level(33))
    with django_capture_on_commit_callbacks(execute=True):
        run_settle(run_id=first.pk)

    searched = AlertGroup.objects.get()
    assert searched.pk == group.pk
    # The range stays until one commit holds the change; the posterior moved to commits 34-37.
    assert (searched.base_commit, searched.head_commit) == (history.commits[29], history.commits[37])
    posterior = {row["sha"]: row["probability"] for row in searched.evidence["search"]["posterior"]}
    assert sum(posterior[history.commits[index].sha] for index in range(34, 38)) > 0.99
    assert list(Alert.objects.values_list("pk", "group_id")) == alerts
    assert list(Notification.objects.order_by("pk").values_list("pk", "status")) == notifications
    assert len(notification_channels.inbox.messages) == 1
    assert len(notification_channels.slack.requests) == 1
    # The next half: commits 34-37 remain, and the middle run between them is queued.
    second = Run.objects.get(status=RunStatus.QUEUED)
    assert second.commit == history.commits[35]


def test_bisection_ends_at_the_culprit_commit(dispatched) -> None:
    history = gapped_history()
    confirm(history)

    steps = 0
    bisection = Run.objects.filter(status=RunStatus.QUEUED, kind=RunKind.BISECTION)
    while (pending := bisection.first()) is not None:
        index = history.commits.index(pending.commit)
        _complete(pending, value=_level(index))
        run_settle(run_id=pending.pk)
        steps += 1

    group = AlertGroup.objects.get()
    assert (group.base_commit, group.head_commit) == (history.commits[STEP_AT - 1], history.commits[STEP_AT])
    # Eight possible culprits halved three times, then a second run at each side of the boundary: one
    # run alone never names a commit.
    assert steps == 5
    assert Alert.objects.count() == 1
    assert group.evidence["search"]["culprit"] == history.commits[STEP_AT].sha
    assert group.events.get(field="range").new_value.startswith(
        f"{history.commits[STEP_AT - 1].short_sha}..{history.commits[STEP_AT].short_sha} (culprit at"
    )


def test_the_group_page_says_what_bisection_is_doing(dispatched) -> None:
    history = gapped_history()
    group = confirm(history)
    bisection = Run.objects.get(status=RunStatus.QUEUED)

    page = Client().get(f"/alerts/{group.pk}/").content.decode()
    assert f"run #{bisection.pk}</a> at <code>{history.commits[33].short_sha}</code> queued" in page

    AlertGroup.objects.filter(pk=group.pk).update(
        base_commit=history.commits[34], head_commit=history.commits[35]
    )
    page = Client().get(f"/alerts/{group.pk}/").content.decode()
    assert "Culprit narrowed to one commit" in page
    assert "Bisecting" not in page

"""Beyond its suite's daily GPU-hour budget, a suspected change's repeats and a confirmed one's search runs
are not dropped until tomorrow: they are queued for spare node time, taken after every new commit and
before backfill, and they spend none of the budget."""

from __future__ import annotations

import pytest

from dashboard.benchmarks.models import Run, RunKind, RunStatus
from dashboard.benchmarks.runs import run_enqueue
from dashboard.regressions.models import GroupState
from dashboard.regressions.sheriff.budget import suite_budget_use
from dashboard.regressions.sheriff.search import group_search
from dashboard.regressions.sheriff.verdicts import group_verify
from tests.conftest import DispatchLog
from tests.regressions.test_search import BASE, HEAD, World, _step

pytestmark = pytest.mark.django_db


def test_repeats_beyond_the_budget_wait_for_spare_time_after_new_commits_and_before_backfill(
    settings, dispatched: DispatchLog
) -> None:
    world = World(level=_step(33, factor=0.9), benchmarked=lambda index: index <= 40, seed=4)
    group = world.suspected(base=32, head=33, change_pct=-10.0)
    settings.PERFWATCH_SUITE_DAILY_GPU_HOURS = 0.0
    backfill = run_enqueue(commit=world.commits[50], suite=world.suite, kind=RunKind.BACKFILL)

    repeats = group_verify(group_id=group.pk)
    routine = run_enqueue(commit=world.commits[66], suite=world.suite, kind=RunKind.ROUTINE)

    assert len(repeats) == 2 * settings.PERFWATCH_VERIFICATION_REPEATS
    assert all(run.spare_time and run.kind == RunKind.VERIFICATION for run in repeats)
    order = list(Run.objects.in_dispatch_order().values_list("pk", flat=True))
    assert order == [routine.pk, *(run.pk for run in repeats), backfill.pk]
    # Celery is told the same order.
    priorities = {message.args[0]: message.options["priority"] for message in dispatched.sent if message.args}
    assert priorities[routine.pk] < priorities[repeats[0].pk] < priorities[backfill.pk]
    assert suite_budget_use(suite=world.suite).spent_gpu_hours == 0.0
    assert group_verify(group_id=group.pk) == []  # queued once


def test_a_search_beyond_the_budget_goes_on_in_spare_time(settings) -> None:
    world = World(level=_step(33, factor=0.9), benchmarked=lambda i: not BASE < i < HEAD, seed=6)
    group = world.confirmed()
    settings.PERFWATCH_SUITE_DAILY_GPU_HOURS = 0.0

    step = group_search(group_id=group.pk)

    assert [run.spare_time for run in step.queued] == [True]
    assert Run.objects.get(pk=step.queued[0].pk).status == RunStatus.QUEUED
    assert world.search(group)[-1] in (32, 33)
    group.refresh_from_db()
    assert group.state == GroupState.CONFIRMED
    assert world.range_of(group) == (32, 33)

"""Outlier runs are run again: a run that fits neither side of its neighbours is a slow run, or a change
too short for detection to see (a regression reverted one or two commits later, a two-commit excursion).

Detection leaves such a point out, and with one run it cannot tell which it is. Its commit is run again
until it has `REPEATED_RUNS` runs: a slow run is then outvoted by the median of its commit's runs, while a
real short change becomes a level of its own, and the changes into and out of it are located, verified
and searched as any other. A commit is run again once: runs already there or waiting count toward its
repeats. The repeats are speculative (most outliers are slow runs), so they are backfill: taken when a
node has nothing else to do, spending none of the suite's budget that suspected changes wait on, and
never counted as a group's fresh repeats.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.db import transaction

from dashboard.benchmarks.models import PENDING_RUN_STATUSES, Commit, Run, RunKind, RunStatus, Suite
from dashboard.benchmarks.runs import run_enqueue
from dashboard.regressions.detect.alerts import OutlierPoint
from dashboard.regressions.detect.attribution import REPEATED_RUNS

logger = logging.getLogger(__name__)


def outliers_recheck(*, outliers: Iterable[OutlierPoint]) -> list[Run]:
    """Queue the runs each outlier commit lacks to reach REPEATED_RUNS runs. Idempotent."""
    queued: list[Run] = []
    for point in sorted(outliers, key=lambda item: (item.suite_id, item.hardware_class, item.commit_id)):
        with transaction.atomic():
            # The suite's row lock serialises two workers rechecking the same commit.
            suite = Suite.objects.select_for_update().filter(pk=point.suite_id, is_active=True).first()
            commit = Commit.objects.filter(pk=point.commit_id).first()
            if suite is None or commit is None or suite.installs_releases:
                continue
            runs = Run.objects.filter(
                commit=commit,
                suite=suite,
                hardware_class=point.hardware_class,
                status__in=(RunStatus.SUCCEEDED, *PENDING_RUN_STATUSES),
            ).count()
            for _ in range(REPEATED_RUNS - runs):
                queued.append(
                    run_enqueue(
                        commit=commit,
                        suite=suite,
                        hardware_class=point.hardware_class,
                        forced=True,
                        kind=RunKind.BACKFILL,
                    )
                )
    if queued:
        logger.info("outlier commits run again: runs %s", [run.pk for run in queued])
    return queued

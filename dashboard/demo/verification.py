"""Re-runs for the embedded demo, which has no runner node: each verification run of a suspected group's
base and head is drawn from the demo's own model at that commit (its true values with fresh run-to-run
noise for every metric and level, as a real repeat differs), stored by the one results writer and judged
by the same rule as real repeats, so the demo shows groups going from suspected to confirmed with their
verification runs."""

from __future__ import annotations

import random
from datetime import timedelta

from django.conf import settings
from django.db import transaction

from dashboard.benchmarks.models import Run, RunKind, RunStatus
from dashboard.benchmarks.services import run_results_store
from dashboard.demo.history import demo_accuracy_store, demo_report, demo_run_create
from dashboard.demo.model import DEMO_SEED, demo_model
from dashboard.regressions.models import Alert, AlertGroup, GroupKind, GroupState
from dashboard.regressions.selectors import group_range_commits
from dashboard.regressions.sheriff.verdicts import group_judge


def demo_groups_verify(*, limit: int = 4, seed: int = DEMO_SEED) -> dict[int, str]:
    """Verify up to `limit` suspected demo groups whose range is one commit (the regression first, then
    the largest): returns each verified group's state afterwards."""
    model = demo_model(seed=seed)
    rng = random.Random(seed + 3)  # the re-runs' noise, apart from the history's
    run_rng = random.Random(seed + 1)  # the runs' stages and telemetry, apart from the numbers' noise
    groups = sorted(
        AlertGroup.objects.filter(state=GroupState.SUSPECTED).select_related("base_commit", "head_commit"),
        key=lambda group: (group.kind != GroupKind.REGRESSION, -abs(group.magnitude_pct or 0.0), group.pk),
    )
    states: dict[int, str] = {}
    for group in groups:
        if len(states) >= limit:
            break
        if len(group_range_commits(group=group)) != 1:
            continue  # a wider range would need bisection runs, which only a runner node can make
        pairs = set(
            group.alerts.filter(source=Alert.Source.DETECTOR).values_list(
                "series__suite_id", "series__hardware_class"
            )
        )
        made: list[Run] = []
        with transaction.atomic():
            for suite_id, hardware_class in sorted(pairs):
                for repeat in range(settings.PERFWATCH_VERIFICATION_REPEATS):
                    for commit in (group.base_commit, group.head_commit):  # interleaved, as a node runs them
                        first = (
                            Run.objects.filter(
                                commit=commit,
                                suite_id=suite_id,
                                hardware_class=hardware_class,
                                status=RunStatus.SUCCEEDED,
                            )
                            .select_related("suite", "runner")
                            .order_by("pk")
                            .first()
                        )
                        if first is None or first.finished_at is None or first.runner is None:
                            continue
                        run = demo_run_create(
                            commit=commit,
                            suite=first.suite,
                            runner=first.runner,
                            finished_at=first.finished_at + timedelta(hours=3 + repeat),
                            kind=RunKind.VERIFICATION,
                            rng=run_rng,
                        )
                        position = commit.position or 0
                        report = demo_report(model=model, suite=first.suite, position=position, rng=rng)
                        run_results_store(run=run, report=report, raw_report=None, detect=False)
                        demo_accuracy_store(model=model, run=run, position=position, rng=rng)
                        made.append(run)
            # In the demo's story the group was found just before its re-runs were queued: they are fresh.
            if made:
                first_queued = min(run.queued_at for run in made if run.queued_at is not None)
                AlertGroup.objects.filter(pk=group.pk).update(created_at=first_queued)
        states[group.pk] = group_judge(group_id=group.pk)
    return states

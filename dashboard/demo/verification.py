"""Re-runs for the embedded demo, which has no runner node: each verification run of a suspected group's
base and head is drawn from the demo's own model of that commit (its first run's numbers with fresh
run-to-run noise), stored by the one results writer and judged by the same rule as real repeats, so the
demo shows groups going from suspected to confirmed with their verification runs."""

from __future__ import annotations

import math
import random
from collections import defaultdict
from datetime import timedelta

from django.conf import settings
from django.db import transaction

from dashboard.benchmarks.models import Measurement, Run, RunKind, RunStatus, metric_higher_is_better
from dashboard.benchmarks.services import run_results_store
from dashboard.demo.history import demo_run_create
from dashboard.regressions.models import Alert, AlertGroup, GroupKind, GroupState
from dashboard.regressions.selectors import group_range_commits
from dashboard.regressions.sheriff.verdicts import group_judge
from runners.guidellm_report import GuidellmReport, LevelResult

RUN_TO_RUN_NOISE = 0.01  # the demo's repeats differ by about 1 % from run to run


def _repeat_of(*, run: Run, rng: random.Random) -> GuidellmReport:
    levels: dict[int, dict[str, float]] = defaultdict(dict)
    factor = math.exp(rng.gauss(0.0, RUN_TO_RUN_NOISE))
    for concurrency, metric, value in Measurement.objects.filter(run=run).values_list(
        "series__concurrency", "series__metric", "value"
    ):
        faster = factor if metric_higher_is_better(metric) else 1 / factor
        levels[concurrency][metric] = value * faster
    return GuidellmReport(
        guidellm_version=run.guidellm_version or "0.8.1",
        labels={},
        levels=tuple(LevelResult(concurrency=c, metrics=m) for c, m in sorted(levels.items())),
    )


def demo_groups_verify(*, limit: int = 4, seed: int = 50587) -> dict[int, str]:
    """Verify up to `limit` suspected demo groups whose range is one commit (the regression first, then
    the largest): returns each verified group's state afterwards."""
    rng = random.Random(seed)
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
                        run_results_store(
                            run=run, report=_repeat_of(run=first, rng=rng), raw_report=None, detect=False
                        )
                        made.append(run)
            # In the demo's story the group was found just before its re-runs were queued: they are fresh.
            if made:
                first_queued = min(run.queued_at for run in made if run.queued_at is not None)
                AlertGroup.objects.filter(pk=group.pk).update(created_at=first_queued)
        states[group.pk] = group_judge(group_id=group.pk)
    return states

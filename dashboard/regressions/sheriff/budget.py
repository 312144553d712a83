"""The daily GPU-hour budget of a suite's verification and bisection runs: what they cost, what is left.
Runs queued beyond it wait for spare node time (`Run.spare_time`) and spend none of it."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from dashboard.benchmarks.models import Run, RunKind, RunStatus, Suite

# A run of unknown length is budgeted at this many hours per GPU.
DEFAULT_RUN_HOURS = 0.5
EXTRA_KINDS: tuple[str, ...] = (RunKind.VERIFICATION, RunKind.BISECTION, RunKind.PROFILE)


@dataclass(frozen=True)
class BudgetUse:
    """GPU-hours a suite spent (and committed to queued runs) on verification and bisection in 24 h."""

    suite: str
    spent_gpu_hours: float
    budget_gpu_hours: float
    run_gpu_hours: float  # what one more run is expected to cost

    @property
    def allows_another(self) -> bool:
        return self.spent_gpu_hours + self.run_gpu_hours <= self.budget_gpu_hours + 1e-9


def _gpu_hours(
    started_at: datetime | None, finished_at: datetime | None, gpus: int | None, now: datetime
) -> float:
    if started_at is None:
        return 0.0
    return max(0.0, ((finished_at or now) - started_at).total_seconds() / 3600.0) * max(gpus or 1, 1)


def _budget_uses(suites: list[Suite]) -> list[BudgetUse]:
    """Each suite's use in the last 24 hours, queued runs at the cost of its recent runs; two queries."""
    now = timezone.now()
    ids = [suite.pk for suite in suites]
    costs: dict[int, list[float]] = {suite_id: [] for suite_id in ids}
    for suite_id, started_at, finished_at, gpus in Run.objects.filter(
        suite_id__in=ids,
        status=RunStatus.SUCCEEDED,
        started_at__isnull=False,
        finished_at__gte=now - timedelta(days=7),
    ).values_list("suite_id", "started_at", "finished_at", "runner__gpu_count"):
        costs[suite_id].append(_gpu_hours(started_at, finished_at, gpus, now))
    run_cost = {
        suite_id: statistics.median(hours) if hours else DEFAULT_RUN_HOURS
        for suite_id, hours in costs.items()
    }
    spent = dict.fromkeys(ids, 0.0)
    # Spare-time runs use node time that nothing else wanted: they spend none of the budget.
    extra = Run.objects.filter(
        suite_id__in=ids, kind__in=EXTRA_KINDS, queued_at__gte=now - timedelta(days=1), spare_time=False
    )
    for suite_id, status, started_at, finished_at, gpus in extra.exclude(
        status=RunStatus.CANCELLED
    ).values_list("suite_id", "status", "started_at", "finished_at", "runner__gpu_count"):
        queued = status == RunStatus.QUEUED
        spent[suite_id] += run_cost[suite_id] if queued else _gpu_hours(started_at, finished_at, gpus, now)
    return [
        BudgetUse(
            suite=suite.name,
            spent_gpu_hours=round(spent[suite.pk], 2),
            budget_gpu_hours=settings.PERFWATCH_SUITE_DAILY_GPU_HOURS,
            run_gpu_hours=round(run_cost[suite.pk], 3),
        )
        for suite in suites
    ]


def suite_budget_use(*, suite: Suite) -> BudgetUse:
    """What verification and bisection of `suite` used in the last 24 hours, queued runs at their estimate."""
    return _budget_uses([suite])[0]


def suites_budget_use() -> list[BudgetUse]:
    """Every active suite's use of its verification and bisection budget, for the runners page: three
    queries whatever the number of suites."""
    return _budget_uses(list(Suite.objects.filter(is_active=True).order_by("name")))

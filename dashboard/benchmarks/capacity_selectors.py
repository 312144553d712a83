"""Reads: a commit's load curve per suite and hardware class, with its capacity under today's objectives."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Prefetch

from dashboard.benchmarks.capacity import curve_points, suite_objectives
from dashboard.benchmarks.models import AccuracyScore, Commit, LoadLevel, Run, RunQuerySet, RunStatus, Suite
from runners.capacity import Capacity, CurvePoint, capacity_derive
from runners.suites import ObjectiveSpec


@dataclass(frozen=True)
class CommitCurve:
    """The load curve of one commit's latest succeeded run of a suite on a hardware class."""

    commit: Commit
    suite: Suite
    hardware_class: str
    run_id: int
    points: tuple[CurvePoint, ...]
    objectives: tuple[ObjectiveSpec, ...]
    capacity: Capacity | None


def _curve(run: Run) -> CommitCurve:
    objectives = suite_objectives(suite=run.suite)
    points = tuple(curve_points(list(run.load_levels.all())))
    return CommitCurve(
        commit=run.commit,
        suite=run.suite,
        hardware_class=run.hardware_class,
        run_id=run.pk,
        points=points,
        objectives=objectives,
        capacity=capacity_derive(curve=points, objectives=objectives),
    )


def _curve_runs() -> RunQuerySet:
    return (
        Run.objects.filter(status=RunStatus.SUCCEEDED, load_levels__isnull=False)
        .distinct()
        .select_related("commit__repository", "suite")
        .prefetch_related(Prefetch("load_levels", queryset=LoadLevel.objects.order_by("index")))
        .order_by("-finished_at", "-pk")
    )


def commit_load_curve(*, commit: Commit, suite: Suite, hardware_class: str) -> CommitCurve | None:
    """The commit's latest load curve of `suite` on `hardware_class`, if it has one. Two queries."""
    run = _curve_runs().filter(commit=commit, suite=suite, hardware_class=hardware_class).first()
    return _curve(run) if run is not None else None


def commit_load_curves(*, commit: Commit) -> list[CommitCurve]:
    """Per suite and hardware class, the commit's latest load curve; only curves of more than one level
    say anything, so single-level runs are left out. Two queries."""
    curves: dict[tuple[int, str], CommitCurve] = {}
    for run in _curve_runs().filter(commit=commit):
        key = (run.suite_id, run.hardware_class)
        if key not in curves and len(run.load_levels.all()) > 1:
            curves[key] = _curve(run)
    return sorted(curves.values(), key=lambda curve: (curve.suite.name, curve.hardware_class))


def commit_accuracy_scores(*, commit: Commit) -> list[AccuracyScore]:
    """Every accuracy score of the commit's succeeded runs, newest first."""
    return list(
        AccuracyScore.objects.filter(run__commit=commit, run__status=RunStatus.SUCCEEDED)
        .select_related("run__suite")
        .order_by("-run__finished_at", "name")
    )

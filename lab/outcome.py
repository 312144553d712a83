"""What a simulated history left in the database, read next to the world's truth for `lab.scores`: the
notified groups with their series and the range each was judged on, and the intervals their pages show."""

from __future__ import annotations

import math
import re
from datetime import datetime

from django.db.models import Min, Q

from dashboard.benchmarks.models import Run, RunStatus, Suite
from dashboard.regressions.models import Alert, AlertGroup, GroupState, TriageEvent
from dashboard.regressions.sheriff.evidence import TESTED
from lab.scores import GroupSeries, NotifiedGroup, Outcome, ShownInterval, TrueStep
from lab.worlds import World, step_span

_RANGE = re.compile(r"^(?P<base>[0-9a-f]+)\.\.(?P<head>[0-9a-f]+)")


def judged_ranges(positions: dict[str, int]) -> dict[int, tuple[int, int]]:
    """Each judged group's range when it was judged: the range before the first narrowing after its
    verdict (read from its triage history), else the range it has now."""
    ranges: dict[int, tuple[int, int]] = {}
    for group_id, base, head in AlertGroup.objects.exclude(state=GroupState.SUSPECTED).values_list(
        "pk", "base_commit__position", "head_commit__position"
    ):
        if base is not None and head is not None:
            ranges[group_id] = (base, head)
    verdict_event: dict[int, int] = {}
    # A verdict, not the group's opening ("suspected: ..."): a range can change between the two.
    for group_id, event_id in (
        TriageEvent.objects.filter(group_id__in=list(ranges), field="state")
        .filter(Q(new_value__startswith=GroupState.CONFIRMED) | Q(new_value__startswith=GroupState.DISMISSED))
        .order_by("pk")
        .values_list("group_id", "pk")
    ):
        verdict_event.setdefault(group_id, event_id)
    seen: set[int] = set()
    for group_id, event_id, old_value in (
        TriageEvent.objects.filter(group_id__in=list(ranges), field="range")
        .order_by("pk")
        .values_list("group_id", "pk", "old_value")
    ):
        if group_id in seen or event_id < verdict_event.get(group_id, 0):
            continue
        seen.add(group_id)
        match = _RANGE.match(old_value)
        if match and match["base"][:8] in positions and match["head"][:8] in positions:
            ranges[group_id] = (positions[match["base"][:8]], positions[match["head"][:8]])
    return ranges


def _confirmed_at() -> dict[int, datetime]:
    """When each group was first confirmed: by its verdict, or by a search that found its culprit there."""
    moments: dict[int, datetime] = {}
    for group_id, at in (
        TriageEvent.objects.filter(field="state", new_value__startswith="confirmed")
        .order_by("pk")
        .values_list("group_id", "created_at")
    ):
        moments.setdefault(group_id, at)
    return moments


def _tested_range(evidence: dict, positions: dict[str, int], judged: tuple[int, int]) -> tuple[int, int]:
    """The range a group's verdicts were computed on, as its evidence records it: a group confirmed by
    another's search, or split from one, shows that group's verdicts. Else the range it was judged on."""
    tested = evidence.get(TESTED)
    if isinstance(tested, dict):
        base = positions.get(str(tested.get("base", ""))[:8])
        head = positions.get(str(tested.get("head", ""))[:8])
        if base is not None and head is not None:
            return base, head
    return judged


def _measured_at(steps: tuple[TrueStep, ...]) -> dict[tuple[str, int], datetime]:
    """When the first run of each step's suite at or after the step's commit ended."""
    measured: dict[tuple[str, int], datetime] = {}
    for step in steps:
        first = (
            Run.objects.filter(
                suite__name=step.suite,
                status=RunStatus.SUCCEEDED,
                commit__position__gte=step.commit_index,
                finished_at__isnull=False,
            )
            .aggregate(first=Min("finished_at"))
            .get("first")
        )
        if first is not None:
            measured[(step.suite, step.commit_index)] = first
    return measured


def outcome_read(*, world: World, culprit_at: dict[int, datetime], gpu_hours: float) -> Outcome:
    """What the history left in the database, next to the world's truth."""
    from dashboard.regressions.detect.thresholds import threshold_resolve, thresholds_for_suite

    commits = list(world.commits)
    steps = tuple(
        TrueStep(
            suite=step.suite,
            commit_index=step.commit_index,
            moves=dict(step.moves),
            noise_multiple=step.noise_multiple,
            merged_at=commits[step.commit_index].merged_at,
            span=step_span(step),
            label=str(getattr(step, "label", "")),
        )
        for step in world.steps
    )
    positions = {commit.sha[:8]: index for index, commit in enumerate(commits)}
    judged = judged_ranges(positions)
    rows = {suite.pk: thresholds_for_suite(suite.pk) for suite in Suite.objects.all()}
    series_of: dict[int, list[GroupSeries]] = {}
    alerts: dict[tuple[int, int], GroupSeries] = {}
    for group_id, series_id, suite_id, suite, concurrency, metric, change_pct in Alert.objects.values_list(
        "group_id",
        "series_id",
        "series__suite_id",
        "series__suite__name",
        "series__concurrency",
        "series__metric",
        "change_pct",
    ):
        threshold = threshold_resolve(metric=metric, suite_id=suite_id, rows=rows[suite_id])
        alerts[(group_id, series_id)] = GroupSeries(
            suite=suite,
            concurrency=concurrency,
            metric=metric,
            direction=1 if change_pct > 0 else -1,
            min_relative_change=threshold.min_relative_change,
        )
    for (group_id, _), series in alerts.items():
        series_of.setdefault(group_id, []).append(series)
    # A group merged into another (its search named that group's culprit) is judged with the series it
    # held, at the culprit of the group that took them.
    merged: dict[int, int] = {}
    for group_id, evidence in AlertGroup.objects.filter(evidence__has_key="merged_into").values_list(
        "pk", "evidence"
    ):
        merged[group_id] = holder = int(evidence["merged_into"])
        held = [
            alerts[(holder, int(s))] for s in evidence.get("merged_series", []) if (holder, int(s)) in alerts
        ]
        series_of.setdefault(group_id, []).extend(held)
    ranges: dict[int, tuple[int, int]] = {
        pk: (base, head)
        for pk, base, head in AlertGroup.objects.values_list(
            "pk", "base_commit__position", "head_commit__position"
        )
        if base is not None and head is not None
    }
    notified = []
    intervals = []
    confirmed_at = _confirmed_at()
    for group_id, state, base, head, evidence, created_at, changed_at in AlertGroup.objects.exclude(
        state=GroupState.SUSPECTED
    ).values_list(
        "pk",
        "state",
        "base_commit__position",
        "head_commit__position",
        "evidence",
        "created_at",
        "state_changed_at",
    ):
        if base is None or head is None:
            continue
        judged_base, judged_head = judged.get(group_id, (base, head))
        if group_id in merged:
            base, head = ranges.get(merged[group_id], (base, head))
        if state == GroupState.CONFIRMED:
            notified.append(
                NotifiedGroup(
                    group_id=group_id,
                    series=tuple(series_of.get(group_id, ())),
                    base=base,
                    head=head,
                    judged_base=judged_base,
                    judged_head=judged_head,
                    culprit_at=culprit_at.get(group_id),
                    suspected_at=created_at,
                    confirmed_at=confirmed_at.get(group_id, changed_at),
                )
            )
        tested_base, tested_head = _tested_range(evidence or {}, positions, (judged_base, judged_head))
        for verdict in (evidence or {}).get("alerts", []):
            low, high = verdict.get("ci_low_pct"), verdict.get("ci_high_pct")
            if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
                continue
            intervals.append(
                ShownInterval(
                    suite=verdict["suite"],
                    concurrency=int(verdict["concurrency"]),
                    metric=verdict["metric"],
                    base=tested_base,
                    head=tested_head,
                    low_pct=float(low),
                    high_pct=float(high),
                    group_id=group_id,
                )
            )
    return Outcome(
        steps=steps,
        notified=tuple(notified),
        intervals=tuple(intervals),
        runs=Run.objects.filter(status=RunStatus.SUCCEEDED).count(),
        gpu_hours=gpu_hours,
        measured_at=_measured_at(steps),
    )

"""Whether a change named at one commit is the whole change: the commits on either side of its culprit.

A culprit's parent may already be part of the way to the new level (a change over two commits, or a
second change just before it), and the commits after the culprit may have moved on further the same way
(a second change a commit or two later, which detection folded into the first because one run per commit
could not tell them apart). Each side is tested on the runs stored there: the *anchor* (the parent, or
the culprit itself) against the benchmarked commits beyond it, on the group's series in their alerts'
direction. What holds opens a suspected group of its own, verified on fresh runs like any other. (Testing
the suites' other series too, either way, opened a dismissed group beside nearly every culprit of the
demo: too many tests on runs the search had picked.)

A side that cannot tell yet waits instead of giving up: an anchor with a single run, or a test that
comes close, gets `EXTRA_RUNS` more runs and is tested once more when they are in; the side after a
culprit waits for later commits to be run, at most `WAIT`. The state lives in the group's evidence
(`search.beside`), so a sweep that runs twice, or a lost message, only delays the test.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from django.db import transaction
from django.utils import timezone

from dashboard.benchmarks.direction import change_kind
from dashboard.benchmarks.models import (
    PENDING_RUN_STATUSES,
    Commit,
    Run,
    RunKind,
    RunStatus,
    Series,
    Suite,
)
from dashboard.benchmarks.runs import run_enqueue
from dashboard.regressions.detect.alert_groups import AlertValues, alerts_store, group_reopen
from dashboard.regressions.detect.thresholds import threshold_resolve, thresholds_for_suite
from dashboard.regressions.models import Alert, AlertGroup, GroupKind, GroupState, TriageEvent
from dashboard.regressions.sheriff.budget import suite_budget_use
from dashboard.regressions.sheriff.evidence import change_verdict, series_noises, values_by_position

logger = logging.getLogger(__name__)

Side = Literal["before", "after"]

# Benchmarked commits beyond the anchor (or beyond a searched range's end, the end included) whose runs
# give the level on that side, and how far away (in positions) they are looked for.
SIDE_COMMITS = 4
SIDE_WINDOW = 80
# One-sided and shared among a suite's series (Bonferroni): how clearly a side must show part of the
# change. The anchor's runs include the group's verification repeats, and what it opens is verified
# on fresh runs before anyone is told.
BESIDE_ALPHA = 0.005
# A side whose best series comes this close (shared among the series as `BESIDE_ALPHA` is) gets more runs
# and a second test.
PROMISING_P = 0.05
EXTRA_RUNS = 2
# How long the side after a culprit waits for later commits to be run before it is left untested.
WAIT = timedelta(days=2)


@dataclass(frozen=True)
class Remainder:
    """A series whose runs on the two sides differ: part of a change the culprit does not explain."""

    series: Series
    before: list[float]
    after: list[float]
    change_pct: float
    p_value: float


def second_group(
    *,
    group: AlertGroup,
    base: Commit,
    head: Commit,
    found: Sequence[Remainder],
    reason: str = "",
    why: str = "the culprit leaves a change in",
    suspected: str = "",
) -> int | None:
    """A suspected group for (base, head] holding `found`: a new one, or the dismissed group at that range
    suspected again (`group_reopen`, on fresh repeats); None when that range has a group already.
    `why` begins the line `group`'s triage history gets about it, `suspected` the new group's first."""
    second, created = AlertGroup.objects.get_or_create(
        base_commit=base,
        head_commit=head,
        defaults={
            "kind": GroupKind.REGRESSION,
            "range_reason": reason
            or f"the rest of group #{group.pk}'s change, which its culprit does not explain",
        },
    )
    # A dismissed group at that very range takes the change and is verified again, on fresh repeats only.
    reopened = (
        not created
        and second.state == GroupState.DISMISSED
        and group_reopen(group=second, why=f"group #{group.pk} leaves a change at this range", fresh=True)
    )
    if created or reopened:
        alerts_store(
            group_id=second.pk,
            alerts=[
                (
                    remainder.series,
                    AlertValues(
                        kind=change_kind(metric=remainder.series.metric, change_pct=remainder.change_pct),
                        before=statistics.median(remainder.before),
                        after=statistics.median(remainder.after),
                        change_pct=remainder.change_pct,
                        p_value=remainder.p_value,
                    ),
                )
                for remainder in found
            ],
        )
    TriageEvent.objects.create(
        group=group,
        field="search",
        new_value=(
            f"{why} {base.short_sha}..{head.short_sha}: "
            f"{'opened' if created else 'reopened' if reopened else 'already'} group #{second.pk}"
        ),
    )
    if reopened:
        return second.pk
    if not created:
        return None
    TriageEvent.objects.create(
        group=second,
        field="state",
        new_value=f"suspected: {suspected or f'what the culprit of group #{group.pk} leaves unexplained'}",
    )
    return second.pk


@dataclass(frozen=True)
class _Test:
    found: list[Remainder]
    beyond: list[int]  # positions of the benchmarked commits beyond the anchor, nearest first
    promising: bool  # close enough to be worth more runs
    anchor_runs: int
    beyond_runs: int


def _pair_test(
    *,
    suite: Suite,
    hardware_class: str,
    series: Sequence[Series],
    anchor: Commit,
    side: Side,
    directions: dict[int, float],
) -> _Test:
    position = anchor.position
    assert position is not None
    runs = Run.objects.filter(
        suite=suite,
        hardware_class=hardware_class,
        status=RunStatus.SUCCEEDED,
        commit__repository_id=anchor.repository_id,
    )
    if side == "before":
        runs = runs.filter(commit__position__lt=position, commit__position__gte=position - SIDE_WINDOW)
        order = "-commit__position"
    else:
        runs = runs.filter(commit__position__gt=position, commit__position__lte=position + SIDE_WINDOW)
        order = "commit__position"
    beyond = [
        at
        for at in runs.order_by(order).values_list("commit__position", flat=True).distinct()[:SIDE_COMMITS]
        if at is not None
    ]

    # Each series' noise around the anchor and its values there and beyond, read once for every subset.
    noises: dict[int, float] = {}
    values: dict[tuple[int, int], list[float]] = {}
    if beyond:
        noises = {pk: noise for pk, (noise, _) in series_noises(series=series, commit_id=anchor.pk).items()}
        values = values_by_position(
            series_ids=[item.pk for item in series],
            positions=[position, *beyond],
            repository_id=anchor.repository_id,
        )

    def test(subset: list[int], alpha: float) -> _Test:
        return _subset_test(
            suite=suite,
            series=series,
            noises=noises,
            values=values,
            anchor=anchor,
            side=side,
            directions=directions,
            beyond=subset,
            alpha=alpha,
        )

    if len(beyond) <= 2:
        return test(beyond, BESIDE_ALPHA)
    # All of them (a second change right at the anchor), and the two farthest (one a commit or two
    # away, which leaves the nearest ones on the anchor's level), each at half the level.
    pooled = test(beyond, BESIDE_ALPHA / 2)
    if pooled.found:
        return pooled
    farthest = test(beyond[-2:], BESIDE_ALPHA / 2)
    return farthest if farthest.found else pooled


def _subset_test(
    *,
    suite: Suite,
    series: Sequence[Series],
    noises: Mapping[int, float],
    values: Mapping[tuple[int, int], list[float]],
    anchor: Commit,
    side: Side,
    directions: dict[int, float],
    beyond: list[int],
    alpha: float,
) -> _Test:
    position = anchor.position
    assert position is not None
    rows = thresholds_for_suite(suite.pk)
    share = 1.0 / max(len(series), 1)  # Bonferroni among the series
    found: list[Remainder] = []
    promising = False
    anchor_runs = beyond_runs = 0
    for item in series:
        here = values.get((item.pk, position), [])
        there = [value for at in beyond for value in values.get((item.pk, at), [])]
        anchor_runs, beyond_runs = max(anchor_runs, len(here)), max(beyond_runs, len(there))
        if not here or not there or min(here + there) <= 0:
            continue
        before, after = (there, here) if side == "before" else (here, there)
        direction = 1 if directions.get(item.pk, 0.0) > 0 else -1
        threshold = threshold_resolve(metric=item.metric, suite_id=suite.pk, rows=rows)
        change, _, _, p_value, holds, _, _, _ = change_verdict(
            base_values=before,
            head_values=after,
            series_sigma_log=noises.get(item.pk, 0.0),
            direction=direction,
            min_relative_change=threshold.min_relative_change,
            alpha=alpha * share,
        )
        if change * direction <= 0:
            continue
        # One run alone never opens a group: a slow run looks like a regression.
        if holds and len(here) >= 2 and len(there) >= 2:
            found.append(Remainder(item, before, after, change, p_value))
        elif p_value < PROMISING_P * share:
            promising = True
    return _Test(found, beyond, promising, anchor_runs, beyond_runs)


def group_pairs(group: AlertGroup) -> list[tuple[Suite, str, list[Series]]]:
    """The suites (that install commits) and hardware classes of the group's detected alerts, with their
    series."""
    by_pair: dict[tuple[int, str], list[Series]] = {}
    for alert in group.alerts.filter(source=Alert.Source.DETECTOR).select_related("series__suite"):
        by_pair.setdefault((alert.series.suite_id, alert.series.hardware_class), []).append(alert.series)
    return [
        (series[0].suite, hardware_class, series)
        for (_, hardware_class), series in sorted(by_pair.items())
        if not series[0].suite.installs_releases
    ]


def _extra_runs(*, commit: Commit, suite: Suite, hardware_class: str) -> list[Run]:
    return [
        run_enqueue(
            commit=commit,
            suite=suite,
            hardware_class=hardware_class,
            forced=True,
            kind=RunKind.BISECTION,
            spare_time=not suite_budget_use(suite=suite).allows_another,
        )
        for _ in range(EXTRA_RUNS)
    ]


def _side_check(
    *, group: AlertGroup, side: Side, anchor: Commit, state: dict[str, Any], now: datetime
) -> tuple[list[int], list[Run]]:
    """Test one side; update `state` ("waiting" or "checked"). Returns (groups opened, runs queued)."""
    directions = dict(
        group.alerts.filter(source=Alert.Source.DETECTOR).values_list("series_id", "change_pct")
    )
    opened: list[int] = []
    queued: list[Run] = []
    waiting = False
    for suite, hardware_class, alerted in group_pairs(group):
        test = _pair_test(
            suite=suite,
            hardware_class=hardware_class,
            series=alerted,
            anchor=anchor,
            side=side,
            directions=directions,
        )
        if test.found:
            nearest = Commit.objects.filter(
                repository_id=anchor.repository_id, position=test.beyond[0 if side == "before" else -1]
            ).first()
            if nearest is None:
                continue
            base, head = (nearest, anchor) if side == "before" else (anchor, nearest)
            reason = (
                f"where group #{group.pk}'s change began: its culprit's parent had already moved"
                if side == "before"
                else f"after group #{group.pk}'s culprit: the commits after it moved on the same way"
            )
            second = second_group(group=group, base=base, head=head, found=test.found, reason=reason)
            if second is not None:
                opened.append(second)
            continue
        if test.promising and not state.get("retried"):
            # Close, on too few runs: more of them where the evidence is thinnest, then once more.
            at = anchor if side == "before" or not test.beyond else None
            if at is None:
                at = Commit.objects.filter(
                    repository_id=anchor.repository_id, position=test.beyond[0]
                ).first()
            if at is not None:
                queued.extend(_extra_runs(commit=at, suite=suite, hardware_class=hardware_class))
                state["extra_at"] = at.sha
                waiting = True
            continue
        if side == "after" and test.beyond_runs < 2 and now < _since(state, now) + WAIT:
            waiting = True  # the commits after the culprit have not been run yet
    if queued:
        state["retried"] = True
    state["state"] = "waiting" if waiting and not opened else "checked"
    return opened, queued


def _since(state: dict[str, Any], now: datetime) -> datetime:
    try:
        return datetime.fromisoformat(str(state.get("since")))
    except ValueError:
        return now


def beside_check(*, group_id: int, sides: dict[Side, Commit] | None = None) -> tuple[list[int], list[Run]]:
    """Start (`sides`: each side's anchor) or go on with the tests of a confirmed group's culprit's sides.
    A side still waiting for runs is left for the next call. Returns (suspected groups opened, runs
    queued); the caller verifies the groups. Idempotent."""
    now = timezone.now()
    with transaction.atomic():
        group = (
            AlertGroup.objects.select_for_update()
            .filter(pk=group_id, state=GroupState.CONFIRMED)
            .select_related("head_commit")
            .first()
        )
        if group is None:
            return [], []
        search = dict(group.evidence.get("search", {}))
        beside: dict[str, dict[str, Any]] = {
            key: dict(value) for key, value in search.get("beside", {}).items()
        }
        for side, anchor in (sides or {}).items():
            beside.setdefault(side, {"anchor": anchor.sha, "state": "waiting", "since": now.isoformat()})
        opened: list[int] = []
        queued: list[Run] = []
        order: tuple[Side, Side] = ("before", "after")
        for side in order:
            state = beside.get(side)
            if state is None or state.get("state") != "waiting":
                continue
            found_anchor = Commit.objects.filter(
                repository_id=group.head_commit.repository_id, sha=state.get("anchor")
            ).first()
            if found_anchor is None or found_anchor.position is None:
                state["state"] = "checked"
                continue
            if _runs_pending(group=group, state=state):
                continue
            more_groups, more_runs = _side_check(
                group=group,
                side=side,
                anchor=found_anchor,
                state=state,
                now=now,
            )
            opened.extend(more_groups)
            queued.extend(more_runs)
        search["beside"] = beside
        search["beside_waiting"] = any(state.get("state") == "waiting" for state in beside.values())
        group.evidence = {**group.evidence, "search": search}
        AlertGroup.objects.filter(pk=group.pk).update(evidence=group.evidence)
    if queued:
        logger.info("group %s: runs beside its culprit %s", group_id, [run.pk for run in queued])
    return opened, queued


def _runs_pending(*, group: AlertGroup, state: dict[str, Any]) -> bool:
    """Whether the extra runs a side asked for are still on their way."""
    sha = state.get("extra_at")
    if not sha:
        return False
    pairs = set(
        group.alerts.filter(source=Alert.Source.DETECTOR).values_list(
            "series__suite_id", "series__hardware_class"
        )
    )
    runs = Run.objects.filter(
        status__in=PENDING_RUN_STATUSES,
        commit__repository_id=group.head_commit.repository_id,
        commit__sha=sha,
    )
    return any(
        runs.filter(suite_id=suite_id, hardware_class=hardware).exists() for suite_id, hardware in pairs
    )


def groups_beside_waiting() -> list[int]:
    """Confirmed groups with a side of their culprit still to test."""
    return list(
        AlertGroup.objects.filter(state=GroupState.CONFIRMED, evidence__search__beside_waiting=True)
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def dismissed_base_check(*, group_id: int) -> int | None:
    """A dismissed group whose base had already moved: the suspected group before it, or None.

    Detection places a change at the first commit whose runs show it; when the culprit's own first run
    fell at the old level, the range starts one benchmarked commit late, its base is already at the new
    level, and verification (base against head, both moved) dismisses it. The base's runs (the group's
    repeats among them) are then tested against the benchmarked commits before it, as a culprit's parent
    is: what holds opens (nearest commit before, base] as a suspected group that follows the dismissed
    one. A group opened this way does not open another before itself."""
    with transaction.atomic():
        group = (
            AlertGroup.objects.select_for_update()
            .filter(pk=group_id, state=GroupState.DISMISSED)
            .select_related("base_commit", "head_commit")
            .first()
        )
        if group is None or group.base_commit.position is None:
            return None
        follows = group.follows_id
        if (
            follows is not None
            and AlertGroup.objects.filter(pk=follows, base_commit_id=group.head_commit_id).exists()
        ):
            return None  # itself the range before a dismissed group
        directions = dict(
            group.alerts.filter(source=Alert.Source.DETECTOR).values_list("series_id", "change_pct")
        )
        for suite, hardware_class, alerted in group_pairs(group):
            test = _pair_test(
                suite=suite,
                hardware_class=hardware_class,
                series=alerted,
                anchor=group.base_commit,
                side="before",
                directions=directions,
            )
            if not test.found:
                continue
            nearest = Commit.objects.filter(
                repository_id=group.base_commit.repository_id, position=test.beyond[0]
            ).first()
            if nearest is None:
                continue
            opened = second_group(
                group=group,
                base=nearest,
                head=group.base_commit,
                found=test.found,
                reason=f"before group #{group.pk}, dismissed with its base already moved",
                why="dismissed, but its base had already moved: the change lies in",
                suspected=f"group #{group.pk}'s base had already moved the way its alerts did",
            )
            if opened is not None:
                AlertGroup.objects.filter(pk=opened).update(follows=group)
                logger.info("group %s: base already moved, group %s opened before it", group_id, opened)
                return opened
    return None

"""Verdicts: a suspected change is confirmed or dismissed by fresh re-runs before anyone is told; a confirmed
one is then searched to its culprit commit (`search`).

Detection makes a *suspected* group. Its base and head commits are run again on every suite and hardware
class of its alerts (kind `verification`, interleaved, `PERFWATCH_VERIFICATION_REPEATS` times each), ahead
of new commits and within the suite's daily GPU-hour budget. When the repeats are in, every alert is
tested on those repeats alone (`statistics.change_estimate`), never on the runs that raised the alarm,
which were picked for looking changed: one that holds (significant in the detected direction, and at
least the metric's minimum change) confirms the group, which then notifies once and is searched. The
alerted series of each suite and hardware class are also tested together on the same repeats (`joint`),
with the group's error rate shared among every test. When none can hold, the group is dismissed and keeps
its evidence; when the repeats cannot tell yet, as many again are run.

Every step is a function of what the database holds (runs, measurements, the group's row under its lock),
so a lost message or a task run twice only delays a verdict, never doubles one.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from dashboard.benchmarks.models import (
    PENDING_RUN_STATUSES,
    Commit,
    Run,
    RunKind,
    RunStatus,
    Suite,
)
from dashboard.benchmarks.runs import run_enqueue
from dashboard.regressions.detect.alert_groups import FRESH_SINCE, group_fresh_since
from dashboard.regressions.detect.thresholds import threshold_resolve, thresholds_for_suite
from dashboard.regressions.models import Alert, AlertGroup, GroupState, TriageEvent
from dashboard.regressions.notifications import notifications_schedule
from dashboard.regressions.sheriff.beside import dismissed_base_check
from dashboard.regressions.sheriff.budget import suite_budget_use
from dashboard.regressions.sheriff.evidence import (
    NOISE_FLOOR_LOG,
    TESTED,
    change_verdict,
    fresh_values,
    large_enough,
    log_values,
    series_noises,
)
from dashboard.regressions.sheriff.gradual import gradual_union
from dashboard.regressions.sheriff.joint import JointSeries, JointVerdict, joint_verdict
from dashboard.regressions.sheriff.search import group_search

logger = logging.getLogger(__name__)

# One-sided, per group, shared among its alerts and among the rounds it may take (Bonferroni): how
# unlikely noise must make the change. A group that falls short is looked at again on more repeats, and
# each look is another chance for noise to pass: with the whole rate at every look, 4 of the 6 false groups
# of five simulated fortnights were confirmed on their second or third.
CONFIRM_ALPHA = 0.01
# Past this p-value a change is not worth another round of repeats.
HOPELESS_P = 0.5
# The share of the group's rate each round's look may spend (they sum to one). Every group that is not
# hopeless gets `PLAIN_ROUNDS`; the rounds after them are for a change that came close (a test below
# `PROMISING_P`): a real step of about twice the noise often stops short on six repeats an end and passes
# on ten. With them and `evidence.large_enough`, five simulated fortnights named 131 of 156 culprits of
# steps of twice the noise or more exactly, against 125, and left 21 unfinished against 26.
ROUND_ALPHA_SHARES = (0.25, 0.25, 0.25, 0.125, 0.125)
MAX_ROUNDS = len(ROUND_ALPHA_SHARES)
PLAIN_ROUNDS = 3
PROMISING_P = 0.01

# Two repeats of one end further apart than this many times their expected spread (noise x sqrt 2):
# one of them is likely a slow run, and the end gets one more repeat before the verdict.
SPLIT_SIGMAS = 3.0


# The test


@dataclass(frozen=True)
class AlertVerdict:
    """What the runs of one alert's series at both ends of the range say about its change."""

    alert_id: int
    suite: str
    hardware: str
    concurrency: int
    metric: str
    base_values: tuple[float, ...]
    head_values: tuple[float, ...]
    change_pct: float
    ci_low_pct: float
    ci_high_pct: float
    p_value: float
    holds: bool
    sigma_log: float
    base_log: float
    head_log: float
    large_enough: bool = False  # moved the detected way by at least its metric's minimum change

    @property
    def z(self) -> float:
        se = self.sigma_log * math.sqrt(1 / len(self.base_values) + 1 / len(self.head_values))
        return (self.head_log - self.base_log) / se if se else 0.0


def _alert_verdicts(*, group: AlertGroup, alerts: Sequence[Alert], alpha: float) -> list[AlertVerdict]:
    verdicts = []
    rows: dict[int, list] = {}
    since = group_fresh_since(group)
    noises = series_noises(series=[alert.series for alert in alerts], commit_id=group.head_commit_id)
    for alert in alerts:
        series = alert.series
        # Fresh runs only: the run that raised the alarm was picked for looking changed (a winner's curse).
        base_values = fresh_values(series_id=series.pk, commit_id=group.base_commit_id, since=since)
        head_values = fresh_values(series_id=series.pk, commit_id=group.head_commit_id, since=since)
        if not base_values or not head_values or min(base_values + head_values) <= 0:
            continue
        if series.suite_id not in rows:
            rows[series.suite_id] = thresholds_for_suite(series.suite_id)
        threshold = threshold_resolve(
            metric=series.metric, suite_id=series.suite_id, rows=rows[series.suite_id]
        )
        direction = 1 if alert.change_pct > 0 else -1
        noise, degrees = noises[series.pk]
        change, low, high, p_value, holds, sigma, base_log, head_log = change_verdict(
            base_values=base_values,
            head_values=head_values,
            series_sigma_log=noise,
            noise_degrees=degrees,
            direction=direction,
            min_relative_change=threshold.min_relative_change,
            alpha=alpha,
        )
        verdicts.append(
            AlertVerdict(
                alert_id=alert.pk,
                suite=series.suite.name,
                hardware=series.hardware_class,
                concurrency=series.concurrency,
                metric=series.metric,
                base_values=tuple(base_values),
                head_values=tuple(head_values),
                change_pct=round(change, 3),
                ci_low_pct=round(low, 3),
                ci_high_pct=round(high, 3),
                p_value=p_value,
                holds=holds,
                sigma_log=sigma,
                base_log=base_log,
                head_log=head_log,
                large_enough=large_enough(
                    change_pct=change,
                    low_pct=low,
                    high_pct=high,
                    direction=direction,
                    min_relative_change=threshold.min_relative_change,
                ),
            )
        )
    return verdicts


def _by_pair(alerts: Sequence[Alert]) -> dict[tuple[int, str], list[Alert]]:
    """A group's alerts by suite and hardware class: the alerts one joint test takes together."""
    pairs: dict[tuple[int, str], list[Alert]] = defaultdict(list)
    for alert in alerts:
        pairs[(alert.series.suite_id, alert.series.hardware_class)].append(alert)
    return pairs


def _joint_verdicts(
    *, group: AlertGroup, alerts: Sequence[Alert], verdicts: Sequence[AlertVerdict], alpha: float
) -> list[JointVerdict]:
    """Each suite and hardware class with two or more alerted series: their change taken together."""
    by_alert = {verdict.alert_id: verdict for verdict in verdicts}
    joints = []
    for _, pair_alerts in sorted(_by_pair(alerts).items()):
        items = [
            (
                JointSeries(
                    series=alert.series,
                    direction=1 if alert.change_pct > 0 else -1,
                    sigma_log=by_alert[alert.pk].sigma_log,
                ),
                by_alert[alert.pk],
            )
            for alert in pair_alerts
            if alert.pk in by_alert
        ]
        joint = joint_verdict(
            members=[member for member, _ in items],
            base_commit_id=group.base_commit_id,
            head_commit_id=group.head_commit_id,
            since=group_fresh_since(group),
            alpha=alpha,
            large_enough=any(verdict.large_enough for _, verdict in items),
        )
        if joint is not None:
            joints.append(joint)
    return joints


def round_alpha(*, rounds: int, tests: int) -> float:
    """The error rate one test of a group may spend on the look of round `rounds` (1 for the first)."""
    share = ROUND_ALPHA_SHARES[min(max(rounds, 1), MAX_ROUNDS) - 1]
    return CONFIRM_ALPHA * share / max(tests, 1)


def _another_round(*, p_values: Sequence[float], rounds: int) -> bool:
    """Whether a group that nothing confirmed gets one more round of repeats rather than dismissal."""
    best = min(p_values, default=1.0)
    if rounds < PLAIN_ROUNDS:
        return best < HOPELESS_P
    return rounds < MAX_ROUNDS and best < PROMISING_P


def _tests_count(alerts: Sequence[Alert]) -> int:
    """How many tests a group's verdict makes: one per alert, and one per suite and hardware class with
    two or more alerts (the joint test). The group's error rate is shared among them (Bonferroni)."""
    joint_tests = sum(len(pair_alerts) >= 2 for pair_alerts in _by_pair(alerts).values())
    return max(len(alerts) + joint_tests, 1)


# Verification


def _pairs(group: AlertGroup) -> list[tuple[Suite, str]]:
    pairs = sorted(
        set(
            group.alerts.filter(source=Alert.Source.DETECTOR).values_list(
                "series__suite_id", "series__hardware_class"
            )
        )
    )
    suites = Suite.objects.in_bulk([suite_id for suite_id, _ in pairs])
    return [(suites[suite_id], hardware) for suite_id, hardware in pairs]


def _repeats(*, group: AlertGroup, commit_id: int, suite: Suite, hardware_class: str) -> QuerySet[Run]:
    """The verification runs of one end queued since the group was made (or reopened for a change found on
    its old repeats): its own repeats."""
    return Run.objects.filter(
        commit_id=commit_id,
        suite=suite,
        hardware_class=hardware_class,
        kind=RunKind.VERIFICATION,
        queued_at__gte=group_fresh_since(group),
    )


def _repeats_count(*, group: AlertGroup, commit_id: int, suite: Suite, hardware_class: str) -> int:
    """Verification runs of an end made for this group, failed ones included: a run that failed its
    attempts is not queued again and again; the verdict is made on the repeats that succeeded."""
    runs = _repeats(group=group, commit_id=commit_id, suite=suite, hardware_class=hardware_class)
    return runs.exclude(status=RunStatus.CANCELLED).count()


def _repeats_pending(*, group: AlertGroup, commit_id: int, suite: Suite, hardware_class: str) -> bool:
    runs = _repeats(group=group, commit_id=commit_id, suite=suite, hardware_class=hardware_class)
    return runs.filter(status__in=PENDING_RUN_STATUSES).exists()


def _release_version(*, commit_id: int, suite: Suite, hardware_class: str) -> str:
    return (
        Run.objects.filter(commit_id=commit_id, suite=suite, hardware_class=hardware_class)
        .exclude(vllm_version_requested="")
        .order_by("-pk")
        .values_list("vllm_version_requested", flat=True)
        .first()
        or ""
    )


def _repeats_wanted(group: AlertGroup) -> int:
    rounds = int(group.evidence.get("rounds", 1))
    return settings.PERFWATCH_VERIFICATION_REPEATS * rounds


def _repeat_enqueue(*, commit: Commit, suite: Suite, hardware_class: str, version: str) -> Run:
    """One verification repeat of an end; beyond the suite's budget it waits for spare node time rather
    than for tomorrow."""
    return run_enqueue(
        commit=commit,
        suite=suite,
        hardware_class=hardware_class,
        version=version,
        forced=True,
        kind=RunKind.VERIFICATION,
        spare_time=not suite_budget_use(suite=suite).allows_another,
    )


def group_verify(*, group_id: int) -> list[Run]:
    """Queue the verification runs a suspected group still lacks: base and head, interleaved, until each
    end has its repeats (besides the run that found it) on every suite and hardware class of its alerts.
    Idempotent; repeats beyond a suite's daily budget are queued for spare node time."""
    queued: list[Run] = []
    with transaction.atomic():
        group = (
            AlertGroup.objects.select_for_update()
            .filter(pk=group_id, state=GroupState.SUSPECTED)
            .select_related("base_commit", "head_commit")
            .first()
        )
        if group is None:
            return []
        wanted = _repeats_wanted(group)
        for suite, hardware_class in _pairs(group):
            ends = []
            for commit in (group.base_commit, group.head_commit):
                done = _repeats_count(
                    group=group, commit_id=commit.pk, suite=suite, hardware_class=hardware_class
                )
                version = ""
                if suite.installs_releases:
                    version = _release_version(
                        commit_id=commit.pk, suite=suite, hardware_class=hardware_class
                    )
                ends.append((commit, done, version))
            for repeat in range(wanted):
                for commit, done, version in ends:
                    if done > repeat:
                        continue
                    queued.append(
                        _repeat_enqueue(
                            commit=commit, suite=suite, hardware_class=hardware_class, version=version
                        )
                    )
    if queued:
        logger.info("group %s: verification queued runs %s", group_id, [run.pk for run in queued])
    return queued


def groups_verify(*, group_ids: Iterable[int]) -> list[Run]:
    """Verification for every suspected group among `group_ids`; the rest are left as they are."""
    queued: list[Run] = []
    for group_id in sorted(set(group_ids)):
        queued.extend(group_verify(group_id=group_id))
    return queued


def _split_ends_repeat(*, group: AlertGroup, alerts: Sequence[Alert], wanted: int) -> list[Run]:
    """One more repeat at each end whose repeats disagree beyond noise on one of the alerts' series: one
    of two runs was a slow one (a node's slow mode moves every metric a few percent), and two runs cannot
    say which; a third one lets the verdict set it aside. Once per round and end. Returns the runs."""
    queued: list[Run] = []
    seen: set[tuple[int, int, str]] = set()
    noises: dict[int, float] = {}
    for alert in alerts:
        series = alert.series
        for commit_id in (group.base_commit_id, group.head_commit_id):
            key = (commit_id, series.suite_id, series.hardware_class)
            if key in seen:
                continue
            logs = log_values(
                fresh_values(series_id=series.pk, commit_id=commit_id, since=group_fresh_since(group))
            )
            if len(logs) < 2:
                continue
            if not noises:  # read once, for every alert, when the first end has repeats to compare
                noises = {
                    pk: noise
                    for pk, (noise, _) in series_noises(
                        series=[alert.series for alert in alerts], commit_id=group.head_commit_id
                    ).items()
                }
            noise = max(noises[series.pk], NOISE_FLOOR_LOG)
            if max(logs) - min(logs) <= SPLIT_SIGMAS * noise * math.sqrt(2):
                continue
            suite = series.suite
            if _repeats_count(group=group, commit_id=commit_id, suite=suite, hardware_class=key[2]) > wanted:
                continue  # this round's extra repeat is in: the verdict weighs what there is
            seen.add(key)
            version = ""
            if suite.installs_releases:
                version = _release_version(commit_id=commit_id, suite=suite, hardware_class=key[2])
            queued.append(
                _repeat_enqueue(
                    commit=group.head_commit if commit_id == group.head_commit_id else group.base_commit,
                    suite=suite,
                    hardware_class=key[2],
                    version=version,
                )
            )
    if queued:
        logger.info("group %s: repeats disagree, one more each %s", group.pk, [run.pk for run in queued])
    return queued


def _state_set(*, group: AlertGroup, state: str, evidence: dict[str, object], reason: str) -> bool:
    updated = AlertGroup.objects.filter(pk=group.pk, state=GroupState.SUSPECTED).update(
        state=state, state_changed_at=timezone.now(), evidence=evidence, updated_at=timezone.now()
    )
    if updated:
        TriageEvent.objects.create(
            group=group, field="state", old_value=GroupState.SUSPECTED, new_value=reason
        )
    return bool(updated)


def group_judge(*, group_id: int) -> str:
    """Decide a suspected group from the runs at its ends once none is pending: confirmed (notified once,
    then bisected), dismissed, or another round of repeats. Returns the group's state afterwards."""
    state, follow_up = _judge(group_id=group_id)
    if follow_up == "confirmed":
        notifications_schedule(group_ids=[group_id])
        groups_verify(group_ids=group_search(group_id=group_id).opened)
    elif follow_up == "again":
        group_verify(group_id=group_id)
    elif follow_up == "dismissed":
        opened = gradual_union(group_id=group_id) or dismissed_base_check(group_id=group_id)
        if opened is not None:
            groups_verify(group_ids=[opened])
    return state


def _judge(*, group_id: int) -> tuple[str, str]:
    """(state, what follows: "confirmed" or "dismissed" when it just was, "again" for another round, or
    "")."""
    with transaction.atomic():
        group = (
            AlertGroup.objects.select_for_update()
            .filter(pk=group_id)
            .select_related("base_commit", "head_commit")
            .first()
        )
        if group is None:
            return "", ""
        if group.state != GroupState.SUSPECTED:
            return group.state, ""
        wanted = _repeats_wanted(group)
        for suite, hardware_class in _pairs(group):
            for commit_id in (group.base_commit_id, group.head_commit_id):
                # Only this group's repeats count (`fresh_values`), so only they are waited for: a
                # backfill or an outlier's recheck queued at the same commit takes idle node time only,
                # and waiting for it held confirmed changes back by up to half a day.
                if _repeats_pending(
                    group=group, commit_id=commit_id, suite=suite, hardware_class=hardware_class
                ):
                    return group.state, ""  # a repeat is still on its way
                if (
                    _repeats_count(
                        group=group, commit_id=commit_id, suite=suite, hardware_class=hardware_class
                    )
                    < wanted
                ):
                    return group.state, ""  # group_verify queues what is missing (budget permitting)
        alerts = list(
            group.alerts.filter(source=Alert.Source.DETECTOR).select_related("series__suite").order_by("pk")
        )
        if _split_ends_repeat(group=group, alerts=alerts, wanted=wanted):
            return group.state, ""  # one more repeat where two disagreed
        rounds = int(group.evidence.get("rounds", 1))
        alpha = round_alpha(rounds=rounds, tests=_tests_count(alerts))
        verdicts = _alert_verdicts(group=group, alerts=alerts, alpha=alpha)
        joints = _joint_verdicts(group=group, alerts=alerts, verdicts=verdicts, alpha=alpha)
        evidence: dict[str, object] = {
            "rounds": rounds,
            "alerts": [asdict(verdict) for verdict in verdicts],
            "joint": [asdict(joint) for joint in joints],
            # The range the repeats were of: a search narrows the group later, a split or a merge hands
            # these verdicts to another group, and each interval is the change of this range alone.
            TESTED: {"base": group.base_commit.sha, "head": group.head_commit.sha},
        }
        if FRESH_SINCE in group.evidence:  # a reopened group's rounds go on counting from its reopening
            evidence[FRESH_SINCE] = group.evidence[FRESH_SINCE]
        holding = [verdict for verdict in verdicts if verdict.holds]
        joint_holding = [joint for joint in joints if joint.holds]
        if holding or joint_holding:
            if holding:
                best = max(holding, key=lambda verdict: abs(verdict.z))
                reason = (
                    f"confirmed: {best.metric} c={best.concurrency} {best.change_pct:+.1f} % "
                    f"[{best.ci_low_pct:+.1f}, {best.ci_high_pct:+.1f}] p={best.p_value:.1g}, "
                    f"{len(best.base_values)}+{len(best.head_values)} runs"
                )
            else:
                joint = min(joint_holding, key=lambda item: item.p_value)
                reason = (
                    f"confirmed: {joint.series} series of {joint.suite} · {joint.hardware} together, "
                    f"{joint.shift:+.1f} noise units p={joint.p_value:.1g}, "
                    f"{joint.base_runs}+{joint.head_runs} runs"
                )
            confirmed = _state_set(group=group, state=GroupState.CONFIRMED, evidence=evidence, reason=reason)
            return GroupState.CONFIRMED, "confirmed" if confirmed else ""
        p_values = [verdict.p_value for verdict in verdicts] + [joint.p_value for joint in joints]
        if _another_round(p_values=p_values, rounds=rounds):
            AlertGroup.objects.filter(pk=group.pk).update(evidence={**evidence, "rounds": rounds + 1})
            return GroupState.SUSPECTED, "again"
        best_p = min(p_values, default=1.0)
        reason = f"dismissed: no change held on {rounds} round(s) of repeats (best p={best_p:.2g})"
        dismissed = _state_set(group=group, state=GroupState.DISMISSED, evidence=evidence, reason=reason)
        return GroupState.DISMISSED, "dismissed" if dismissed else ""

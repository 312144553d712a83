"""Why a step was not named: for each step of at least twice the noise that did not end at its exact
culprit, what the loop did around it, read from the simulation's database before it is thrown away.

The groups of the step's suite whose range touches it (a few commits either side), now or when they were
judged (a search narrows a range, and a group judged over a step may name another commit), each with its
state, kind, range and verdict: the series its repeats tested, their change with its 95 % interval, p,
runs at each end and the noise the test used, beside the world's own noise where the world says it
(`noise_at`, optional in the contract: its run-to-run noise with slow runs aside, where a world has them;
a verdict's noise counts them, so it is the larger, by how much the slow runs weigh), and for a group
whose culprit was searched, how its search stopped, its likeliest commits and its runs at each. Then
the runs of the step's suite at each commit around it, by kind. A step no group touched was never
detected; a dismissed group over it was tested on the wrong series or too noisy a scale; a confirmed
group over it is a search that named another commit or did not finish.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dashboard.benchmarks.models import Commit, Run, RunStatus
from dashboard.regressions.models import AlertGroup, TriageEvent
from lab.outcome import judged_ranges
from lab.scores import Scores, StepScore
from lab.worlds import World

# Commits either side of a step whose groups and runs are listed.
REACH = 4
# Verdicts listed per group: its strongest tests.
VERDICTS_SHOWN = 4
# Commits named on a search's line, likeliest first.
LIKELIEST_SHOWN = 3


def steps_explain(*, world: World, scores: Scores) -> dict[int, list[str]]:
    """The explanation lines of each step of at least twice the noise not named exactly, by its position
    in `scores.steps`."""
    # A group counts where its range touches the step now or did when it was judged (a search narrows it).
    judged = judged_ranges({commit.sha[:8]: index for index, commit in enumerate(world.commits)})
    noise_at = getattr(world, "noise_at", None)
    explained: dict[int, list[str]] = {}
    for number, score in enumerate(scores.steps):
        if score.exact or score.step.noise_multiple < 2:
            continue
        explained[number] = _step_lines(
            score=score, judged=judged, noise_at=noise_at if callable(noise_at) else None
        )
    return explained


NoiseAt = Callable[[str, int, tuple[int, str]], float]


def _step_lines(
    *, score: StepScore, judged: Mapping[int, tuple[int, int]], noise_at: NoiseAt | None
) -> list[str]:
    step = score.step
    low, high = step.commit_index - REACH, step.last_index + REACH
    lines = []
    if noise_at is not None:
        noises = ", ".join(
            f"c={concurrency} {metric} {_pct(noise_at(step.suite, step.commit_index, (concurrency, metric)))}"
            for concurrency, metric in sorted(step.moves)
        )
        lines.append(f"    world noise of the series it moved, slow runs aside: {noises}")
    groups = [
        group
        for group in AlertGroup.objects.filter(alerts__series__suite__name=step.suite)
        .distinct()
        .select_related("base_commit", "head_commit")
        .order_by("pk")
        if any(
            base is not None and head is not None and head >= low and base <= high
            for base, head in (
                (group.base_commit.position, group.head_commit.position),
                judged.get(group.pk, (None, None)),
            )
        )
    ]
    if not groups:
        lines.append(f"    no group of {step.suite} touched commits {low}-{high}: never detected")
    for group in groups:
        lines.extend(
            _group_lines(
                group=group,
                noise_at=noise_at,
                step_index=step.commit_index,
                suite=step.suite,
                judged=judged.get(group.pk),
            )
        )
    lines.append("    runs of " + step.suite + ": " + _runs_line(suite=step.suite, low=low, high=high))
    return lines


def _group_lines(
    *,
    group: AlertGroup,
    noise_at: NoiseAt | None,
    step_index: int,
    suite: str,
    judged: tuple[int, int] | None,
) -> list[str]:
    evidence: dict[str, Any] = group.evidence if isinstance(group.evidence, dict) else {}
    verdict = (
        TriageEvent.objects.filter(group=group, field="state")
        .order_by("pk")
        .values_list("new_value", flat=True)
        .last()
    )
    now = (group.base_commit.position, group.head_commit.position)
    was = f" (judged over ({judged[0]}, {judged[1]}])" if judged is not None and judged != now else ""
    lines = [
        f"    group #{group.pk} {group.kind} {group.state} ({now[0]}, {now[1]}]{was}, "
        f"{group.alerts.count()} alerts: {verdict or 'no verdict yet'}"
    ]
    # The step's own suite first: a group of several suites is listed for this one.
    tested = sorted(
        evidence.get("alerts", []),
        key=lambda item: (item.get("suite") != suite, item.get("p_value", 1.0)),
    )
    for item in tested[:VERDICTS_SHOWN]:
        where = "" if item["suite"] == suite else f"{item['suite']} "
        line = (
            f"        tested {where}c={item['concurrency']} {item['metric']} {item['change_pct']:+.1f} % "
            f"[{item['ci_low_pct']:+.1f}, {item['ci_high_pct']:+.1f}] p={item['p_value']:.2g} on "
            f"{len(item['base_values'])}+{len(item['head_values'])} runs, "
            f"noise used {_pct(item['sigma_log'])}"
        )
        if noise_at is not None and item["suite"] == suite:
            line += f" (world {_pct(noise_at(suite, step_index, (item['concurrency'], item['metric'])))})"
        lines.append(line)
    if len(tested) > VERDICTS_SHOWN:
        lines.append(f"        and {len(tested) - VERDICTS_SHOWN} more tested series")
    search = evidence.get("search")
    if isinstance(search, dict) and search.get("posterior"):
        lines.append(_search_line(search))
    return lines


def _search_line(search: Mapping[str, Any]) -> str:
    """Where a group's culprit search stands or ended: how it stopped, after how many of its runs, the
    scale of one run's share of the change (large: the sides barely differ, each run tells little), its
    likeliest commits and the runs at each commit of the range it searched."""
    rows = search["posterior"]
    positions = dict(
        Commit.objects.filter(sha__in=[row["sha"] for row in rows]).values_list("sha", "position")
    )
    candidates = sorted(rows[1:], key=lambda row: -row["probability"])[:LIKELIEST_SHOWN]
    likeliest = ", ".join(
        f"@{positions.get(row['sha'])} {row['probability'] * 100:.0f} %" for row in candidates
    )
    runs = ", ".join(f"@{positions.get(row['sha'])} {row['runs']}" for row in rows)
    return (
        f"        search {search.get('stopped') or 'going on'} after {search.get('runs_queued', 0)} of "
        f"{search.get('runs_cap', '?')} runs, share scale {search.get('share_scale', '?')}: likeliest "
        f"{likeliest}; runs {runs}"
    )


def _runs_line(*, suite: str, low: int, high: int) -> str:
    kinds: dict[int, Counter[str]] = defaultdict(Counter)
    for position, kind in Run.objects.filter(
        suite__name=suite,
        status=RunStatus.SUCCEEDED,
        commit__position__gte=low,
        commit__position__lte=high,
    ).values_list("commit__position", "kind"):
        if position is not None:
            kinds[position][kind] += 1
    return (
        " | ".join(
            f"@{position} " + ", ".join(f"{count} {kind}" for kind, count in sorted(kinds[position].items()))
            for position in sorted(kinds)
        )
        or "none"
    )


def _pct(log_noise: float) -> str:
    return f"{(math.exp(log_noise) - 1) * 100:.2f} %"


def explained_lines(*, scores: Scores, explained: Mapping[int, Sequence[str]]) -> list[str]:
    """Every step's line, each followed by its explanation where it has one."""
    lines = []
    for number, score in enumerate(scores.steps):
        lines.append(score.line())
        lines.extend(explained.get(number, ()))
    return lines

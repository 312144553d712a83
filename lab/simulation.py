"""A benchmark of the whole verdict loop: the real scheduler, detection, verification and bisection code
against a simulated vLLM on a simulated clock.

The world: main's commit stream at vLLM's pace (about 30 commits a day, fewer at weekends, 17 % touching
only docs, tests or CI), per-commit performance of each suite with injected steps of 2-30 % (regressions,
improvements, trade-offs, reverts, close pairs), run-to-run noise of 1-4 % per suite and occasional slow
runs. One node of one hardware class serves every suite, one run at a time, 25 ± 5 minutes each.

The loop: new commits arrive; the scheduler queues runs as its periodic task does; the node takes the next
queued run in dispatch order, and at the end of it the run is stored and detection, verification and
bisection run as the tasks would, by calling the same services. Only the broker (messages between them)
and the GPU are simulated; the clock is the simulated one everywhere (`django.utils.timezone.now`).

Scoring: a step is attributed to its exact commit when a confirmed group of its suite has the one-commit
range ending at it. A notified group is false when its range holds no injected step of its suites.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import F

from dashboard.benchmarks.models import Commit, Run, Runner, RunStatus, Suite
from dashboard.regressions.models import Alert, AlertGroup, GroupState

HARDWARE = "b300"
GPUS = 8
RUN_MINUTES, RUN_SPREAD_MINUTES = 25.0, 5.0
SCHEDULER_PERIOD = timedelta(minutes=5)  # the beat period of runs_schedule
SWEEP_PERIOD = timedelta(minutes=15)  # the beat period of the verdicts sweep
DOCS_SHARE = 0.17
WEEKDAY_COMMITS, WEEKEND_COMMITS = (30, 42), (8, 16)
STEP_RATE = 0.03  # per commit that can change performance, per suite
SLOW_RUN_SHARE = 0.03
CONCURRENCIES = (1, 16)
# Levels at the start of the history, per metric (output tokens/s, ms); throughput scales the others.
BASE_LEVELS = {"output_throughput_tok_s": 700.0, "ttft_ms_mean": 900.0, "itl_ms_mean": 30.0}
START = datetime(2026, 9, 7, tzinfo=UTC)  # a Monday


@dataclass(frozen=True)
class Step:
    """An injected change of one suite at one commit: factors on throughput (and ITL) and on TTFT."""

    suite: str
    index: int  # the commit's index in the stream
    throughput: float  # multiplicative: 0.94 is a 6 % drop
    ttft: float  # multiplicative on TTFT: 1.08 is 8 % slower to the first token
    label: str

    def size_in_noise(self, noise: float) -> float:
        return max(abs(math.log(self.throughput)), abs(math.log(self.ttft))) / noise


@dataclass(frozen=True)
class SimCommit:
    index: int
    sha: str
    merged_at: datetime
    docs_only: bool


@dataclass
class World:
    commits: list[SimCommit]
    suites: dict[str, float]  # name -> run-to-run noise (log scale)
    steps: list[Step]
    levels: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # log factors per commit

    def level(self, suite: str, index: int) -> tuple[float, float]:
        return self.levels[suite][index]


def world_generate(*, seed: int, days: int, suites: int) -> World:
    """The commit stream and every suite's per-commit performance, steps included."""
    rng = random.Random(seed)
    commits: list[SimCommit] = []
    for day in range(days):
        start = START + timedelta(days=day)
        low, high = WEEKEND_COMMITS if start.weekday() >= 5 else WEEKDAY_COMMITS
        times = sorted(rng.uniform(0, 86400) for _ in range(rng.randint(low, high)))
        for offset in times:
            index = len(commits)
            commits.append(
                SimCommit(
                    index=index,
                    sha=f"{rng.getrandbits(160):040x}",
                    merged_at=start + timedelta(seconds=offset),
                    docs_only=rng.random() < DOCS_SHARE,
                )
            )
    names = [f"sim-suite-{n + 1}" for n in range(suites)]
    noise = {name: rng.uniform(0.01, 0.04) for name in names}
    steps: list[Step] = []
    for name in names:
        taken: set[int] = set()

        def add(
            index: int, throughput: float, ttft: float, label: str, *, suite: str, seen: set[int]
        ) -> None:
            if 0 < index < len(commits) and not commits[index].docs_only and index not in seen:
                seen.add(index)
                steps.append(Step(suite=suite, index=index, throughput=throughput, ttft=ttft, label=label))

        for commit in commits[10:]:
            if commit.docs_only or rng.random() >= STEP_RATE:
                continue
            size = math.exp(rng.uniform(math.log(0.02), math.log(0.30)))
            kind = rng.choices(["regression", "improvement", "trade-off", "ttft"], [4, 3, 2, 1])[0]
            factors = {
                "regression": (1 - size, 1 + size / 2),
                "improvement": (1 + size, 1.0),
                "trade-off": (1 + size, 1 + size),
                "ttft": (1.0, 1 + size),
            }[kind]
            add(commit.index, *factors, kind, suite=name, seen=taken)
            if kind == "regression" and rng.random() < 0.3:
                revert_at = commit.index + rng.randint(5, 40)
                add(revert_at, 1 / factors[0], 1 / factors[1], "revert", suite=name, seen=taken)
            elif rng.random() < 0.15:
                second = math.exp(rng.uniform(math.log(0.02), math.log(0.30)))
                add(commit.index + rng.randint(3, 6), 1 - second, 1.0, "close pair", suite=name, seen=taken)
    world = World(commits=commits, suites=noise, steps=sorted(steps, key=lambda s: (s.index, s.suite)))
    for name in names:
        throughput = ttft = 0.0
        changes = {step.index: step for step in steps if step.suite == name}
        levels = []
        for commit in commits:
            if commit.index in changes:
                throughput += math.log(changes[commit.index].throughput)
                ttft += math.log(changes[commit.index].ttft)
            levels.append((throughput, ttft))
        world.levels[name] = levels
    return world


def _report(*, world: World, suite: str, index: int, rng: random.Random) -> Any:
    """What guidellm would report for one run of `suite` at commit `index` (the simulated GPU)."""
    from runners.guidellm_report import GuidellmReport, LevelResult

    throughput, ttft = world.level(suite, index)
    noise = world.suites[suite]
    slow = -math.log(1 + rng.uniform(0.08, 0.25)) if rng.random() < SLOW_RUN_SHARE else 0.0
    levels = []
    for concurrency in CONCURRENCIES:
        scale = math.log(concurrency) * 0.5
        levels.append(
            LevelResult(
                concurrency=concurrency,
                metrics={
                    "output_throughput_tok_s": BASE_LEVELS["output_throughput_tok_s"]
                    * math.exp(scale + throughput + slow + rng.gauss(0, noise)),
                    "ttft_ms_mean": BASE_LEVELS["ttft_ms_mean"]
                    * math.exp(scale + ttft - slow + rng.gauss(0, noise)),
                    "itl_ms_mean": BASE_LEVELS["itl_ms_mean"]
                    * math.exp(scale / 2 - throughput - slow + rng.gauss(0, noise)),
                },
            )
        )
    return GuidellmReport(guidellm_version="simulated", labels={}, levels=tuple(levels))


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@contextmanager
def _simulated(clock: Clock) -> Iterator[None]:
    """The simulated clock everywhere, and no broker: nothing is sent through the dispatch module; the
    loop itself takes queued runs in dispatch order and calls what the tasks would call."""
    from django.utils import timezone

    from dashboard import dispatch

    saved = (timezone.now, dispatch._send)
    timezone.now = clock
    dispatch._send = lambda name, args, options, *, tolerant: None
    try:
        yield
    finally:
        timezone.now, dispatch._send = saved


@dataclass(frozen=True)
class StepOutcome:
    step: Step
    noise: float
    exact: bool
    in_range: bool
    hours_to_culprit: float | None
    hours_to_group: float | None  # merge to detection's suspected group
    hours_to_confirmed: float | None  # merge to the verdict


@dataclass(frozen=True)
class SimulationReport:
    seed: int
    days: int
    suites: int
    commits: int
    docs_only: int
    runs_by_kind: dict[str, int]
    node_hours: float
    extra_gpu_hours: float
    outcomes: list[StepOutcome]
    groups_confirmed: int
    groups_dismissed: int
    groups_suspected: int
    false_confirmed: int
    true_dismissed: int
    wall_s: float

    def text(self) -> str:
        significant = [o for o in self.outcomes if o.noise >= 2.0]
        exact = [o for o in significant if o.exact]
        culprits = [o for o in self.outcomes if o.exact]
        hours = sorted(o.hours_to_culprit for o in culprits if o.hours_to_culprit is not None)
        detected = [o.hours_to_group for o in culprits if o.hours_to_group is not None]
        confirmed = [o.hours_to_confirmed for o in culprits if o.hours_to_confirmed is not None]
        gpu_hours = self.node_hours * GPUS

        def share(part: int, whole: int) -> str:
            return f"{part} of {whole} = {100 * part / whole:.1f} %" if whole else f"{part} of 0"

        def quantile(q: float) -> str:
            if not hours:
                return "n/a"
            return f"{hours[min(len(hours) - 1, math.ceil(q * len(hours)) - 1)]:.1f}"

        runs = ", ".join(f"{kind} {count}" for kind, count in sorted(self.runs_by_kind.items()))
        notified = self.groups_confirmed
        lines = [
            f"simulate_attribution: seed {self.seed}, {self.days} days of commits (+1 day to settle), "
            f"{self.suites} suite(s) on one {HARDWARE} node of {GPUS} GPUs, runs of "
            f"{RUN_MINUTES:.0f} ± {RUN_SPREAD_MINUTES:.0f} min",
            f"commits: {self.commits} ({self.docs_only} docs/tests/CI only); runs: {runs}; "
            f"node busy {self.node_hours:.0f} h",
            f"steps injected: {len(self.outcomes)} (at least twice the noise: {len(significant)})",
            f"culprits found (confirmed group naming the exact commit): {len(culprits)} of "
            f"{len(self.outcomes)} steps; in a confirmed range but not narrowed to it: "
            f"{sum(o.in_range and not o.exact for o in self.outcomes)}",
            f"steps of at least twice the noise attributed to the exact commit: "
            f"{share(len(exact), len(significant))}",
            f"groups: {self.groups_confirmed} confirmed (notified), {self.groups_dismissed} dismissed, "
            f"{self.groups_suspected} still suspected; dismissed although a step was in range: "
            f"{self.true_dismissed}",
            f"false groups (notified, no step in range): {share(self.false_confirmed, notified)}",
            f"hours from merge to confirmed culprit: median {quantile(0.5)}, p90 {quantile(0.9)} "
            f"(medians: to the suspected group {_median(detected)}, "
            f"to its confirmation {_median(confirmed)})",
            f"GPU-hours per culprit: {gpu_hours / max(len(culprits), 1):.1f} "
            f"(verification and bisection alone: {self.extra_gpu_hours / max(len(culprits), 1):.1f})",
            f"simulated in {self.wall_s:.0f} s",
        ]
        return "\n".join(lines)


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.1f}" if values else "n/a"


def simulation_run(
    *, seed: int = 1, days: int = 14, suites: int = 3, progress: Callable[[str], None] = lambda line: None
) -> SimulationReport:
    """Simulate `days` of main on one node shared by `suites` suites; the database must be a throwaway one."""
    import time

    from dashboard.benchmarks.runs import run_claim
    from dashboard.benchmarks.scheduling import runs_schedule_all
    from dashboard.benchmarks.services import repository_default, run_complete
    from dashboard.regressions.sheriff.settle import groups_verify_pending, run_settle

    started = time.monotonic()
    world = world_generate(seed=seed, days=days, suites=suites)
    rng = random.Random(seed * 7919 + 1)
    clock = Clock(START)
    end = START + timedelta(days=days + 1)
    culprit_at: dict[int, datetime] = {}
    node_seconds = 0.0
    with _simulated(clock):
        repository = repository_default()
        for name in world.suites:
            Suite.objects.create(
                name=name,
                hardware_class=HARDWARE,
                install_settings={"method": "wheel"},
                concurrencies=list(CONCURRENCIES),
                timeouts={"install_s": 1800, "server_start_s": 900, "benchmark_s": 3600},
            )
        runner = Runner.objects.create(name="sim-node-1", hardware_class=HARDWARE, gpu_count=GPUS)
        arrived = 0
        busy: tuple[Run, datetime] | None = None
        next_schedule = next_sweep = START
        changed = True
        next_report = START + timedelta(days=1)
        while clock.now < end:
            candidates = [next_schedule]
            if arrived < len(world.commits):
                candidates.append(world.commits[arrived].merged_at)
            if busy is not None:
                candidates.append(busy[1])
            clock.now = min(candidates)
            while arrived < len(world.commits) and world.commits[arrived].merged_at <= clock.now:
                commit = world.commits[arrived]
                Commit.objects.create(
                    repository=repository,
                    sha=commit.sha,
                    position=commit.index,
                    committed_at=commit.merged_at,
                    subject=f"{'[Doc]' if commit.docs_only else '[Perf]'} simulated change {commit.index}",
                    pr_number=60000 + commit.index,
                    change_class="docs_tests_ci" if commit.docs_only else "python",
                )
                arrived += 1
                changed = True
            if busy is not None and busy[1] <= clock.now:
                run = busy[0]
                run_complete(
                    run_id=run.pk,
                    runner=runner,
                    result=_result(
                        report=_report(
                            world=world, suite=run.suite.name, index=run.commit.position or 0, rng=rng
                        )
                    ),
                )
                run_settle(run_id=run.pk)
                busy = None
                changed = True
                _culprits_note(culprit_at, clock.now)
            if clock.now >= next_schedule:
                # The periodic scheduler, skipped (as a no-op) while no commit, run or queue changed.
                if changed:
                    runs_schedule_all()
                    changed = False
                next_schedule += SCHEDULER_PERIOD
                if clock.now >= next_sweep:
                    changed = bool(groups_verify_pending()) or changed
                    _culprits_note(culprit_at, clock.now)
                    next_sweep += SWEEP_PERIOD
            if busy is None:
                queued = Run.objects.in_dispatch_order().filter(hardware_class=HARDWARE).first()
                if queued is not None:
                    claimed = run_claim(run_id=queued.pk, runner=runner)
                    if claimed is not None:
                        minutes = max(10.0, rng.gauss(RUN_MINUTES, RUN_SPREAD_MINUTES / 2))
                        busy = (claimed, clock.now + timedelta(minutes=minutes))
                        changed = True
                        node_seconds += minutes * 60
            if clock.now >= next_report:
                progress(_progress_line(clock.now, arrived, started))
                next_report += timedelta(days=1)
        report = _score(world=world, culprit_at=culprit_at, seed=seed, days=days, node_seconds=node_seconds)
    return SimulationReport(**{**report, "wall_s": time.monotonic() - started})


def _result(*, report: Any) -> Any:
    import json

    from dashboard.benchmarks.services import RunResult

    raw = json.dumps([[level.concurrency, dict(level.metrics)] for level in report.levels]).encode()
    return RunResult(
        raw_report=raw,
        report=report,
        environment={"simulated": True},
        vllm_version="simulated",
        telemetry=[],
        server_metrics={},
        commands={},
        logs={},
    )


def _progress_line(now: datetime, arrived: int, started: float) -> str:
    import time

    counts = {state: AlertGroup.objects.filter(state=state).count() for state in GroupState.values}
    runs = Run.objects.filter(status=RunStatus.SUCCEEDED).count()
    return (
        f"  day {(now - START).days}: {arrived} commits, {runs} runs, groups "
        + ", ".join(f"{state} {count}" for state, count in counts.items())
        + f" ({time.monotonic() - started:.0f} s)"
    )


def _culprits_note(culprit_at: dict[int, datetime], now: datetime) -> None:
    """Remember when each confirmed group first named one commit."""
    for group_id in (
        AlertGroup.objects.filter(
            state=GroupState.CONFIRMED, head_commit__position=F("base_commit__position") + 1
        )
        .exclude(pk__in=list(culprit_at))
        .values_list("pk", flat=True)
    ):
        culprit_at[group_id] = now


def _score(
    *, world: World, culprit_at: dict[int, datetime], seed: int, days: int, node_seconds: float
) -> dict[str, Any]:
    groups = list(
        AlertGroup.objects.values_list("pk", "state", "base_commit__position", "head_commit__position")
    )
    times = {
        pk: (created, verdict)
        for pk, created, verdict in AlertGroup.objects.values_list("pk", "created_at", "state_changed_at")
    }
    suites_of: dict[int, set[str]] = {}
    for group_id, suite in Alert.objects.values_list("group_id", "series__suite__name"):
        suites_of.setdefault(group_id, set()).add(suite)
    steps_by_suite: dict[str, list[Step]] = {}
    for step in world.steps:
        steps_by_suite.setdefault(step.suite, []).append(step)

    def holds_step(group: tuple[int, str, int | None, int | None]) -> bool:
        group_id, _, base, head = group
        if base is None or head is None:
            return False
        return any(
            base < step.index <= head
            for suite in suites_of.get(group_id, ())
            for step in steps_by_suite.get(suite, [])
        )

    confirmed = [g for g in groups if g[1] == GroupState.CONFIRMED]
    outcomes = []
    for step in world.steps:
        mine = [g for g in confirmed if step.suite in suites_of.get(g[0], ()) and g[2] is not None]
        exact = [g for g in mine if g[2] == step.index - 1 and g[3] == step.index]
        in_range = any(g[2] < step.index <= g[3] for g in mine)  # type: ignore[operator]
        hours = to_group = to_confirmed = None
        merged = world.commits[step.index].merged_at
        if exact and exact[0][0] in culprit_at:
            hours = (culprit_at[exact[0][0]] - merged).total_seconds() / 3600
            created, verdict = times[exact[0][0]]
            to_group = (created - merged).total_seconds() / 3600
            to_confirmed = (verdict - merged).total_seconds() / 3600 if verdict else None
        outcomes.append(
            StepOutcome(
                step=step,
                noise=step.size_in_noise(world.suites[step.suite]),
                exact=bool(exact),
                in_range=in_range,
                hours_to_culprit=hours,
                hours_to_group=to_group,
                hours_to_confirmed=to_confirmed,
            )
        )
    runs_by_kind: dict[str, int] = {}
    for kind in Run.objects.filter(status=RunStatus.SUCCEEDED).values_list("kind", flat=True):
        runs_by_kind[kind] = runs_by_kind.get(kind, 0) + 1
    extra_hours = 0.0
    for started_at, finished_at in Run.objects.filter(
        status=RunStatus.SUCCEEDED, kind__in=("verification", "bisection")
    ).values_list("started_at", "finished_at"):
        if started_at is not None and finished_at is not None:
            extra_hours += (finished_at - started_at).total_seconds() / 3600
    return {
        "seed": seed,
        "days": days,
        "suites": len(world.suites),
        "commits": len(world.commits),
        "docs_only": sum(commit.docs_only for commit in world.commits),
        "runs_by_kind": runs_by_kind,
        "node_hours": node_seconds / 3600,
        "extra_gpu_hours": extra_hours * GPUS,
        "outcomes": outcomes,
        "groups_confirmed": len(confirmed),
        "groups_dismissed": sum(g[1] == GroupState.DISMISSED for g in groups),
        "groups_suspected": sum(g[1] == GroupState.SUSPECTED for g in groups),
        "false_confirmed": sum(not holds_step(g) for g in confirmed),
        "true_dismissed": sum(holds_step(g) for g in groups if g[1] == GroupState.DISMISSED),
    }

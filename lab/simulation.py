"""A benchmark of the whole verdict loop: the real scheduler, detection, verification and culprit search
against a simulated world on a simulated clock.

The world keeps the contract of `lab.worlds` (the project's own, `lab.worlds.vllm_world`, unless another
is plugged in): main's commits with the files they changed, suites and their levels, nodes of one
hardware class, what one run measures, and the true steps. Commits are stored as the commit sync stores
them, their change class read from their files by the product's classifier.

The loop: new commits arrive; the scheduler queues runs as its periodic task does; each free node takes
the next queued run in dispatch order, and at the end of it the run is stored and settled as the tasks
would (`run_settle`), with the verdict sweep (`groups_verify_pending`) on its beat. Only the broker
(messages between them) and the GPUs are simulated; the clock is the simulated one everywhere
(`django.utils.timezone.now`). Runs take 25 +- 5 minutes on a node of 8 GPUs.

Scoring is `lab.scores` (strict: see its docstring); this module reads the outcome from the database.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import F

from dashboard.benchmarks.models import Commit, Run, Runner, RunStatus, Suite
from dashboard.benchmarks.subjects import ChangeClass, change_class_from_paths, subject_pr_number
from dashboard.regressions.models import AlertGroup, GroupState
from lab.explain import steps_explain
from lab.outcome import outcome_read
from lab.scores import (
    Scores,
    quantile,
    scores_compute,
)
from lab.worlds import WorldFactory, vllm_world

HARDWARE = "b300"
GPUS = 8
RUN_MINUTES, RUN_SPREAD_MINUTES = 25.0, 5.0
SCHEDULER_PERIOD = timedelta(minutes=5)  # the beat period of runs_schedule
SWEEP_PERIOD = timedelta(minutes=15)  # the beat period of the verdicts sweep
SETTLE_DAYS = 1  # simulated after the last commit, so that late changes can be judged
# One seed of 14 days takes 2-8 minutes on a 2-core machine; a child past this is stopped and reported.
SEED_TIMEOUT_S = 3600


@dataclass(frozen=True)
class SimulationReport:
    seed: int
    days: int
    world: str
    suites: int
    runners: int
    commits: int
    docs_tests_ci: int
    runs_by_kind: dict[str, int]
    runs_by_node: list[int]
    node_hours: float
    groups_confirmed: int
    groups_dismissed: int
    groups_suspected: int
    scores: Scores
    wall_s: float
    # Hours from queued to started of the runs that ran, by kind ("verification in spare time" for a run
    # queued beyond its suite's budget): (runs, median, p90).
    waits: dict[str, tuple[int, float, float]] = field(default_factory=dict)
    # With `explain`: what the loop did around each step not named exactly (`lab.explain`), by its position
    # in `scores.steps`.
    explained: dict[int, list[str]] = field(default_factory=dict)

    def json_line(self) -> str:
        return json.dumps(self.scores.json(), allow_nan=False)

    def text(self) -> str:
        scores = self.scores.json()
        significant = self.scores.significant
        isolated = [s for s in significant if s.isolated]
        wrongly = sum(s.named_wrongly for s in significant)
        unfinished = [s for s in significant if not s.exact and not s.named_wrongly]
        runs = ", ".join(f"{kind} {count}" for kind, count in sorted(self.runs_by_kind.items()))
        found = sorted(s.hours for s in significant if s.exact)

        def share(part: int, whole: int) -> str:
            return f"{part} / {whole} = {100 * part / whole:.1f} %" if whole else f"{part} / 0"

        def hours(value: object) -> str:
            return f"{value:.1f} h" if isinstance(value, int | float) else "inf"

        culprits = max(self.scores.culprits, 1)
        phases = self.scores.phase_medians()
        rows = [
            ("world", f"{self.world}, seed {self.seed}, {self.days} days (+{SETTLE_DAYS} to settle)"),
            ("suites, nodes", f"{self.suites} suite(s) on {self.runners} {HARDWARE} node(s) of {GPUS} GPUs"),
            ("commits", f"{self.commits} ({self.docs_tests_ci} classed docs/tests/CI)"),
            ("runs", f"{sum(self.runs_by_kind.values())}: {runs}; nodes busy {self.node_hours:.0f} h"),
            ("runs per node", ", ".join(str(count) for count in self.runs_by_node)),
            ("steps", f"{scores['steps']} ({scores['steps_2x']} of at least 2x the noise)"),
            ("exact culprit, steps >= 2x", share(sum(s.exact for s in significant), len(significant))),
            ("exact culprit, isolated", share(sum(s.exact for s in isolated), len(isolated))),
            ("named another commit", share(wrongly, len(significant))),
            (
                "unfinished (no culprit)",
                share(len(unfinished), len(significant))
                + f"; {sum(bool(s.holding) for s in unfinished)} of them inside a notified range",
            ),
            (
                "groups",
                f"{self.groups_confirmed} notified, {self.groups_dismissed} dismissed, "
                f"{self.groups_suspected} still suspected",
            ),
            ("false notified groups", share(self.scores.false_notified, self.scores.notified)),
            (
                "merge -> culprit, all steps >= 2x",
                f"median {hours(scores['hours_median'])}, p90 {hours(scores['hours_p90'])}",
            ),
            (
                "merge -> each phase, found ones",
                "medians: "
                + ", ".join(
                    f"{name} {'n/a' if value is None else f'{value:.1f} h'}" for name, value in phases.items()
                ),
            ),
            (
                "merge -> culprit, found ones",
                f"median {quantile(found, 0.5):.1f} h, p90 {quantile(found, 0.9):.1f} h" if found else "n/a",
            ),
            (
                "per exact culprit",
                f"{self.scores.runs / culprits:.1f} runs, {self.scores.gpu_hours / culprits:.1f} GPU-hours",
            ),
            (
                "95 % intervals holding the truth",
                share(self.scores.intervals_covering, self.scores.intervals),
            ),
            *(
                (f"queued -> started, {label}", f"{count} runs: median {median:.1f} h, p90 {p90:.1f} h")
                for label, (count, median, p90) in sorted(self.waits.items())
            ),
            ("simulated in", f"{self.wall_s:.0f} s"),
        ]
        width = max(len(label) for label, _ in rows)
        return "\n".join(f"{label:<{width}}  {value}" for label, value in rows)


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


def _run_stream(seed: int, *key: object) -> random.Random:
    """The random stream of one run, its own: the n-th run of a suite at a commit measures the same noise
    whatever else was run before it, so two versions of the loop over one seed differ only by the runs
    they chose, not by every later run's noise shifting along one shared stream."""
    return random.Random(":".join(str(part) for part in (seed, *key)))


def simulation_run(
    *,
    seed: int = 1,
    days: int = 14,
    suites: int = 3,
    world_factory: WorldFactory = vllm_world,
    world_name: str = "lab.worlds:vllm_world",
    progress: Callable[[str], None] = lambda line: None,
    explain: bool = False,
) -> SimulationReport:
    """Simulate `days` of main in the world `world_factory` makes; the database must be a throwaway one.
    With `explain`, each step not named exactly is explained from the database (`lab.explain`)."""
    from dashboard.benchmarks.runs import run_claim
    from dashboard.benchmarks.scheduling import runs_schedule_all
    from dashboard.benchmarks.services import repository_default, run_complete
    from dashboard.regressions.sheriff.settle import groups_verify_pending, run_settle

    started = time.monotonic()
    world = world_factory(seed, days, suites)
    commits = list(world.commits)
    if not commits:
        raise ValueError("the world has no commits")
    measured: Counter[tuple[str, int]] = Counter()  # runs measured, and below claimed, per suite and commit
    claims: Counter[tuple[str, int]] = Counter()
    start = min(commit.merged_at for commit in commits)
    start = start.replace(hour=0, minute=0, second=0, microsecond=0)
    clock = Clock(start)
    end = max(commit.merged_at for commit in commits) + timedelta(days=SETTLE_DAYS)
    culprit_at: dict[int, datetime] = {}
    node_seconds = 0.0
    with _simulated(clock):
        repository = repository_default()
        for name, concurrencies in world.suites.items():
            Suite.objects.create(
                name=name,
                hardware_class=HARDWARE,
                install_settings={"method": "wheel_index"},
                concurrencies=list(concurrencies),
                timeouts={"install_s": 1800, "server_start_s": 900, "benchmark_s": 3600},
            )
        runners = [
            Runner.objects.create(name=f"sim-node-{number + 1}", hardware_class=HARDWARE, gpu_count=GPUS)
            for number in range(world.runners)
        ]
        arrived = 0
        busy: dict[int, tuple[Run, datetime]] = {}
        next_schedule = next_sweep = start
        changed = True
        next_report = start + timedelta(days=1)
        while clock.now < end:
            candidates = [next_schedule, *(finish for _, finish in busy.values())]
            if arrived < len(commits):
                candidates.append(commits[arrived].merged_at)
            clock.now = min(candidates)
            while arrived < len(commits) and commits[arrived].merged_at <= clock.now:
                _commit_store(repository=repository, commit=commits[arrived], position=arrived)
                arrived += 1
                changed = True
            for index in sorted(busy):
                run, finish = busy[index]
                if finish > clock.now:
                    continue
                del busy[index]
                at = (run.suite.name, run.commit.position or 0)
                measured[at] += 1
                values = world.measure(*at, index, _run_stream(seed, "measure", *at, measured[at]))
                run_complete(run_id=run.pk, runner=runners[index], result=_result(values=values))
                run_settle(run_id=run.pk)
                changed = True
                _culprits_note(culprit_at, clock.now)
            if clock.now >= next_schedule:
                # The periodic scheduler, skipped (as a no-op) while no commit, run or queue changed.
                if changed:
                    # The nodes are alive: each says so between runs, as a real node's presence beat does.
                    Runner.objects.filter(pk__in=[runner.pk for runner in runners]).update(
                        last_heartbeat_at=clock.now
                    )
                    runs_schedule_all()
                    changed = False
                next_schedule += SCHEDULER_PERIOD
                if clock.now >= next_sweep:
                    changed = bool(groups_verify_pending()) or changed
                    _culprits_note(culprit_at, clock.now)
                    next_sweep += SWEEP_PERIOD
            for index, runner in enumerate(runners):
                if index in busy:
                    continue
                queued = Run.objects.in_dispatch_order().filter(hardware_class=HARDWARE).first()
                if queued is None:
                    break
                claimed = run_claim(run_id=queued.pk, runner=runner)
                if claimed is not None:
                    claim = (claimed.suite.name, claimed.commit.position or 0)
                    claims[claim] += 1
                    stream = _run_stream(seed, "minutes", *claim, claims[claim])
                    minutes = max(10.0, stream.gauss(RUN_MINUTES, RUN_SPREAD_MINUTES / 2))
                    busy[index] = (claimed, clock.now + timedelta(minutes=minutes))
                    changed = True
                    node_seconds += minutes * 60
            if clock.now >= next_report:
                progress(_progress_line(clock.now, start, arrived, started))
                next_report += timedelta(days=1)
        outcome = outcome_read(world=world, culprit_at=culprit_at, gpu_hours=node_seconds / 3600 * GPUS)
    runs_by_kind, waits = _runs_tally()
    scores = scores_compute(outcome)
    states = dict.fromkeys(GroupState.values, 0)
    for state in AlertGroup.objects.values_list("state", flat=True):
        states[state] += 1
    return SimulationReport(
        seed=seed,
        days=days,
        world=world_name,
        suites=len(world.suites),
        runners=len(runners),
        commits=len(commits),
        docs_tests_ci=Commit.objects.filter(change_class=ChangeClass.DOCS_TESTS_CI).count(),
        runs_by_kind=runs_by_kind,
        runs_by_node=[
            Run.objects.filter(status=RunStatus.SUCCEEDED, runner=runner).count() for runner in runners
        ],
        node_hours=node_seconds / 3600,
        groups_confirmed=states[GroupState.CONFIRMED],
        groups_dismissed=states[GroupState.DISMISSED],
        groups_suspected=states[GroupState.SUSPECTED],
        scores=scores,
        wall_s=time.monotonic() - started,
        waits=waits,
        explained=steps_explain(world=world, scores=scores) if explain else {},
    )


def _runs_tally() -> tuple[dict[str, int], dict[str, tuple[int, float, float]]]:
    """The runs that ran, counted by kind, and how long they waited from queued to started by kind (spare
    time apart): (runs, median hours, p90 hours)."""
    runs_by_kind: Counter[str] = Counter()
    waited: dict[str, list[float]] = {}
    for kind, spare_time, queued_at, started_at in Run.objects.filter(status=RunStatus.SUCCEEDED).values_list(
        "kind", "spare_time", "queued_at", "started_at"
    ):
        runs_by_kind[kind] += 1
        if queued_at is not None and started_at is not None:
            label = f"{kind} in spare time" if spare_time else kind
            waited.setdefault(label, []).append((started_at - queued_at).total_seconds() / 3600)
    waits = {}
    for label, hours in waited.items():
        hours.sort()
        waits[label] = (len(hours), quantile(hours, 0.5), quantile(hours, 0.9))
    return dict(runs_by_kind), waits


def _commit_store(*, repository: Any, commit: Any, position: int) -> None:
    """One commit as the commit sync stores it: its class read from its files by the product's classifier."""
    subject = getattr(commit, "subject", "") or f"simulated change {position} (#{60000 + position})"
    Commit.objects.create(
        repository=repository,
        sha=commit.sha,
        position=position,
        committed_at=commit.merged_at,
        subject=subject,
        pr_number=subject_pr_number(subject=subject),
        change_class=change_class_from_paths(paths=commit.paths).value,
    )


def _result(*, values: dict[tuple[int, str], float]) -> Any:
    """What the runner would report for one run: guidellm's levels with the world's values."""
    from dashboard.benchmarks.services import RunResult
    from runners.guidellm_report import GuidellmReport, LevelResult

    by_level: dict[int, dict[str, float]] = {}
    for (concurrency, metric), value in values.items():
        by_level.setdefault(concurrency, {})[metric] = value
    levels = tuple(
        LevelResult(concurrency=concurrency, metrics=metrics)
        for concurrency, metrics in sorted(by_level.items())
    )
    report = GuidellmReport(guidellm_version="simulated", labels={}, levels=levels)
    raw = json.dumps([[level.concurrency, dict(level.metrics)] for level in levels]).encode()
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


def _progress_line(now: datetime, start: datetime, arrived: int, started: float) -> str:
    counts = {state: AlertGroup.objects.filter(state=state).count() for state in GroupState.values}
    runs = Run.objects.filter(status=RunStatus.SUCCEEDED).count()
    return (
        f"  day {(now - start).days}: {arrived} commits, {runs} runs, groups "
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


def simulation_seeds_run(
    *,
    seeds: Sequence[int],
    days: int,
    suites: int,
    world_name: str,
    jobs: int,
    progress: Callable[[str], None] = lambda line: None,
) -> tuple[dict[int, dict[str, Any]], list[str]]:
    """Each seed simulated in its own process and throwaway in-memory database, `jobs` at a time: the
    scores (`Scores.json`) of every seed that gave them, and for each that did not, why."""
    started = time.monotonic()

    def one(seed: int) -> tuple[dict[str, Any] | None, str]:
        result, reason = _seed_simulate(seed=seed, days=days, suites=suites, world_name=world_name)
        progress(f"  seed {seed}: {reason or 'scored'} ({time.monotonic() - started:.0f} s)")
        return result, reason

    scores: dict[int, dict[str, Any]] = {}
    failed: list[str] = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for seed, (result, reason) in zip(seeds, pool.map(one, seeds), strict=True):
            if result is None:
                failed.append(f"seed {seed}: {reason}")
            else:
                scores[seed] = result
    return scores, failed


def _seed_simulate(
    *, seed: int, days: int, suites: int, world_name: str
) -> tuple[dict[str, Any] | None, str]:
    """One seed through `simulate_attribution --json` in a child process: its scores, or why none."""
    command = [
        sys.executable,
        str(Path(settings.BASE_DIR) / "manage.py"),
        "simulate_attribution",
        f"--seed={seed}",
        f"--days={days}",
        f"--suites={suites}",
        f"--world={world_name}",
        "--json",
    ]
    environment = {**os.environ, "DATABASE_URL": "sqlite:///:memory:"}
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=SEED_TIMEOUT_S, env=environment, check=False
        )
    except subprocess.TimeoutExpired:
        return None, f"stopped after {SEED_TIMEOUT_S} s"
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return None, f"exit status {done.returncode}: {tail[0][:300]}"
    try:
        result = json.loads(lines[-1])
    except ValueError:
        return None, f"its last line is not JSON: {lines[-1][:300]}"
    if not isinstance(result, dict):
        return None, "its last line is not a JSON object"
    return result, ""

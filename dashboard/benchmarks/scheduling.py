"""Writes: which commits get benchmarked next: the newest of main, and releases on request."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Max
from django.utils import timezone

from dashboard.benchmarks.models import Commit, Run, RunKind, Runner, RunStatus, Suite
from dashboard.benchmarks.runs import run_enqueue
from dashboard.benchmarks.subjects import ChangeClass
from dashboard.benchmarks.suites import suite_runnable


def runs_schedule(*, suite: Suite, hardware_class: str | None = None, queue_depth: int = 1) -> list[Run]:
    """Queue the newest commits of main that `suite` has not benchmarked, keeping its queue short.

    Newest first, because a node cannot run every commit: what matters is how main is doing now, and
    a change found later is bisected. A short queue keeps what waits fresh: a run queued long ago would
    measure a commit that is no longer the newest. Only when no new commit waits, and nothing else is
    queued for the suite, is one older commit queued (backfill, taken last). Commits touching only docs,
    tests or CI are skipped, and a commit never runs twice for a suite unless someone asks (a forced run).
    A suite a runner could not run (no install settings) is never scheduled.
    """
    if not suite_runnable(suite=suite):
        return []
    hardware_class = hardware_class or suite.hardware_class
    runs = Run.objects.filter(suite=suite, hardware_class=hardware_class)
    waiting = runs.filter(status=RunStatus.QUEUED)
    candidates = Commit.objects.filter(position__isnull=False).exclude(change_class=ChangeClass.DOCS_TESTS_CI)
    if suite.oldest_supported_commit:
        oldest = (
            Commit.objects.filter(sha__startswith=suite.oldest_supported_commit.lower())
            .values_list("position", flat=True)
            .first()
        )
        if oldest is not None:
            candidates = candidates.filter(position__gte=oldest)
    unrun = candidates.exclude(pk__in=runs.values("commit_id")).order_by("-position")
    newest_position = (
        runs.filter(commit__position__isnull=False)
        .order_by("-commit__position")
        .values_list("commit__position", flat=True)
        .first()
    )
    new = unrun if newest_position is None else unrun.filter(position__gt=newest_position)
    free = max(0, queue_depth - waiting.filter(kind=RunKind.ROUTINE).count())
    commits = list(new[:free]) if free else []
    if commits:
        return [
            run_enqueue(commit=commit, suite=suite, hardware_class=hardware_class, kind=RunKind.ROUTINE)
            for commit in commits
        ]
    older = None if waiting.exists() else unrun.first()
    if older is None:
        return []
    return [run_enqueue(commit=older, suite=suite, hardware_class=hardware_class, kind=RunKind.BACKFILL)]


class VersionUnknown(Exception):
    """A release whose commit is not known: its tag is not synced and no sha was given."""


_VERSION = re.compile(r"^\d+\.\d+\.\d+(?:\.post\d+|rc\d+)?$")


def runs_enqueue_versions(*, suite: Suite, versions: list[str], release_commits: dict[str, str]) -> list[Run]:
    """Queue one forced run per released version, attached to the release's commit."""
    from dashboard.benchmarks.services import commit_ensure

    if not suite.installs_releases:
        raise VersionUnknown(
            f"suite {suite.name} installs by {suite.install_settings.get('method')}, not releases"
        )
    runs = []
    for version in versions:
        if not _VERSION.match(version):
            raise VersionUnknown(f"{version!r} is not a release version such as 0.32.0")
        sha = release_commits.get(version)
        commit = commit_ensure(sha=sha) if sha else _release_tag_commit(f"v{version}")
        if commit is None:
            raise VersionUnknown(
                f"no commit known for v{version}: sync the history with its tags (manage.py sync_commits) "
                f"or pass --commit {version}=SHA"
            )
        runs.append(
            run_enqueue(commit=commit, suite=suite, version=version, forced=True, kind=RunKind.RELEASE)
        )
    return runs


def _release_tag_commit(name: str) -> Commit | None:
    # The GitHub app stores the tags of the synced history; a commit reaches them by its reverse relation.
    return Commit.objects.filter(tags__name=name).first()


# A hardware class is served while one of its nodes said it was alive this recently; a node down for a
# day's maintenance does not stop its class's schedule, one that never came does.
NODE_SERVING_WINDOW = timedelta(days=1)


@dataclass(frozen=True)
class NodeWait:
    """An active suite that no node of its hardware class serves: since when it waits for one (the last
    node of the class seen, else the suite's creation)."""

    hardware_class: str
    since: datetime
    ever_seen: bool


def suites_waiting_for_nodes(*, now: datetime | None = None) -> dict[int, NodeWait]:
    """Active suites whose hardware class has no node alive within NODE_SERVING_WINDOW, by suite id."""
    now = now or timezone.now()
    last_seen = dict(
        Runner.objects.filter(last_heartbeat_at__isnull=False)
        .values("hardware_class")
        .annotate(last=Max("last_heartbeat_at"))
        .values_list("hardware_class", "last")
        .order_by()
    )
    waiting = {}
    for suite in Suite.objects.filter(is_active=True).only("pk", "hardware_class", "created_at"):
        seen = last_seen.get(suite.hardware_class)
        if seen is None or seen < now - NODE_SERVING_WINDOW:
            waiting[suite.pk] = NodeWait(
                hardware_class=suite.hardware_class,
                since=seen or suite.created_at,
                ever_seen=seen is not None,
            )
    return waiting


def runs_schedule_all() -> list[Run]:
    """One scheduling pass over every active suite whose install method follows main's commits and whose
    hardware class a node serves: runs for a class with no node would only pile up in its queue."""
    queued: list[Run] = []
    waiting = suites_waiting_for_nodes()
    for suite in Suite.objects.filter(is_active=True):
        if suite.installs_releases:
            continue  # release suites run what benchmark_versions asks for, not every commit
        if suite.pk in waiting:
            continue
        queued.extend(runs_schedule(suite=suite))
    return queued

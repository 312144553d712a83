"""Writes: which commits get benchmarked next: the newest of main, and releases on request."""

from __future__ import annotations

import re

from dashboard.benchmarks.models import Commit, Run, RunStatus, Suite
from dashboard.benchmarks.runs import run_enqueue
from dashboard.benchmarks.subjects import ChangeClass
from runners.suites import InstallMethod


def runs_schedule(*, suite: Suite, hardware_class: str | None = None, queue_depth: int = 2) -> list[Run]:
    """Queue the newest commits of main that `suite` has not benchmarked, keeping its queue short.

    Newest first, because a node cannot run every commit: what matters is how main is doing now, and
    a change found later is bisected. Commits touching only docs, tests or CI are skipped, and a
    commit never runs twice for a suite unless someone asks (a forced run).
    """
    hardware_class = hardware_class or suite.hardware_class
    waiting = Run.objects.filter(suite=suite, hardware_class=hardware_class, status=RunStatus.QUEUED).count()
    free = max(0, queue_depth - waiting)
    if not free:
        return []
    candidates = Commit.objects.filter(position__isnull=False).exclude(change_class=ChangeClass.DOCS_TESTS_CI)
    if suite.oldest_supported_commit:
        oldest = (
            Commit.objects.filter(sha__startswith=suite.oldest_supported_commit.lower())
            .values_list("position", flat=True)
            .first()
        )
        if oldest is not None:
            candidates = candidates.filter(position__gte=oldest)
    already = Run.objects.filter(suite=suite, hardware_class=hardware_class).values("commit_id")
    commits = list(candidates.exclude(pk__in=already).order_by("-position")[:free])
    return [run_enqueue(commit=commit, suite=suite, hardware_class=hardware_class) for commit in commits]


class VersionUnknown(Exception):
    """A release whose commit is not known: its tag is not synced and no sha was given."""


_VERSION = re.compile(r"^\d+\.\d+\.\d+(?:\.post\d+|rc\d+)?$")


def runs_enqueue_versions(*, suite: Suite, versions: list[str], release_commits: dict[str, str]) -> list[Run]:
    """Queue one forced run per released version, attached to the release's commit."""
    from dashboard.benchmarks.services import commit_ensure

    if suite.install_settings.get("method") != InstallMethod.PYPI_RELEASE:
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
        runs.append(run_enqueue(commit=commit, suite=suite, version=version, forced=True))
    return runs


def _release_tag_commit(name: str) -> Commit | None:
    # The GitHub app stores the tags of the synced history; a commit reaches them by its reverse relation.
    return Commit.objects.filter(tags__name=name).first()


def runs_schedule_all() -> list[Run]:
    """One scheduling pass over every active suite whose install method follows main's commits."""
    queued: list[Run] = []
    for suite in Suite.objects.filter(is_active=True):
        if suite.install_settings.get("method") == InstallMethod.PYPI_RELEASE:
            continue  # release suites run what benchmark_versions asks for, not every commit
        queued.extend(runs_schedule(suite=suite))
    return queued

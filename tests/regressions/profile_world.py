"""A confirmed regression whose culprit and parent were profiled: the real H200 traces of
tests/fixtures/profiles (a 2048-wide step in the parent, a 4096-wide one in the culprit)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import cast

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from dashboard.benchmarks.models import Commit, Run, RunKind, RunProfile, RunStatus, Series, Suite
from dashboard.benchmarks.profiles import profile_trace_key
from dashboard.regressions.models import Alert, AlertGroup, AlertKind, GroupKind, GroupState
from runners.profiles import trace_summarise
from tests.factories import CommitFactory, RepositoryFactory, RunFactory, SeriesFactory, SuiteFactory

PROFILES = Path(__file__).resolve().parents[1] / "fixtures" / "profiles"
PROFILING = {"requests": 4, "concurrency": 1}


@dataclass(frozen=True)
class ProfiledGroup:
    suite: Suite
    base: Commit  # the group's base: last benchmarked before the change
    parent: Commit  # the culprit's parent
    culprit: Commit  # the range's head
    group: AlertGroup


def profiled_group_create(*, profiled: bool = True, profiling: dict | None = None) -> ProfiledGroup:
    """A group over (base, culprit] with parent between them; with `profiled`, both hold a profile run."""
    repository = RepositoryFactory()
    start = (Commit.objects.order_by("-position").values_list("position", flat=True).first() or 0) + 10
    base, parent, culprit = (
        cast(Commit, CommitFactory(repository=repository, position=start + offset)) for offset in range(3)
    )
    suite = cast(Suite, SuiteFactory(name="kimi-k3-8k1k", hardware_class="b300"))
    suite.benchmark_settings = {**suite.benchmark_settings, "profiling": profiling or PROFILING}
    suite.save(update_fields=["benchmark_settings"])
    series = cast(
        Series,
        SeriesFactory(suite=suite, hardware_class="b300", concurrency=16, metric="output_throughput_tok_s"),
    )
    group = AlertGroup.objects.create(
        base_commit=base,
        head_commit=culprit,
        kind=GroupKind.REGRESSION,
        state=GroupState.CONFIRMED,
        magnitude_pct=6.0,
    )
    Alert.objects.create(
        group=group, series=series, kind=AlertKind.REGRESSION, before_value=100, after_value=94, change_pct=-6
    )
    if profiled:
        for commit, tag in ((parent, "gpu_base"), (culprit, "gpu_head")):
            profile_add(commit=commit, suite=suite, tag=tag)
    return ProfiledGroup(suite=suite, base=base, parent=parent, culprit=culprit, group=group)


def profile_add(*, commit: Commit, suite: Suite, tag: str) -> RunProfile:
    """A succeeded profile run of `commit` holding the recorded trace `tag` and its summary."""
    run = cast(
        Run,
        RunFactory(
            commit=commit,
            suite=suite,
            hardware_class="b300",
            kind=RunKind.PROFILE,
            status=RunStatus.SUCCEEDED,
        ),
    )
    raw = (PROFILES / f"{tag}_trace.json.gz").read_bytes()
    key = default_storage.save(profile_trace_key(run_id=run.pk), ContentFile(raw))
    return RunProfile.objects.create(
        run=run,
        trace_key=key,
        trace_name=f"{tag}_trace.json.gz",
        trace_bytes=len(raw),
        summary=trace_summarise(raw=raw).to_json(),
        server_metrics={"prompt_tokens": 512.0},
    )

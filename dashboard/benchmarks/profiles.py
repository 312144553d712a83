"""Profiles of runs: the profiling stage's trace in the report storage, its summary in the row, and the
diff of two profiles (runners.profiles does the arithmetic; this module stores and finds)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction

from dashboard.benchmarks.models import Commit, Runner, RunProfile, RunStatus
from dashboard.benchmarks.runs import RunNotOwned, runs_held
from runners.profiles import OpChange, ProfileSummary, profile_diff


def profile_trace_key(*, run_id: int) -> str:
    """Where run `run_id`'s trace lies: a thousand runs to a folder, like the reports."""
    return f"profiles/{run_id // 1000}/run-{run_id}.pt.trace.json.gz"


def profile_store(
    *,
    run_id: int,
    runner: Runner,
    trace_gzip: bytes,
    trace_name: str,
    summary: ProfileSummary,
    server_metrics: Mapping[str, float],
    settings: Mapping[str, Any],
) -> RunProfile:
    """Keep a held run's profile: the trace (already gzip'd) in the report storage, the rest in its row.
    Sent twice (a retried delivery), the second replaces the first; RunNotOwned when the run is not held."""
    with transaction.atomic():
        run = runs_held(run_id, runner).select_for_update().first()
        if run is None:
            raise RunNotOwned(f"run {run_id} is no longer held by {runner.name}")
        key = profile_trace_key(run_id=run_id)
        if default_storage.exists(key):
            default_storage.delete(key)
        saved = default_storage.save(key, ContentFile(trace_gzip))
        profile, _ = RunProfile.objects.update_or_create(
            run=run,
            defaults={
                "trace_key": saved,
                "trace_name": trace_name,
                "trace_bytes": len(trace_gzip),
                "summary": summary.to_json(),
                "server_metrics": dict(server_metrics),
                "settings": dict(settings),
            },
        )
    return profile


def profile_trace_read(*, run_id: int) -> tuple[RunProfile, bytes] | None:
    """Run `run_id`'s profile and its gzip'd trace, or None when it has none."""
    profile = RunProfile.objects.select_related("run__commit").filter(run_id=run_id).first()
    if profile is None or not profile.trace_key:
        return None
    with default_storage.open(profile.trace_key, "rb") as stored:
        return profile, stored.read()


def profile_latest(*, commit: Commit, suite_id: int, hardware_class: str) -> RunProfile | None:
    """The newest profile of a finished run of `commit` by the suite on the hardware class."""
    return (
        RunProfile.objects.select_related("run__commit")
        .filter(
            run__commit=commit,
            run__suite_id=suite_id,
            run__hardware_class=hardware_class,
            run__status=RunStatus.SUCCEEDED,
        )
        .order_by("-run__finished_at", "-pk")
        .first()
    )


@dataclass(frozen=True)
class ProfileComparison:
    """Two profiles of the same suite and hardware, parent (base) and culprit (head), and their diff."""

    base: RunProfile
    head: RunProfile
    changes: tuple[OpChange, ...]
    base_step_ms: Mapping[str, float]
    head_step_ms: Mapping[str, float]

    def rows(self, *, limit: int | None = None) -> list[dict[str, Any]]:
        """The changes as the API and the page show them, largest |delta_ms| first."""
        return [
            {
                "name": change.name,
                "device": change.device,
                "base_ms": round(change.base_ms, 4),
                "head_ms": round(change.head_ms, 4),
                "delta_ms": round(change.delta_ms, 4),
                "delta_pct": None if change.delta_pct is None else round(change.delta_pct, 2),
                "step_share_pct": _rounded(change.step_share_pct(base_step_ms=self.base_step_ms)),
                "base_calls": change.base_calls,
                "head_calls": change.head_calls,
            }
            for change in self.changes[:limit]
        ]


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def profile_compare(*, base: RunProfile, head: RunProfile) -> ProfileComparison:
    """The diff of two stored profiles."""
    before, after = ProfileSummary.from_json(base.summary), ProfileSummary.from_json(head.summary)
    return ProfileComparison(
        base=base,
        head=head,
        changes=profile_diff(base=before, head=after),
        base_step_ms=before.step_ms,
        head_step_ms=after.step_ms,
    )

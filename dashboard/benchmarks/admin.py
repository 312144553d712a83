from __future__ import annotations

from django.contrib import admin
from django.forms import ModelForm
from django.http import HttpRequest

from dashboard.benchmarks.capacity import suite_capacity_recompute
from dashboard.benchmarks.models import (
    AccuracyScore,
    Commit,
    LoadLevel,
    Measurement,
    Repository,
    Run,
    Runner,
    Series,
    Suite,
)


@admin.register(Repository)
class RepositoryAdmin(admin.ModelAdmin):
    list_display = ("full_name", "default_branch")


@admin.register(Commit)
class CommitAdmin(admin.ModelAdmin):
    list_display = ("short_sha", "subject", "pr_number", "committed_at", "position")
    search_fields = ("sha", "subject", "author_name")
    list_filter = ("repository",)
    ordering = ("-position",)


@admin.register(Suite)
class SuiteAdmin(admin.ModelAdmin):
    list_display = ("name", "hardware_class", "is_active", "oldest_supported_commit")
    list_filter = ("hardware_class", "is_active")

    def save_model(self, request: HttpRequest, obj: Suite, form: ModelForm[Suite], change: bool) -> None:
        super().save_model(request, obj, form, change)
        if change and "benchmark_settings" in form.changed_data:
            # Objectives may have changed: capacity is re-derived from the stored load curves.
            suite_capacity_recompute(suite=obj)


@admin.register(Runner)
class RunnerAdmin(admin.ModelAdmin):
    list_display = ("name", "hardware_class", "gpu_model", "gpu_count", "last_heartbeat_at")


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("id", "suite", "hardware_class", "commit", "status", "runner", "queued_at", "finished_at")
    list_filter = ("status", "suite", "hardware_class", "source")
    list_select_related = ("suite", "commit", "runner")
    raw_id_fields = ("commit",)
    search_fields = ("commit__sha",)


@admin.register(Series)
class SeriesAdmin(admin.ModelAdmin):
    list_display = ("suite", "hardware_class", "concurrency", "metric")
    list_filter = ("suite", "hardware_class", "metric")
    list_select_related = ("suite",)


@admin.register(Measurement)
class MeasurementAdmin(admin.ModelAdmin):
    list_display = ("series", "commit", "run", "value")
    list_select_related = ("series__suite", "commit", "run")
    raw_id_fields = ("run", "series", "commit")


@admin.register(LoadLevel)
class LoadLevelAdmin(admin.ModelAdmin):
    list_display = ("run", "index", "label", "strategy")
    list_select_related = ("run",)
    raw_id_fields = ("run",)


@admin.register(AccuracyScore)
class AccuracyScoreAdmin(admin.ModelAdmin):
    list_display = ("run", "name", "score_pct", "samples", "ci_low_pct", "ci_high_pct")
    list_select_related = ("run",)
    raw_id_fields = ("run",)

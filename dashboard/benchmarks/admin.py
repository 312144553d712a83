from django.contrib import admin

from dashboard.benchmarks.models import Commit, Measurement, Repository, Run, Runner, Series, Suite


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

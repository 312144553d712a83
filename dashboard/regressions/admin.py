from django.contrib import admin
from django.http import HttpRequest

from dashboard.regressions.models import Alert, AlertGroup, DetectionSetting, Notification, TriageEvent


@admin.register(DetectionSetting)
class DetectionSettingAdmin(admin.ModelAdmin):
    list_display = ("suite", "metric_prefix", "min_relative_change", "p_threshold", "enabled")
    list_filter = ("enabled", "suite")


class AlertInline(admin.TabularInline):
    model = Alert
    extra = 0
    fields = (
        "series",
        "kind",
        "source",
        "before_value",
        "after_value",
        "change_pct",
        "p_value",
        "status",
        "status_set_individually",
    )
    readonly_fields = ("series", "kind", "before_value", "after_value", "change_pct", "p_value")


@admin.register(AlertGroup)
class AlertGroupAdmin(admin.ModelAdmin):
    list_display = (
        "pk",
        "kind",
        "status",
        "base_commit",
        "head_commit",
        "magnitude_pct",
        "assignee",
        "created_at",
    )
    list_filter = ("kind", "status")
    raw_id_fields = ("base_commit", "head_commit", "assignee")
    inlines = (AlertInline,)


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ("group", "channel", "status", "target", "attempts", "sent_at", "last_error")
    list_filter = ("channel", "status")
    raw_id_fields = ("group",)


@admin.register(TriageEvent)
class TriageEventAdmin(admin.ModelAdmin):
    list_display = ("created_at", "group", "alert", "user", "field", "old_value", "new_value")
    raw_id_fields = ("group", "alert", "user")

    def has_change_permission(self, request: HttpRequest, obj: TriageEvent | None = None) -> bool:
        return False  # the history is what happened; it is not edited

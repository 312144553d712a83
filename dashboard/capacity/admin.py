from django.contrib import admin

from dashboard.capacity.models import AccuracyScore, LoadLevel


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

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from dashboard.tokens.models import ApiToken
from dashboard.tokens.scopes import ScopeInvalid, TokenScope
from dashboard.tokens.services import token_create, token_revoke


class ApiTokenCreateForm(forms.ModelForm):
    scope = forms.CharField(
        initial="ingest:*",
        help_text=(
            "ingest:* or ingest:SUITE[,SUITE...] for reports (+new-suites at the end: may create suites); "
            "runner:HARDWARE_CLASS/RUNNER_NAME for a runner"
        ),
    )

    class Meta:
        model = ApiToken
        fields = ("name",)

    def clean_scope(self) -> TokenScope:
        try:
            return TokenScope.parse(self.cleaned_data["scope"])
        except ScopeInvalid as error:
            raise forms.ValidationError(str(error)) from None


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "scope_text", "prefix", "created_at", "last_used_at", "revoked_at")
    list_filter = ("kind",)
    search_fields = ("name", "runner_name", "prefix")
    actions = ("revoke",)
    # What a token may do is fixed once issued: revoke it and issue another to change it.
    _fixed = (
        "name",
        "kind",
        "suites",
        "hardware_class",
        "runner_name",
        "prefix",
        "created_at",
        "last_used_at",
    )

    @admin.display(description="scope")
    def scope_text(self, token: ApiToken) -> str:
        return str(token.scope)

    def get_form(
        self, request: HttpRequest, obj: ApiToken | None = None, change: bool = False, **kwargs: Any
    ) -> Any:
        if obj is None:
            kwargs["form"] = ApiTokenCreateForm
        return super().get_form(request, obj, change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> Any:
        return ("name", "scope") if obj is None else (*self._fixed, "revoked_at")

    def get_readonly_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> Any:
        return () if obj is None else self._fixed

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        issued = token_create(name=form.cleaned_data["name"], scope=form.cleaned_data["scope"])
        obj.pk = issued.token.pk
        obj.refresh_from_db()
        messages.warning(
            request,
            f"Token {obj.name!r}: {issued.secret} — copy it now: it is stored hashed and never shown again.",
        )

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        count = sum(token_revoke(token_id=pk) for pk in queryset.values_list("pk", flat=True))
        messages.success(request, f"{count} token(s) revoked")

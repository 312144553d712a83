"""API tokens: how machines (CI systems, runner nodes) prove who they are. Only a hash is stored."""

from __future__ import annotations

from django.db import models

from dashboard.tokens.scopes import TokenKind, TokenScope


class ApiToken(models.Model):
    name = models.CharField(
        max_length=100, unique=True, help_text="Who holds it, e.g. ci-nightly or b300-node-1"
    )
    kind = models.CharField(max_length=20, choices=[(kind.value, kind.value) for kind in TokenKind])
    suites = models.JSONField(
        default=list, blank=True, help_text='ingest: the suites it may report for; ["*"] for every suite'
    )
    may_create_suites = models.BooleanField(
        default=False, help_text="ingest: may create a suite by naming it (scope +new-suites)"
    )
    hardware_class = models.SlugField(max_length=50, blank=True, help_text="runner: its hardware class")
    runner_name = models.SlugField(max_length=100, blank=True, help_text="runner: the runner it belongs to")
    prefix = models.CharField(max_length=16, editable=False, help_text="The token's first characters")
    key_sha256 = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, help_text="Set to refuse the token from then on")

    class Meta:
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.name} ({self.scope})"

    @property
    def scope(self) -> TokenScope:
        return TokenScope(
            kind=TokenKind(self.kind),
            suites=tuple(self.suites),
            may_create_suites=self.may_create_suites,
            hardware_class=self.hardware_class,
            runner_name=self.runner_name,
        )

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

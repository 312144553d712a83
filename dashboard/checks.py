"""Start-up refusals: a production web server never runs on a missing or known SECRET_KEY."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured

_PLACEHOLDERS = ("change-me", "changeme", "insecure", "secret-key", "example")


def secret_key_problem(key: str) -> str | None:
    """Why `key` is not a real secret key, or None."""
    if not key:
        return "SECRET_KEY is not set"
    if any(placeholder in key.lower() for placeholder in _PLACEHOLDERS):
        return "SECRET_KEY is a placeholder"
    if len(key) < 50 or len(set(key)) < 5:
        return "SECRET_KEY is too short or too simple (50 random characters or more)"
    return None


def secret_key_refuse() -> None:
    """Raise when DEBUG is off and the key is not real: called where the web server starts."""
    try:
        key = settings.SECRET_KEY
    except ImproperlyConfigured:  # Django's own refusal of an empty key
        key = ""
    problem = None if settings.DEBUG else secret_key_problem(key)
    if problem:
        raise ImproperlyConfigured(
            f"{problem}; generate one with: python -c 'import secrets; print(secrets.token_urlsafe(50))'"
        )


@register(Tags.security, deploy=True)
def secret_key_check(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The same refusal in `check --deploy` (development commands such as makemigrations need no key)."""
    try:
        secret_key_refuse()
    except ImproperlyConfigured as error:
        return [Error(str(error), id="perfwatch.E001")]
    return []


@register(Tags.caches, deploy=True)
def shared_cache_check(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """A production site with several web workers needs the one shared cache, not one per worker."""
    if settings.PERFWATCH_DEMO or settings.PERFWATCH_CACHE_URL:
        return []
    return [
        Warning(
            "PERFWATCH_CACHE_URL is not set: each web worker keeps its own cache and computes every view "
            "again; point it at Redis (e.g. redis://:password@redis:6379/1)",
            id="perfwatch.W002",
        )
    ]

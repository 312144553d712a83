"""Writes and the one check: create, revoke and authenticate API tokens."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from dashboard.tokens.models import ApiToken
from dashboard.tokens.scopes import TokenForbidden, TokenKind, TokenScope

TOKEN_PREFIX = "pwt_"
_TOKEN = re.compile(r"^pwt_[A-Za-z0-9_-]{43}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
# last_used_at is written at most this often per token, so heartbeats do not turn into a write each.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class TokenRejected(Exception):
    """No usable token: answered 401 with `reason` (one line)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TokenNameInvalid(ValueError):
    """The name is malformed or taken."""


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    secret: str  # the only time the raw token exists: show it once


def key_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def token_create(*, name: str, scope: TokenScope) -> IssuedToken:
    """A new token with its raw value; only its SHA-256 is stored, so this is the one chance to read it."""
    name = name.strip()
    if not _NAME.match(name):
        raise TokenNameInvalid(f"invalid token name {name!r}: letters, digits, '.', '_' or '-', at most 100")
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    try:
        with transaction.atomic():
            token = ApiToken.objects.create(
                name=name,
                kind=scope.kind.value,
                suites=list(scope.suites),
                may_create_suites=scope.may_create_suites,
                hardware_class=scope.hardware_class,
                runner_name=scope.runner_name,
                prefix=secret[:12],
                key_sha256=key_digest(secret),
            )
    except IntegrityError:
        raise TokenNameInvalid(f"a token named {name!r} exists already") from None
    return IssuedToken(token=token, secret=secret)


def token_revoke(*, token_id: int) -> bool:
    """Refuse the token from now on; False when it was revoked already."""
    return bool(ApiToken.objects.filter(pk=token_id, revoked_at=None).update(revoked_at=timezone.now()))


def token_authenticate(*, authorization: str, kinds: tuple[TokenKind, ...]) -> ApiToken:
    """The live token named by an `Authorization: Bearer ...` header value, of one of `kinds`.

    Raises TokenRejected (401) for a missing, malformed, unknown or revoked token and TokenForbidden
    (403) for a token of another kind.
    """
    scheme, _, secret = authorization.strip().partition(" ")
    if not authorization:
        raise TokenRejected("authentication required: send 'Authorization: Bearer <token>'")
    if scheme.lower() != "bearer" or not secret.strip():
        raise TokenRejected("the Authorization header must be 'Bearer <token>'")
    secret = secret.strip()
    if not _TOKEN.match(secret):
        raise TokenRejected("malformed token")
    token = ApiToken.objects.filter(key_sha256=key_digest(secret)).first()
    if token is None:
        raise TokenRejected("unknown token")
    if token.is_revoked:
        raise TokenRejected(f"token {token.name!r} was revoked")
    if token.kind not in kinds:
        raise TokenForbidden(f"a {token.kind} token may not do this; it needs a {' or '.join(kinds)} token")
    now = timezone.now()
    ApiToken.objects.filter(pk=token.pk).exclude(last_used_at__gt=now - LAST_USED_RESOLUTION).update(
        last_used_at=now
    )
    return token

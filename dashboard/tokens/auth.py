"""The one check every machine-facing write goes through: `@token_required(TokenKind.RUNNER, ...)`.

The decorated view is called with the authenticated token as the keyword argument `token`; a view checks
what the request names against `token.scope` (`require_report`, `require_runner`), whose TokenForbidden
the decorator answers with 403. A missing or bad token is 401 and a body announced larger than
`max_body_bytes` is 413, both before a byte of the body is read. Token authentication replaces the CSRF
check: no cookie is involved.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, Concatenate

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from dashboard.tokens.models import ApiToken
from dashboard.tokens.scopes import TokenForbidden, TokenKind
from dashboard.tokens.services import TokenRejected, token_authenticate

TokenView = Callable[Concatenate[HttpRequest, ...], HttpResponse]
DEFAULT_MAX_BODY_BYTES = 1024 * 1024


def _content_length_error(request: HttpRequest, *, max_bytes: int) -> JsonResponse | None:
    text = request.META.get("CONTENT_LENGTH") or "0"
    if not text.isdigit():
        return JsonResponse({"error": f"invalid Content-Length {text[:20]!r}"}, status=400)
    if int(text) > max_bytes:
        return JsonResponse(
            {"error": f"request body of {int(text)} bytes is over the limit of {max_bytes}"}, status=413
        )
    return None


def token_required(
    *kinds: TokenKind, max_body_bytes: int | Callable[[], int] = DEFAULT_MAX_BODY_BYTES
) -> Callable[[Callable[..., HttpResponse]], TokenView]:
    """`max_body_bytes` may be a callable, read per request (for limits that come from settings)."""
    if not kinds:
        raise ValueError("token_required needs at least one token kind")

    def decorator(view: Callable[..., HttpResponse]) -> TokenView:
        @csrf_exempt
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            try:
                token: ApiToken = token_authenticate(
                    authorization=request.headers.get("Authorization", ""), kinds=kinds
                )
                limit = max_body_bytes() if callable(max_body_bytes) else max_body_bytes
                too_large = _content_length_error(request, max_bytes=limit)
                if too_large is not None:
                    return too_large
                return view(request, *args, token=token, **kwargs)
            except TokenRejected as error:
                response = JsonResponse({"error": error.reason}, status=401)
                response["WWW-Authenticate"] = 'Bearer realm="perfwatch"'
                return response
            except TokenForbidden as error:
                return JsonResponse({"error": error.reason}, status=403)

        return wrapper

    return decorator

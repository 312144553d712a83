"""The one check every machine-facing write goes through: `@token_required(TokenKind.RUNNER, ...)`.

The decorated view is called with the authenticated token as the keyword argument `token`; a view checks
what the request names against `token.scope` (`require_report`, `require_runner`), whose TokenForbidden
the decorator answers with 403. A missing or bad token is 401, before the body is read. Token
authentication replaces the CSRF check: no cookie is involved.
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


def token_required(*kinds: TokenKind) -> Callable[[Callable[..., HttpResponse]], TokenView]:
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
                return view(request, *args, token=token, **kwargs)
            except TokenRejected as error:
                response = JsonResponse({"error": error.reason}, status=401)
                response["WWW-Authenticate"] = 'Bearer realm="perfwatch"'
                return response
            except TokenForbidden as error:
                return JsonResponse({"error": error.reason}, status=403)

        return wrapper

    return decorator

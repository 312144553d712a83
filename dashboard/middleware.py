"""Site-wide request guards that run before any view."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import unquote_plus

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse


def nul_bytes_refused(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    """A NUL character in the path or query string is answered 400: PostgreSQL text cannot hold one."""

    def middleware(request: HttpRequest) -> HttpResponse:
        query = request.META.get("QUERY_STRING", "")
        if "\x00" in request.path or "\x00" in unquote_plus(query):
            reason = "NUL character in the URL"
            if request.path.startswith("/api/"):
                return JsonResponse({"error": reason}, status=400)
            return HttpResponseBadRequest(reason, content_type="text/plain")
        return get_response(request)

    return middleware


def client_ip(request: HttpRequest) -> str:
    """The browser's address: the last X-Forwarded-For hop when behind the proxy, else the peer."""
    if settings.PERFWATCH_BEHIND_PROXY:
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")[-1].strip()
        if forwarded:
            return forwarded
    return str(request.META.get("REMOTE_ADDR", ""))

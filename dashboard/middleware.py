"""Site-wide request guards that run before any view."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import unquote_plus

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse

# How long a client is asked to wait when the database is gone: about what a PostgreSQL restart takes.
DATABASE_RETRY_AFTER_S = 15


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


def _answers_json(request: HttpRequest) -> bool:
    json_paths = ("/api/", "/github/webhook/")
    return request.path.startswith(json_paths) or "json" in request.headers.get("Accept", "")


class DatabaseUnavailable:
    """The database gone (a restart, a failover, too many connections) is a 503 with Retry-After, never a
    500: JSON for the API and the webhook, so runners and CI retry after the wait; plain text for pages.
    Nothing was stored: the request's transaction did not commit."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, OperationalError | InterfaceError) or not _lost_connection(exception):
            return None
        reason = "the database is unavailable; retry later"
        response: HttpResponse
        if _answers_json(request):
            response = JsonResponse({"error": reason, "retry_after_s": DATABASE_RETRY_AFTER_S}, status=503)
        else:
            response = HttpResponse(reason, status=503, content_type="text/plain; charset=utf-8")
        response["Retry-After"] = str(DATABASE_RETRY_AFTER_S)
        return response


def _lost_connection(exception: Exception) -> bool:
    # An OperationalError is also what a statement timeout or a lock timeout raises: those are the
    # request's own trouble, answered as errors. A connection refused, closed or terminated is not.
    text = str(exception).lower()
    return isinstance(exception, InterfaceError) or any(
        marker in text
        for marker in (
            "connection",
            "server closed",
            "terminating",
            "the database system is",
            "could not connect",
            "too many clients",
        )
    )

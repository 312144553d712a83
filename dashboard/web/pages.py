"""What every page view shares."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def not_found(request: HttpRequest, message: str) -> HttpResponse:
    return render(request, "404.html", {"exception": message}, status=404)

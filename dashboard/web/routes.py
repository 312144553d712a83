"""Paths of routes built for many arguments: a route reversed once, then filled in per use."""

from __future__ import annotations

from collections.abc import Callable

from django.urls import reverse


def route_builder(name: str, placeholder: str) -> Callable[[str], str]:
    """argument -> path of the route `name`, reversed once rather than once per use."""
    pattern = reverse(name, args=[placeholder])
    return lambda argument: pattern.replace(placeholder, argument)

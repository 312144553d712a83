"""Time on the run pages: durations as people read them, and elapsed times the page keeps counting."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from dashboard.web.run_pages import duration_text

register = template.Library()


@register.filter
def duration(seconds: float | None) -> str:
    """Seconds as `14 min 05 s`; empty when unknown."""
    return "" if seconds is None else duration_text(seconds=float(seconds))


@register.filter
def age(moment: datetime | None, now: datetime) -> str:
    """How long before `now` a moment was, as `42 s` or `3 min 10 s`; empty when unknown."""
    return "" if moment is None else duration_text(seconds=max(0.0, (now - moment).total_seconds()))


@register.simple_tag
def elapsed(since: datetime | None, now: datetime) -> SafeString | str:
    """Time from `since` to `now`, in a span that charts.js counts on from while the page is open."""
    if since is None:
        return "–"
    seconds = int(max(0.0, (now - since).total_seconds()))
    return format_html(
        '<span class="elapsed" data-elapsed-base="{}" title="since {} UTC">{}</span>',
        seconds,
        since.strftime("%Y-%m-%d %H:%M:%S"),
        duration_text(seconds=seconds),
    )

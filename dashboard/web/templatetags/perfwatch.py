"""Small presentation filters for PerfWatch templates."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import yaml
from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from dashboard.benchmarks.metrics import metric_display
from dashboard.benchmarks.models import Commit, Repository, Run
from dashboard.web.run_pages import duration_text

register = template.Library()


@register.filter
def run_duration(run: Run) -> str:
    """Wall time of a run as `1 h 02 min`, `14 min 05 s` or `42 s`; empty while it has not finished."""
    if run.started_at is None or run.finished_at is None:
        return ""
    return duration_text(seconds=int((run.finished_at - run.started_at).total_seconds()))


@register.filter
def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True)


@register.filter
def yaml_text(value: Any) -> str:
    """Settings as a suite's YAML file spells them, keys in their stored order."""
    return yaml.safe_dump(value, sort_keys=False, allow_unicode=True, default_flow_style=False, width=100)


_SHA = re.compile(r"^[0-9a-f]{7,40}$")


@register.simple_tag
def github_compare(base: Commit, head: Commit) -> str:
    """GitHub's compare page of a range base...head: its commits and their diff. Built from the
    repository and the two shas, never from stored URLs; empty when a sha is not one."""
    return github_compare_refs(head.repository, base.sha, head.sha)


@register.simple_tag
def github_compare_refs(repository: Repository, base_sha: str, head_sha: str) -> str:
    """:func:`github_compare` from a repository and two shas."""
    if not (_SHA.match(base_sha) and _SHA.match(head_sha)):
        return ""
    return f"{repository.html_url}/compare/{base_sha}...{head_sha}"


@register.filter
def metric_label(metric: str) -> str:
    """A metric key as a page says it: `ttft_ms_p99` reads "TTFT p99 (ms)"."""
    display = metric_display(metric=metric)
    if not display.unit or display.unit.lower() in display.short_label.lower():
        return display.short_label
    return f"{display.short_label} ({display.unit})"


@register.filter
def metric_labels(metrics: Sequence[str], limit: int = 3) -> str:
    """The first `limit` metrics by their labels, and how many more."""
    shown = ", ".join(metric_display(metric=metric).short_label for metric in metrics[:limit])
    return f"{shown} +{len(metrics) - limit}" if len(metrics) > limit else shown


@register.filter
def signed_pct(value: float | None, decimals: int = 1) -> str:
    """A change with its sign, always: "+9.1 %", "−5.8 %" (a true minus), "0.0 %"."""
    if value is None:
        return "–"
    text = f"{abs(value):.{decimals}f} %"
    if round(value, decimals) == 0:
        return text
    return ("+" if value > 0 else "\u2212") + text


@register.filter
def p_value(value: float | None) -> str:
    """A p-value as people read it: "< 0.0001" below that, else four decimals."""
    if value is None:
        return "–"
    return "< 0.0001" if value < 0.0001 else f"{value:.4f}"


_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")
_EMPHASIS = re.compile(r"(?<![\w*])\*([^*]+)\*(?![\w*])")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")


@register.filter
def inline_markdown(text: str) -> SafeString:
    """A tracking issue's line as GitHub shows it: `code`, **bold**, *emphasis*; a link keeps its text.
    Everything is escaped first, so no markup from the issue reaches the page."""
    html = str(escape(text))
    html = _LINK.sub(r"\1", html)
    html = _CODE.sub(r"<code>\1</code>", html)
    html = _BOLD.sub(r"<b>\1</b>", html)
    html = _EMPHASIS.sub(r"<em>\1</em>", html)
    return mark_safe(html)

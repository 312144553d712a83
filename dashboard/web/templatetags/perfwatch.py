"""Small presentation filters for PerfWatch templates."""

from __future__ import annotations

import json
from typing import Any

import yaml
from django import template

from dashboard.benchmarks.models import Run
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

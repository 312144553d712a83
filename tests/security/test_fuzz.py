"""Generated input over every URL pattern and the JSON API: PerfWatch never answers with a 5xx.

Hypothesis draws a route, values for its path parameters (including huge numbers, NUL bytes and any
Unicode), a query string of the filter names the views read with hostile values, and, for the write
endpoints, JSON bodies of any shape, mutated real reports and form posts as staff. Iterations are
bounded so the whole file stays well under a minute.
"""

import hashlib
import hmac
import json
import random
from typing import Any, cast
from urllib.parse import quote, urlencode

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.converters import IntConverter, PathConverter, SlugConverter, StringConverter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dashboard.benchmarks.models import Commit, Suite
from dashboard.converters import RowId
from dashboard.tokens.scopes import TokenScope
from dashboard.tokens.services import token_create
from tests.factories import CommitFactory, SuiteFactory, run_with_values

pytestmark = pytest.mark.django_db

FUZZ = settings(
    max_examples=100,
    deadline=None,
    derandomize=True,  # the same examples on every run: a failure here is reproducible, never flaky
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
QUERY_NAMES = (
    "suite", "hardware", "metric", "stat", "concurrency", "from", "to", "x0", "x1", "base", "head",
    "tracking", "status", "view", "page", "sort", "runner", "scope", "q", "o", "p", "e", "kind", "group",
)  # fmt: skip


def _routes() -> list[tuple[str, dict[str, object]]]:
    found: list[tuple[str, dict[str, object]]] = []

    def walk(patterns: list[Any], prefix: str) -> None:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern):
                found.append((route, dict(pattern.pattern.converters)))

    walk(get_resolver().url_patterns, "/")
    return found


ROUTES = _routes()
NASTY_TEXT = st.sampled_from(
    ["\x00", "%00", "'", '"', "<script>", "../", "javascript:", "9" * 30, "-1", "é✓", ""]
)
TEXT = st.one_of(NASTY_TEXT, st.text(max_size=40))
NUMBER = st.one_of(st.integers(0, 12), st.integers(0, 2**70), st.just(2**63))


def _value(converter: object) -> st.SearchStrategy[str]:
    if isinstance(converter, IntConverter | RowId):
        return NUMBER.map(str)
    if isinstance(converter, SlugConverter):
        return st.one_of(
            st.sampled_from(["kimi-k3-8k1k", "b300", "ttft_ms_mean"]),
            st.from_regex(r"\A[-a-zA-Z0-9_]{1,80}\Z"),
        )
    if isinstance(converter, StringConverter | PathConverter):
        return st.one_of(st.just("vllm-project"), TEXT.filter(bool)).map(lambda text: quote(text, safe=""))
    raise AssertionError(f"no strategy for {converter!r}")


@st.composite
def urls(draw: st.DrawFn) -> str:
    route, converters = draw(st.sampled_from(ROUTES))
    path = route
    for converter in converters.values():
        start = path.index("<")
        path = path[:start] + draw(_value(converter)) + path[path.index(">", start) + 1 :]
    query = draw(
        st.lists(st.tuples(st.sampled_from(QUERY_NAMES), st.one_of(TEXT, NUMBER.map(str))), max_size=4)
    )
    return path + ("?" + urlencode(query) if query else "")


@pytest.fixture
def world(db, settings):
    """A little of everything: a suite with history, a staff user, tokens, and the clients that use them."""
    settings.GITHUB_WEBHOOK_SECRET = "fuzz-secret"
    suite = cast(Suite, SuiteFactory())
    for index in range(4):
        commit = cast(Commit, CommitFactory())
        run_with_values(
            commit=commit,
            suite=suite,
            values={(level, "output_throughput_tok_s"): 100.0 + index for level in (1, 4, 16)},
        )
    anonymous = Client(raise_request_exception=False)
    staff = Client(raise_request_exception=False)
    staff.force_login(User.objects.create_superuser("fuzz", "fuzz@example.com", "fuzz-password-123"))
    ingest = token_create(name="fuzz-ingest", scope=TokenScope.parse("ingest:*")).secret
    runner = token_create(name="fuzz-runner", scope=TokenScope.parse("runner:b300/b300-node-1")).secret
    return {"anonymous": anonymous, "staff": staff, "ingest": ingest, "runner": runner}


def _no_5xx(response, what: str) -> None:
    assert response.status_code < 500, f"{response.status_code} for {what}"


@FUZZ
@given(url=urls(), as_staff=st.booleans())
def test_no_page_or_api_read_answers_5xx(world, url, as_staff) -> None:
    client = world["staff" if as_staff else "anonymous"]
    _no_5xx(client.get(url), f"GET {url} as {'staff' if as_staff else 'anonymous'}")


JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False), TEXT),
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(TEXT, children, max_size=4)),
    max_leaves=12,
)
FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "commit": st.one_of(st.just("82a85dc1" + "0" * 32), JSON),
        "suite": st.one_of(st.just("kimi-k3-8k1k"), JSON),
        "hardware": st.one_of(st.just("b300"), JSON),
        "runner": st.one_of(st.just("b300-node-1"), JSON),
        "report": JSON,
    },
)


def _mutated_report(raw: bytes, seed: int, value: object) -> dict:
    """The real report with one value somewhere in its numbers or labels replaced."""
    document = json.loads(raw)
    rng = random.Random(seed)
    level = rng.choice(document["benchmarks"])
    node = level["metrics"][
        rng.choice(["output_tokens_per_second", "time_to_first_token_ms", "request_totals"])
    ]
    while isinstance(node, dict):
        key = rng.choice(list(node))
        if not isinstance(node[key], dict) or rng.random() < 0.3:
            node[key] = value
            break
        node = node[key]
    return document


@FUZZ
@given(
    endpoint=st.sampled_from(
        [route for route, _ in ROUTES if route.startswith("/api/runner/") or route == "/api/runs/"]
    ),
    run_id=st.integers(0, 12),
    body=st.one_of(FIELDS, JSON),
    mutate=st.one_of(st.none(), st.tuples(st.integers(0, 2**32), JSON)),
    token=st.sampled_from(["ingest", "runner", "none", "garbage"]),
)
def test_no_machine_write_answers_5xx(
    world, seed_scaled_report, endpoint, run_id, body, mutate, token
) -> None:
    if mutate is not None and isinstance(body, dict):
        body = {**body, "report": _mutated_report(seed_scaled_report, *mutate)}
    headers = {"Authorization": f"Bearer {world.get(token, 'pwt_' + 'x' * 43)}"} if token != "none" else {}
    url = endpoint.replace("<id:run_id>", str(run_id))
    response = world["anonymous"].post(
        url, json.dumps(body), content_type="application/json", headers=headers
    )
    _no_5xx(response, f"POST {url} {json.dumps(body)[:300]}")


@settings(FUZZ, max_examples=60)
@given(
    event=st.sampled_from(["push", "pull_request", "issues", "ping", "create", "other"]),
    payload=st.one_of(JSON, st.fixed_dictionaries({}, optional={
        "action": st.one_of(st.sampled_from(["closed", "edited", "opened"]), JSON),
        "pull_request": JSON, "issue": JSON, "repository": JSON, "ref": JSON, "commits": JSON,
    })),
    delivery=st.one_of(st.uuids().map(str), TEXT),
)  # fmt: skip
def test_no_signed_webhook_answers_5xx(world, event, payload, delivery) -> None:
    body = json.dumps(payload).encode()
    signature = "sha256=" + hmac.new(b"fuzz-secret", body, hashlib.sha256).hexdigest()
    response = world["anonymous"].post(
        "/github/webhook/",
        body,
        content_type="application/json",
        headers={"X-GitHub-Event": event, "X-GitHub-Delivery": delivery, "X-Hub-Signature-256": signature},
    )
    _no_5xx(response, f"webhook {event} {body[:300]!r}")


@settings(FUZZ, max_examples=40)
@given(
    url=st.sampled_from(
        [route for route, _ in ROUTES if route.endswith(("/triage/", "/resend/", "/retry/", "/cancel/"))]
    ),
    ids=st.lists(NUMBER, min_size=2, max_size=2),
    form=st.dictionaries(st.sampled_from(["status", "label", "note", "reason", "next"]), TEXT, max_size=3),
)
def test_no_staff_form_post_answers_5xx(world, url, ids, form) -> None:
    for value in ids[: url.count("<")]:
        start = url.index("<")
        url = url[:start] + str(value) + url[url.index(">", start) + 1 :]
    _no_5xx(world["staff"].post(url, form), f"POST {url} {form}")

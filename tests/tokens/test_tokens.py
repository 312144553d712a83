"""API tokens: issued once, stored hashed, scoped, revocable, and required on every machine-facing write."""

import json
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client

from dashboard.benchmarks.models import Commit, Measurement, Run, Runner, Series, Suite
from dashboard.tokens.models import ApiToken
from dashboard.tokens.scopes import ScopeInvalid, TokenForbidden, TokenKind, TokenScope
from dashboard.tokens.services import token_create, token_revoke
from tests.factories import SuiteFactory

pytestmark = pytest.mark.django_db

SHA = "82a85dc1" + "0" * 32


def _stored() -> dict[str, int]:
    models = (Commit, Suite, Runner, Run, Series, Measurement)
    return {model.__name__: model.objects.count() for model in models}


def _post(client: Client, report: bytes, headers: dict[str, str] | None = None, **fields: str):
    body = {"report": json.loads(report), "commit": SHA, "suite": "tiny-llama-cpu", "hardware": "cpu"}
    body.update(fields)
    return client.post("/api/runs/", json.dumps(body), content_type="application/json", headers=headers or {})


def test_create_api_token_prints_the_token_alone_on_its_last_line_and_stores_only_its_hash() -> None:
    out = StringIO()
    call_command("create_api_token", "ci-nightly", scope="ingest:kimi-k3-8k1k,tiny-llama-cpu", stdout=out)

    secret = out.getvalue().rstrip("\n").splitlines()[-1]
    assert secret.startswith("pwt_") and " " not in secret and len(secret) > 40
    token = ApiToken.objects.get()
    assert (token.name, str(token.scope)) == ("ci-nightly", "ingest:kimi-k3-8k1k,tiny-llama-cpu")
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM tokens_apitoken")
        row = " ".join(map(str, cursor.fetchone()))
    assert secret not in row and secret[12:] not in row  # the raw token is nowhere, only its digest


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["x", "--scope", "admin"], "unknown scope"),
        (["x", "--scope", "runner:b300"], "runner:HARDWARE_CLASS/RUNNER_NAME"),
        (["x", "--scope", "ingest:Bad Suite"], "invalid suite name"),
        (["bad name"], "invalid token name"),
    ],
)
def test_create_api_token_refuses_a_bad_scope_or_name(argv, reason) -> None:
    with pytest.raises(CommandError, match=reason):
        call_command("create_api_token", *argv, stdout=StringIO())
    assert not ApiToken.objects.exists()


def test_a_token_name_is_unique() -> None:
    call_command("create_api_token", "ci", stdout=StringIO())
    with pytest.raises(CommandError, match="exists already"):
        call_command("create_api_token", "ci", stdout=StringIO())


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer"},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "Bearer pwt_" + "A" * 43},
        {"Authorization": "Bearer not-a-token"},
    ],
    ids=["anonymous", "empty-bearer", "basic", "unknown", "malformed"],
)
def test_anonymous_or_unknown_token_writes_get_401_with_a_json_reason_and_store_nothing(
    client: Client, vllm_cpu_report, headers
) -> None:
    response = _post(client, vllm_cpu_report, headers)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert response.json()["error"]
    assert _stored() == dict.fromkeys(_stored(), 0)


def test_a_revoked_token_gets_401(client: Client, vllm_cpu_report) -> None:
    issued = token_create(name="old-ci", scope=TokenScope.parse("ingest:*"))
    assert token_revoke(token_id=issued.token.pk)
    response = _post(client, vllm_cpu_report, {"Authorization": f"Bearer {issued.secret}"})
    assert response.status_code == 401
    assert response.json() == {"error": "token 'old-ci' was revoked"}
    assert Run.objects.count() == 0


@pytest.mark.parametrize(
    ("scope", "fields", "reason"),
    [
        ("ingest:kimi-k3-8k1k", {}, "may not store reports of suite 'tiny-llama-cpu'"),
        ("ingest:*", {"runner": "b300-node-1"}, "may not name 'b300-node-1'"),
        ("runner:b300/b300-node-1", {}, "serves hardware class 'b300', not 'cpu'"),
        ("runner:cpu/ci-cpu-1", {"runner": "ci-cpu-2"}, "belongs to runner 'ci-cpu-1', not 'ci-cpu-2'"),
    ],
    ids=["other-suite", "ingest-names-a-runner", "other-hardware", "other-runner"],
)
def test_a_token_outside_its_scope_gets_403_and_stores_nothing(
    client: Client, vllm_cpu_report, bearer, scope, fields, reason
) -> None:
    response = _post(client, vllm_cpu_report, bearer(scope), **fields)
    assert response.status_code == 403
    assert reason in response.json()["error"]
    assert _stored() == dict.fromkeys(_stored(), 0)


def test_a_good_ingest_token_gets_201_and_its_last_use_is_recorded(client: Client, vllm_cpu_report) -> None:
    SuiteFactory(name="tiny-llama-cpu", hardware_class="cpu", concurrencies=[])
    issued = token_create(name="ci", scope=TokenScope.parse("ingest:tiny-llama-cpu"))
    assert issued.token.last_used_at is None

    response = _post(client, vllm_cpu_report, {"Authorization": f"Bearer {issued.secret}"})

    assert response.status_code == 201, response.content
    run = Run.objects.get()
    assert run.runner is None
    issued.token.refresh_from_db()
    assert issued.token.last_used_at is not None


def test_a_runner_token_reports_as_its_own_runner(client: Client, vllm_cpu_report, bearer) -> None:
    SuiteFactory(name="tiny-llama-cpu", hardware_class="cpu", concurrencies=[])
    response = _post(client, vllm_cpu_report, bearer("runner:cpu/ci-cpu-1"))
    assert response.status_code == 201, response.content
    assert Run.objects.get().runner == Runner.objects.get(name="ci-cpu-1")


def test_a_session_does_not_replace_a_token(client: Client, vllm_cpu_report) -> None:
    client.force_login(User.objects.create_superuser("admin", "a@example.com", "pw"))
    assert _post(client, vllm_cpu_report).status_code == 401


def test_scope_checks_for_runner_endpoints() -> None:
    scope = TokenScope.parse("runner:B300/b300-node-1")
    assert (scope.kind, scope.hardware_class, scope.runner_name) == (TokenKind.RUNNER, "b300", "b300-node-1")
    scope.require_runner(runner_name="b300-node-1", hardware_class="b300")
    with pytest.raises(TokenForbidden):
        scope.require_runner(runner_name="b300-node-2")
    with pytest.raises(TokenForbidden):
        scope.require_runner(runner_name="b300-node-1", hardware_class="h200")
    with pytest.raises(TokenForbidden, match="belongs to no runner"):
        TokenScope.parse("ingest:*").require_runner(runner_name="b300-node-1")
    with pytest.raises(ScopeInvalid):
        TokenScope.parse("runner:b300/")


def test_an_ingest_token_cannot_call_a_runner_only_endpoint(rf) -> None:
    from django.http import HttpResponse

    from dashboard.tokens.auth import token_required

    @token_required(TokenKind.RUNNER)
    def heartbeat(request, *, token):
        return HttpResponse(token.runner_name)

    ingest = token_create(name="ci", scope=TokenScope.parse("ingest:*")).secret
    runner = token_create(name="node", scope=TokenScope.parse("runner:b300/node-1")).secret
    assert heartbeat(rf.post("/", headers={"Authorization": f"Bearer {ingest}"})).status_code == 403
    assert heartbeat(rf.post("/", headers={"Authorization": f"Bearer {runner}"})).content == b"node-1"


def test_admin_issues_a_token_once_lists_it_and_revokes_it(admin_client: Client) -> None:
    response = admin_client.post(
        "/admin/tokens/apitoken/add/",
        {"name": "b300-node-1", "scope": "runner:b300/b300-node-1"},
        follow=True,
    )
    assert response.status_code == 200
    token = ApiToken.objects.get()
    shown = [str(message) for message in response.context["messages"]]
    secret = next(word for message in shown for word in message.split() if word.startswith("pwt_"))
    assert token.key_sha256 != secret and token.prefix == secret[:12]
    page = admin_client.get("/admin/tokens/apitoken/").content.decode()
    assert "runner:b300/b300-node-1" in page and secret not in page
    assert secret not in admin_client.get(f"/admin/tokens/apitoken/{token.pk}/change/").content.decode()

    admin_client.post(
        "/admin/tokens/apitoken/", {"action": "revoke", "_selected_action": [token.pk]}, follow=True
    )
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_admin_refuses_a_bad_scope(admin_client: Client) -> None:
    response = admin_client.post("/admin/tokens/apitoken/add/", {"name": "x", "scope": "runner:b300"})
    assert response.status_code == 200
    assert "runner:HARDWARE_CLASS/RUNNER_NAME" in response.content.decode()
    assert not ApiToken.objects.exists()

"""Production posture: start-up refusals, check --deploy, CSP, secure cookies, login throttling."""

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client, RequestFactory, override_settings

from dashboard.middleware import client_ip

ROOT = Path(__file__).resolve().parents[2]


def _production_env(**overrides: str) -> dict[str, str]:
    """The production example as an operator fills it in: every change-me replaced by a real secret."""
    values = dict(re.findall(r"^([A-Z_]+)=(.*)$", (ROOT / ".env.production.example").read_text(), re.M))
    for key, value in values.items():
        secret = secrets.token_urlsafe(50) if key == "SECRET_KEY" else secrets.token_hex(32)
        values[key] = value.replace("change-me", secret)
    values.update(overrides)
    # Nothing from the test environment leaks in: only the example, a path and a place for the database.
    return {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), **values}


def _manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_check_deploy_with_the_production_example_reports_no_error_and_no_warning() -> None:
    # Production runs on PostgreSQL (compose sets DATABASE_URL per service): check against the real one.
    result = _manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        env=_production_env(DATABASE_URL=os.environ["DATABASE_URL"]),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


@pytest.mark.parametrize("key", ["", "change-me"])
def test_without_a_real_secret_key_the_app_refuses_to_start(key) -> None:
    env = _production_env(SECRET_KEY=key)
    check = _manage("check", "--deploy", env=env)
    assert check.returncode != 0
    assert "perfwatch.E001" in check.stderr
    wsgi = subprocess.run(
        [sys.executable, "-c", "import dashboard.wsgi"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert wsgi.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY is" in wsgi.stderr


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("", "not set"),
        ("change-me-to-a-long-random-string-change-me-to-a-long-random-string", "placeholder"),
        ("django-insecure-" + secrets.token_urlsafe(50), "placeholder"),
        (secrets.token_urlsafe(20), "too short"),
        ("ab" * 40, "too simple"),
        (secrets.token_urlsafe(50), None),
    ],
    # Named without the random keys: parallel test processes (pytest -n) must collect the same tests.
    ids=["empty", "placeholder", "django-insecure", "short", "simple", "random"],
)
def test_what_counts_as_a_real_secret_key(key, problem) -> None:
    from dashboard.checks import secret_key_problem

    found = secret_key_problem(key)
    assert (found is None) if problem is None else (problem in (found or ""))


def test_with_debug_on_no_key_is_needed() -> None:
    env = _production_env(SECRET_KEY="", DEBUG="true")
    result = _manage("check", "--deploy", env=env)
    assert "perfwatch.E001" not in result.stdout + result.stderr


def test_production_settings_send_secure_cookies_hsts_and_redirect_to_https() -> None:
    script = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.CSRF_COOKIE_HTTPONLY, s.SECURE_SSL_REDIRECT, "
        "s.SECURE_HSTS_SECONDS, s.SECURE_PROXY_SSL_HEADER)"
    )
    env = {**_production_env(), "DJANGO_SETTINGS_MODULE": "dashboard.settings"}
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.stdout.split("\n")[0] == "True True True True 31536000 ('HTTP_X_FORWARDED_PROTO', 'https')"


@pytest.mark.django_db
def test_every_page_carries_a_content_security_policy_without_inline_script(client: Client) -> None:
    policy = client.get("/")["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";") if part.strip())
    assert directives["script-src"] == "'self'"
    assert directives["object-src"] == "'none'" and directives["frame-ancestors"] == "'none'"
    assert "unsafe-eval" not in policy
    assert "Content-Security-Policy" in client.get("/admin/login/")


def test_templates_and_static_js_hold_no_inline_script_or_handler() -> None:
    sources = [*(ROOT / "templates").rglob("*.html"), *(ROOT / "dashboard").rglob("*.html")]
    assert sources
    for path in sources:
        text = path.read_text()
        for tag in re.findall(r"<script\b[^>]*>", text):
            assert "src=" in tag, f"{path}: inline script {tag}"
        assert not re.search(r"\son[a-z]+\s*=", text), f"{path}: inline event handler"
        assert "javascript:" not in text.lower(), path
    for path in (ROOT / "dashboard").rglob("*.js"):
        text = path.read_text()
        assert not re.search(r"\beval\(|new Function\(|setAttribute\(\s*['\"]on", text), path


@pytest.mark.django_db
@override_settings(AXES_FAILURE_LIMIT=3)
def test_admin_login_is_throttled_after_repeated_failures(client: Client) -> None:
    User.objects.create_superuser("admin", "admin@example.com", "right-password-123")
    for _ in range(3):
        response = client.post("/admin/login/", {"username": "admin", "password": "wrong"})
        assert response.status_code in (200, 429)
    locked = client.post("/admin/login/", {"username": "admin", "password": "right-password-123"})
    assert locked.status_code == 429
    assert "_auth_user_id" not in client.session
    # The account guessed at is locked from every address; another account from another address is not.
    other = Client(REMOTE_ADDR="10.0.0.9")
    assert (
        other.post("/admin/login/", {"username": "admin", "password": "right-password-123"}).status_code
        == 429
    )
    User.objects.create_superuser("oncall", "oncall@example.com", "other-password-456")
    assert (
        other.post("/admin/login/", {"username": "oncall", "password": "other-password-456"}).status_code
        == 302
    )


@pytest.mark.django_db
@override_settings(AXES_FAILURE_LIMIT=3)
def test_one_account_guessed_from_many_addresses_is_locked_out(client: Client) -> None:
    User.objects.create_superuser("admin", "admin@example.com", "right-password-123")
    for address in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
        Client(REMOTE_ADDR=address).post("/admin/login/", {"username": "admin", "password": "wrong"})

    fresh = Client(REMOTE_ADDR="10.0.0.4")
    assert (
        fresh.post("/admin/login/", {"username": "admin", "password": "right-password-123"}).status_code
        == 429
    )
    assert "_auth_user_id" not in fresh.session


@pytest.mark.parametrize("channel", ["EMAIL_URL", "PERFWATCH_SLACK_WEBHOOK_URL", "GITHUB_TOKEN"])
def test_an_empty_channel_variable_turns_it_off_and_check_deploy_stays_clean(channel) -> None:
    env = _production_env(
        DATABASE_URL=os.environ["DATABASE_URL"], **{channel: ""}, PERFWATCH_ALERT_EMAILS="perf@example.com"
    )
    result = _manage("check", "--deploy", "--fail-level", "WARNING", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout
    if channel == "EMAIL_URL":
        script = (
            "import django; django.setup(); from django.conf import settings as s; "
            "print(s.PERFWATCH_ALERT_EMAILS, s.MAILERS['default']['BACKEND'])"
        )
        shown = subprocess.run(
            [sys.executable, "-c", script],
            cwd=ROOT,
            env={**env, "DJANGO_SETTINGS_MODULE": "dashboard.settings"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert shown.stdout.strip() == "[] dashboard.mail.EmailOffBackend", shown.stderr


def test_the_client_address_comes_from_the_proxy_only_behind_one(settings) -> None:
    request = RequestFactory().get("/", REMOTE_ADDR="172.18.0.5", HTTP_X_FORWARDED_FOR="6.6.6.6, 203.0.113.7")
    settings.PERFWATCH_BEHIND_PROXY = False
    assert client_ip(request) == "172.18.0.5"
    settings.PERFWATCH_BEHIND_PROXY = True
    assert client_ip(request) == "203.0.113.7"

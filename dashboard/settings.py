"""The one settings module: every value comes from the environment (see .env.example)."""

import socket
from datetime import timedelta
from pathlib import Path

import environ
from csp.constants import NONE, SELF, UNSAFE_INLINE
from django.core.management.utils import get_random_secret_key

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DEBUG = env.bool("DEBUG", default=False)
# No default key: with DEBUG off the web app refuses to start without a real one (dashboard/checks.py).
# Runner nodes and workers never sign anything and need none.
SECRET_KEY = env.str("SECRET_KEY", default="") or (get_random_secret_key() if DEBUG else "")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

# Served over TLS (the reverse proxy in production): secure cookies, HSTS and a redirect to https.
PERFWATCH_HTTPS = env.bool("PERFWATCH_HTTPS", default=not DEBUG)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = SECURE_SSL_REDIRECT = PERFWATCH_HTTPS
SECURE_HSTS_SECONDS = 365 * 24 * 3600 if PERFWATCH_HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_HSTS_PRELOAD = PERFWATCH_HTTPS
CSRF_COOKIE_HTTPONLY = True  # no script reads it; forms carry the token
# Behind the proxy, its X-Forwarded-Proto says whether the browser used https and its X-Forwarded-For
# who the browser is (for login throttling). Trusted only when told: elsewhere anyone could send them.
PERFWATCH_BEHIND_PROXY = env.bool("PERFWATCH_BEHIND_PROXY", default=False)
if PERFWATCH_BEHIND_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# No inline script anywhere: every script is a static file. Inline style attributes remain (Plotly
# draws with them), which cannot run code.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, UNSAFE_INLINE],
        "img-src": [SELF, "data:", "blob:"],
        "connect-src": [SELF],
        "font-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

# Admin login throttling: an address that fails five times in a row waits 15 minutes (429).
AXES_FAILURE_LIMIT = 5
AXES_COOLOFF_TIME = timedelta(minutes=15)
AXES_RESET_ON_SUCCESS = True
# Failures count per username and per address, each on its own: one address guessing many accounts is
# locked out, and so is one account guessed from many addresses.
AXES_LOCKOUT_PARAMETERS = ["ip_address", "username"]
AXES_CLIENT_IP_CALLABLE = "dashboard.middleware.client_ip"
AXES_VERBOSE = False  # no banner on every command's stderr; lockouts are still logged
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "dashboard.benchmarks",
    "dashboard.regressions",
    "dashboard.github",
    "dashboard.web",
    "dashboard.tokens",
    # Tooling and the demo: their commands only; the product never imports them.
    "dashboard.demo",
    "lab",
    "csp",
    "axes",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "dashboard.middleware.nul_bytes_refused",
    "dashboard.middleware.DatabaseUnavailable",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, as django-axes asks.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "dashboard.urls"
WSGI_APPLICATION = "dashboard.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "dashboard.web.context_processors.site",
            ],
        },
    },
]

# A runner node never opens the database nor serves a page, and writes nothing inside its checkout (which
# is often root's, while the node runs as an unprivileged user).
_RUNNER_NODE = bool(env.str("PERFWATCH_RUNNER_HARDWARE_CLASS", default=""))
# Its Django checks at worker start still open one: an in-memory database, so no file appears anywhere.
_DATABASE_DEFAULT = (
    "sqlite://:memory:" if _RUNNER_NODE else f"sqlite:///{BASE_DIR / 'var' / 'perfwatch.sqlite3'}"
)
DATABASES = {"default": env.db("DATABASE_URL", default=_DATABASE_DEFAULT)}
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=0)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded demo runs the web server and a loader against one file: wait rather than fail.
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20
    if DATABASES["default"]["NAME"] != ":memory:":
        Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # PostgreSQL compiles a plan to machine code once its estimated cost is high, as the pages' reads of a
    # year of history are: 0.2-0.4 s of compiling for queries that run in less.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("options", "-c jit=off")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "var" / "staticfiles"
if not _RUNNER_NODE:
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns on every start when it is missing
# `collectstatic` names every file after its content and writes gzip and brotli copies beside it: WhiteNoise
# serves the hashed names with a far-future immutable Cache-Control, and the compressed copy the browser
# accepts. Every place that serves pages collects first (Dockerfile, `make demo`, `make bench`, tests).
# Raw reports (gzip) live in the default storage, not in the database: files under MEDIA_ROOT, or with
# PERFWATCH_REPORTS_BUCKET any S3-compatible store (AWS, MinIO, R2...) through django-storages. Never
# published under a URL of their own: the run page's link serves them through the app.
MEDIA_ROOT = BASE_DIR / env.str("MEDIA_ROOT", default="var/media")  # relative: to the checkout
PERFWATCH_REPORTS_BUCKET = env.str("PERFWATCH_REPORTS_BUCKET", default="")
_report_storage = (
    {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": PERFWATCH_REPORTS_BUCKET,
            "location": env.str("PERFWATCH_REPORTS_PREFIX", default=""),
            # Empty: AWS itself; otherwise the other store's URL.
            "endpoint_url": env.str("PERFWATCH_REPORTS_ENDPOINT_URL", default="") or None,
            "region_name": env.str("PERFWATCH_REPORTS_REGION", default="") or None,
            # Empty: boto3's own chain (instance role, ~/.aws, AWS_* variables).
            "access_key": env.str("PERFWATCH_REPORTS_ACCESS_KEY_ID", default="") or None,
            "secret_key": env.str("PERFWATCH_REPORTS_SECRET_ACCESS_KEY", default="") or None,
        },
    }
    if PERFWATCH_REPORTS_BUCKET
    else {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"allow_overwrite": True}}
)
STORAGES = {
    "default": _report_storage,
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

LOGIN_URL = "/accounts/login/"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
}

# Product settings
PERFWATCH_DEMO = env.bool("PERFWATCH_DEMO", default=False)
if PERFWATCH_DEMO and DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The covering index's INCLUDE columns are a PostgreSQL speed-up; the demo's SQLite indexes the keys.
    SILENCED_SYSTEM_CHECKS = ["models.W040"]
PERFWATCH_GITHUB_REPOSITORY = env.str("PERFWATCH_GITHUB_REPOSITORY", default="vllm-project/vllm")
PERFWATCH_MAX_REPORT_BYTES = env.int("PERFWATCH_MAX_REPORT_BYTES", default=64 * 1024 * 1024)

# One cache for every web worker and process (Redis in production and compose), so that a view is
# computed once rather than once per worker; cached views key their entries by a digest of the data they
# read, so a write makes them stale at once. Without PERFWATCH_CACHE_URL (the demo, a test run) each
# process keeps its own in memory.
PERFWATCH_CACHE_URL = env.str("PERFWATCH_CACHE_URL", default="")
CACHES = {
    "default": (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": PERFWATCH_CACHE_URL,
            "KEY_PREFIX": env.str("PERFWATCH_CACHE_PREFIX", default="perfwatch"),
            "TIMEOUT": 600,
            # A cache that does not answer within a second is not worth waiting for.
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
        if PERFWATCH_CACHE_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "perfwatch"}
    )
}

# Celery: the broker only carries "please look at run N"; the database is the truth.
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="redis://127.0.0.1:6379/0")
CELERY_RESULT_BACKEND = env.str("CELERY_RESULT_BACKEND", default="") or None
CELERY_BROKER_CONNECTION_TIMEOUT = 5
CELERY_TASK_SOFT_TIME_LIMIT = env.int("CELERY_TASK_SOFT_TIME_LIMIT", default=300)
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT", default=360)
# A message taken by a worker that vanished (kill -9, lost host) is handed out again after this long;
# it must exceed the longest late-acknowledged task and retry countdown (5 min).
CELERY_VISIBILITY_TIMEOUT_S = env.int("CELERY_VISIBILITY_TIMEOUT_S", default=600)

# Signed task messages: with a key, every message this process sends is signed with it, and a worker
# runs only messages signed by a certificate of PERFWATCH_SIGNING_TRUSTED (a glob of PEM files). The
# control side (web, beat, control worker) signs with the control key and trusts only its certificate;
# a runner node has a key of its own and trusts the control certificate: a runner's broker password
# then cannot make the control worker run anything, since nothing it signs is trusted there.
PERFWATCH_SIGNING_KEY = env.str("PERFWATCH_SIGNING_KEY", default="")
PERFWATCH_SIGNING_CERT = env.str("PERFWATCH_SIGNING_CERT", default="")
PERFWATCH_SIGNING_TRUSTED = env.str("PERFWATCH_SIGNING_TRUSTED", default="")
if PERFWATCH_SIGNING_KEY:
    CELERY_TASK_SERIALIZER = "auth"
    CELERY_ACCEPT_CONTENT = ["auth"]
    CELERY_SECURITY_KEY = PERFWATCH_SIGNING_KEY
    CELERY_SECURITY_CERTIFICATE = PERFWATCH_SIGNING_CERT
    CELERY_SECURITY_CERT_STORE = PERFWATCH_SIGNING_TRUSTED
    CELERY_SECURITY_DIGEST = "sha256"

# Runner workers: who this node is, and how long a run stays held without a heartbeat.
# A runner node is named after its host unless told otherwise.
PERFWATCH_RUNNER_NAME = (
    env.str("PERFWATCH_RUNNER_NAME", default="") or socket.gethostname().split(".")[0].lower()
)
PERFWATCH_RUNNER_HARDWARE_CLASS = env.str("PERFWATCH_RUNNER_HARDWARE_CLASS", default="")
# A runner node reaches the dashboard's API with its runner token, never the database.
PERFWATCH_API_URL = env.str("PERFWATCH_API_URL", default="http://127.0.0.1:8000")
PERFWATCH_RUNNER_TOKEN = env.str("PERFWATCH_RUNNER_TOKEN", default="")
# Everything a runner node is told, and nothing more (no database): deploy/runner.env.example, the systemd
# unit, compose's runner service and the README use exactly these. The runners package itself reads
# PERFWATCH_ENV_PYTHON, PERFWATCH_CACHE_DIR and the installers' settings (runners/node_setup.py).
RUNNER_NODE_VARIABLES = (
    "CELERY_BROKER_URL",
    "PERFWATCH_SIGNING_KEY",
    "PERFWATCH_SIGNING_CERT",
    "PERFWATCH_SIGNING_TRUSTED",
    "PERFWATCH_API_URL",
    "PERFWATCH_RUNNER_TOKEN",
    "PERFWATCH_RUNNER_NAME",
    "PERFWATCH_RUNNER_HARDWARE_CLASS",
    "PERFWATCH_ENV_PYTHON",
    "PERFWATCH_CACHE_DIR",
    "PERFWATCH_WORK_DIR",
    "PERFWATCH_WHEEL_INDEX_URL",
    "PERFWATCH_INDEX_URL",
    "PERFWATCH_EXTRA_INDEX_URL",
    "PERFWATCH_FIND_LINKS",
    "PERFWATCH_CA_BUNDLE",
    "PERFWATCH_NATIVE_TLS",
    "PERFWATCH_SERVE_PORTS",
)
PERFWATCH_RUN_LEASE_S = env.int("PERFWATCH_RUN_LEASE_S", default=180)
PERFWATCH_HEARTBEAT_S = env.int("PERFWATCH_HEARTBEAT_S", default=30)
# A run whose node said it holds the finished report (stage `storing`) is waited for this long past its
# lease before it is queued again: the node keeps the report and re-sends it when the dashboard answers.
PERFWATCH_REPORT_HOLD_S = env.int("PERFWATCH_REPORT_HOLD_S", default=24 * 3600)
PERFWATCH_QUEUED_REDISPATCH_S = env.int("PERFWATCH_QUEUED_REDISPATCH_S", default=6 * 3600)
# A wheel_index run whose commit has no wheel yet (suite: missing_wheel: wait) is tried again this much later.
PERFWATCH_WHEEL_WAIT_S = env.int("PERFWATCH_WHEEL_WAIT_S", default=900)
PERFWATCH_WORK_DIR = env.str("PERFWATCH_WORK_DIR", default=str(BASE_DIR / "var" / "runs"))

# GitHub: main's history from a bare mirror (or the REST API), tracking issues, and the webhook.
PERFWATCH_COMMIT_SOURCE = env.str("PERFWATCH_COMMIT_SOURCE", default="mirror")
# Off: beat's periodic sync does nothing (webhooks and `manage.py sync_commits` still work).
PERFWATCH_COMMIT_SYNC = env.bool("PERFWATCH_COMMIT_SYNC", default=True)
PERFWATCH_GIT_REMOTE = env.str("PERFWATCH_GIT_REMOTE", default="https://github.com/vllm-project/vllm.git")
PERFWATCH_GIT_MIRROR_DIR = env.str(
    "PERFWATCH_GIT_MIRROR_DIR", default=str(BASE_DIR / "var" / "mirror" / "vllm.git")
)
PERFWATCH_GIT_FETCH_TIMEOUT_S = env.int("PERFWATCH_GIT_FETCH_TIMEOUT_S", default=600)
PERFWATCH_COMMIT_SYNC_INITIAL_LIMIT = env.int("PERFWATCH_COMMIT_SYNC_INITIAL_LIMIT", default=3000)
PERFWATCH_COMMIT_SYNC_INITIAL_DAYS = env.int("PERFWATCH_COMMIT_SYNC_INITIAL_DAYS", default=14)
GITHUB_TOKEN = env.str("GITHUB_TOKEN", default="")
GITHUB_API_URL = env.str("GITHUB_API_URL", default="https://api.github.com")
PERFWATCH_GITHUB_TIMEOUT_S = env.float("PERFWATCH_GITHUB_TIMEOUT_S", default=10.0)
GITHUB_WEBHOOK_SECRET = env.str("GITHUB_WEBHOOK_SECRET", default="")

# Regressions: the detection window, and where alert notifications go (a channel without settings is off).
PERFWATCH_BASE_URL = env.str("PERFWATCH_BASE_URL", default="http://127.0.0.1:8000")
PERFWATCH_DETECTION_WINDOW = env.int("PERFWATCH_DETECTION_WINDOW", default=200)
# Verification: re-runs of a suspected change's base and head, each this many times (and as many again
# when they cannot tell), within a daily GPU-hour budget per suite for verification and bisection runs.
PERFWATCH_VERIFICATION_REPEATS = env.int("PERFWATCH_VERIFICATION_REPEATS", default=2)
PERFWATCH_SUITE_DAILY_GPU_HOURS = env.float("PERFWATCH_SUITE_DAILY_GPU_HOURS", default=48.0)
# The culprit search of one confirmed change stops after this many runs if no commit holds 95 % by then.
PERFWATCH_SEARCH_MAX_RUNS = env.int("PERFWATCH_SEARCH_MAX_RUNS", default=32)
PERFWATCH_ALERT_EMAILS = env.list("PERFWATCH_ALERT_EMAILS", default=[])
PERFWATCH_SLACK_WEBHOOK_URL = env.str("PERFWATCH_SLACK_WEBHOOK_URL", default="")
PERFWATCH_NOTIFY_TIMEOUT_S = env.int("PERFWATCH_NOTIFY_TIMEOUT_S", default=10)
# A notification still `sending` after this long lost its sender (longer than the task's time limit).
PERFWATCH_NOTIFY_SENDING_STALE_S = env.int("PERFWATCH_NOTIFY_SENDING_STALE_S", default=120)
# The culprit PR is commented on with GITHUB_TOKEN at GITHUB_API_URL (the GitHub block above).
# Django's mailers from one URL, e.g. smtp+tls://user:password@smtp.example.com:587; consolemail:// prints.
# EMAIL_URL= (empty) turns e-mail off, whatever PERFWATCH_ALERT_EMAILS says, as the examples promise.
_email_on = bool(env.str("EMAIL_URL", default="consolemail://").strip())
if not _email_on:
    PERFWATCH_ALERT_EMAILS = []
_email = (
    env.email_url("EMAIL_URL", default="consolemail://")
    if _email_on
    else {**environ.Env.email_url_config("dummymail://"), "EMAIL_BACKEND": "dashboard.mail.EmailOffBackend"}
)
_smtp_options = {
    "host": _email["EMAIL_HOST"],
    "port": _email["EMAIL_PORT"],
    "username": _email["EMAIL_HOST_USER"],
    "password": _email["EMAIL_HOST_PASSWORD"],
    "use_tls": _email.get("EMAIL_USE_TLS"),
    "use_ssl": _email.get("EMAIL_USE_SSL"),
    "timeout": PERFWATCH_NOTIFY_TIMEOUT_S,
}
MAILERS = {
    "default": {
        "BACKEND": _email["EMAIL_BACKEND"],
        "OPTIONS": (
            {name: value for name, value in _smtp_options.items() if value is not None}
            if _email["EMAIL_BACKEND"].endswith("smtp.EmailBackend")
            else {}
        ),
    }
}
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="PerfWatch <perfwatch@localhost>")

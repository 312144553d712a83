"""PostgreSQL restarted under detection, against a cluster and a redis-server this test starts itself and a
real worker: the task waits the outage out, then finds the regression once."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psycopg
import pytest

from dashboard import dispatch
from tests.faults.conftest import PostgresCluster, RedisServer, send_task
from tests.workers.conftest import ROOT, wait_for

pytestmark = pytest.mark.timeout(300)

DATABASE = "perfwatch_faults"
# Longer than the three retries in about 3 s that detection used to give up after.
OUTAGE_S = 12


def _manage(cluster: PostgresCluster, *command: str) -> str:
    env = {
        **os.environ,
        "DATABASE_URL": cluster.url(DATABASE),
        "DJANGO_SETTINGS_MODULE": "dashboard.settings",
    }
    done = subprocess.run(
        [sys.executable, *command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _counts(cluster: PostgresCluster) -> tuple[int, int]:
    """(alert groups, alerts), or (-1, -1) while the database is down."""
    try:
        with psycopg.connect(cluster.url(DATABASE), connect_timeout=2) as connection:
            groups = connection.execute("SELECT count(*) FROM regressions_alertgroup").fetchone()
            alerts = connection.execute("SELECT count(*) FROM regressions_alert").fetchone()
    except psycopg.OperationalError:
        return -1, -1
    assert groups is not None and alerts is not None
    return int(groups[0]), int(alerts[0])


def test_detection_outlasts_a_postgresql_restart_and_alerts_once(
    own_postgres: PostgresCluster, own_redis: RedisServer, start_own_worker
) -> None:
    own_postgres.create_database(DATABASE)
    _manage(own_postgres, "manage.py", "migrate", "--no-input")
    run_id = int(_manage(own_postgres, "-m", "tests.faults.seed_history").split()[-1])
    worker = start_own_worker(
        name="detector",
        env={
            "DATABASE_URL": own_postgres.url(DATABASE),
            "CELERY_BROKER_URL": own_redis.url,
            "PERFWATCH_ALERT_EMAILS": "",
            "PERFWATCH_SLACK_WEBHOOK_URL": "",
            "GITHUB_TOKEN": "",
        },
    )
    assert _counts(own_postgres) == (0, 0)

    own_postgres.stop()  # every connection cut, as a crash or a restart cuts them
    send_task(own_redis.url, dispatch.RUN_DETECT, run_id)
    time.sleep(OUTAGE_S)
    own_postgres.start()

    wait_for(lambda: _counts(own_postgres)[0] > 0, timeout_s=120, what="detection after the restart")
    assert _counts(own_postgres) == (1, 1)
    assert worker.poll() is None
    # Detecting the same run again finds the alert it already raised: nothing is duplicated.
    send_task(own_redis.url, dispatch.RUN_DETECT, run_id)
    send_task(own_redis.url, "perfwatch.notifications_resend")
    time.sleep(5)
    assert _counts(own_postgres) == (1, 1)

"""An idle runner node keeps its heartbeat fresh, so the runners page can tell idle from dead."""

import pytest

from dashboard.benchmarks.models import Runner
from tests.workers.conftest import wait_for, worker_log, worker_ready

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_idle_runner_worker_registers_and_beats(start_worker) -> None:
    start_worker(
        name="cpu-idle",
        queue="runner.cpu",
        extra_env={"PERFWATCH_HEARTBEAT_S": "1"},
    )
    wait_for(lambda: Runner.objects.filter(name="cpu-idle").exists(), timeout_s=60, what="the runner row")
    first = Runner.objects.get(name="cpu-idle").last_heartbeat_at
    wait_for(
        lambda: Runner.objects.get(name="cpu-idle").last_heartbeat_at != first,
        timeout_s=30,
        what="a second beat",
    )
    assert Runner.objects.get(name="cpu-idle").hardware_class == "cpu"


def test_a_control_worker_is_not_a_runner(start_worker, tmp_path) -> None:
    import time

    start_worker(
        name="control", queue="default", extra_env={"PERFWATCH_RUNNER_NAME": "", "PERFWATCH_HEARTBEAT_S": "1"}
    )
    wait_for(
        lambda: worker_ready(worker_log(tmp_path, "control")), timeout_s=60, what="the worker to be ready"
    )
    time.sleep(3)  # three heartbeat intervals: a runner would have registered by now
    assert not Runner.objects.exists()


def test_a_runner_node_that_cannot_build_environments_stops_at_start_up_saying_why(
    start_worker, tmp_path
) -> None:
    worker = start_worker(
        name="cpu-bare", queue="runner.cpu", extra_env={"PERFWATCH_ENV_PYTHON": "python3.99"}
    )

    worker.wait(timeout=60)

    log = worker_log(tmp_path, "cpu-bare").read_text()
    assert worker.returncode != 0
    assert "cannot build environments: no python3.99 on PATH" in log and "python3.99-venv" in log
    assert "ready." not in log
    assert not Runner.objects.exists()

"""A run records what else its node was doing: its load, and who else used its GPUs."""

import os
import subprocess
import sys

from runners.node_load import NodeLoad, foreign_pids, node_load_measure


def test_a_busy_node_and_a_shared_gpu_are_recorded_and_said() -> None:
    load = NodeLoad(load_1m_before=11.0, load_1m_after=12.5, cpus=2, gpu_foreign_pids=(4242,))

    assert load.busy and load.gpu_shared
    assert load.fingerprint() == {
        "node_load_1m_before": 11.0,
        "node_load_1m_after": 12.5,
        "node_cpus": 2,
        "node_busy": True,
        "gpu_shared": True,
        "gpu_foreign_pids": [4242],
    }
    assert load.warnings() == [
        "the node was busy: load 11.0 on 2 CPUs before the benchmark (12.5 after); its numbers may read "
        "slower than the code is",
        "another process used the GPU during the run (pid 4242)",
    ]
    quiet = NodeLoad(load_1m_before=0.4, load_1m_after=1.9, cpus=64, gpu_foreign_pids=None)
    assert not quiet.busy and quiet.gpu_shared is None and quiet.warnings() == []


def test_only_processes_outside_the_servers_group_count_as_someone_elses() -> None:
    # A process of its own session stands for a server's engine process; this test's own is a stranger.
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        assert foreign_pids(pids=[server.pid, os.getpid()], own_group=server.pid) == (os.getpid(),)
        assert foreign_pids(pids=None, own_group=server.pid) is None
        measured = node_load_measure(load_before=0.0, own_group=server.pid, gpu_pids=lambda: (server.pid,))
        assert measured.gpu_shared is False and measured.cpus == os.cpu_count()
    finally:
        server.kill()
        server.wait()


def test_the_run_page_shows_the_nodes_load_and_whether_the_gpu_was_shared(db, client) -> None:
    from typing import cast

    from dashboard.benchmarks.models import Run
    from tests.factories import RunFactory

    load = NodeLoad(load_1m_before=11.0, load_1m_after=12.5, cpus=2, gpu_foreign_pids=(4242,))
    run = cast(Run, RunFactory(environment={**load.fingerprint(), "warnings": load.warnings()}))

    page = client.get(f"/runs/{run.pk}/").content.decode()

    assert "busy: 11 before, 12.5 after the benchmark (1-min load, 2 CPUs)" in page
    assert "yes: another process used it during the run" in page
    assert "the node was busy: load 11.0 on 2 CPUs before the benchmark" in page

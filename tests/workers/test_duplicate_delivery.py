"""A benchmark message delivered twice never starts a second benchmark: the run is claimed once."""

from typing import cast

import pytest

from dashboard.benchmarks.models import Commit, Run, Runner, RunStatus, Suite
from dashboard.benchmarks.runs import run_claim
from tests.factories import CommitFactory, RunnerFactory, SuiteFactory
from tests.workers.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_redelivered_message_for_a_claimed_run_changes_nothing(start_worker, tmp_path) -> None:
    from workers.tasks import run_execute

    suite = cast(Suite, SuiteFactory(name="tiny-llama-cpu", hardware_class="cpu"))
    run = Run.objects.create(commit=cast(Commit, CommitFactory()), suite=suite, hardware_class="cpu")
    holder = cast(Runner, RunnerFactory(name="cpu-holder", hardware_class="cpu"))
    claimed = run_claim(run_id=run.pk, runner=holder)
    assert claimed is not None
    before = Run.objects.values().get(pk=run.pk)

    start_worker(name="cpu-second", queue="runner.cpu")
    for _ in range(2):  # the broker hands the same request over twice
        run_execute.apply_async(args=(run.pk,), queue="runner.cpu")
    log = tmp_path / "worker-cpu-second.log"
    wait_for(lambda: log.read_text().count("succeeded in") == 2, timeout_s=90, what="both deliveries")

    assert Run.objects.values().get(pk=run.pk) == before
    assert Run.objects.get(pk=run.pk).status == RunStatus.INSTALLING
    assert not (tmp_path / "runs").exists()  # no work directory: nothing was installed or started

"""A run measured on a busy node or a shared GPU is flagged on its suite's timeline, at its commit, and
the flag opens the run."""

import pytest

from dashboard.benchmarks.models import Run

pytestmark = pytest.mark.django_db


def test_a_run_on_a_busy_node_is_flagged_on_the_timeline(client, build_history) -> None:
    commits = build_history(commits=6)
    run = Run.objects.get(commit=commits[3])
    run.environment = {**run.environment, "node_busy": True, "node_load_1m_before": 11.0, "gpu_shared": True}
    run.save(update_fields=["environment"])
    suite = run.suite

    payload = client.get(f"/api/suites/{suite.name}/timeline/?hardware={run.hardware_class}").json()

    for figure in payload["figures"].values():
        (flags,) = [trace for trace in figure["data"] if trace.get("name") == "disturbed runs"]
        assert flags["customdata"] == [
            [f"/runs/{run.pk}/", "busy node (load 11), GPU shared with another process"]
        ]
        assert len(flags["x"]) == 1
    quiet = Run.objects.get(commit=commits[2])
    assert f"/runs/{quiet.pk}/" not in str(payload)

"""Rows stored before the edges were typed may hold NaN, infinities or impossible scores: every page that
shows them still answers, marking them invalid, and the data migration repairs them."""

import importlib
import math

import pytest
from django.apps import apps as django_apps
from django.test import Client

from dashboard.benchmarks.capacity import accuracy_store
from dashboard.benchmarks.models import AccuracyScore, Measurement
from runners.accuracy import AccuracyResult

pytestmark = pytest.mark.django_db

SHA = "82a85dc1" + "a" * 32


def _store_bad_rows(run) -> None:
    """What the runner API stored before its bodies were typed: NaN and a 500 % score."""
    accuracy_store(
        run=run, accuracy=AccuracyResult("gsm8k", correct=90, samples=100, ci_low_pct=84, ci_high_pct=95)
    )
    AccuracyScore.objects.filter(run=run).update(correct=math.nan, score_pct=math.nan, ci_low_pct=-50)
    AccuracyScore.objects.create(
        run=run,
        name="mmlu",
        correct=500,
        samples=100,
        score_pct=500.0,
        ci_low_pct=-50.0,
        ci_high_pct=math.inf,
    )
    Measurement.objects.filter(run=run, series__metric="accuracy_gsm8k").update(value=math.nan)
    first = Measurement.objects.filter(run=run).exclude(series__metric__startswith="accuracy").first()
    assert first is not None
    Measurement.objects.filter(pk=first.pk).update(value=math.inf)


@pytest.fixture
def bad_run(sweep_run_ingest):
    run = sweep_run_ingest(sha=SHA)
    _store_bad_rows(run)
    return run


def test_pages_with_non_finite_and_impossible_values_answer_and_mark_them_invalid(
    client: Client, bad_run
) -> None:
    for url in (
        f"/runs/{bad_run.pk}/",
        f"/commits/{SHA}/",
        "/runs/",
        "/",
        f"/suites/{bad_run.suite.name}/",
        f"/api/commits/{SHA}/measurements/",
        f"/api/suites/{bad_run.suite.name}/series/?metric=accuracy_gsm8k",
    ):
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
    assert b"invalid" in client.get(f"/runs/{bad_run.pk}/").content
    assert b"invalid" in client.get(f"/commits/{SHA}/").content


def test_the_data_migration_removes_non_finite_and_impossible_values(bad_run) -> None:
    migration = importlib.import_module("dashboard.benchmarks.migrations.0011_repair_non_finite_values")
    migration.repair(django_apps, None)

    assert list(AccuracyScore.objects.filter(run=bad_run).values_list("name", flat=True)) == []
    values = Measurement.objects.filter(run=bad_run).values_list("value", flat=True)
    assert values and all(math.isfinite(value) for value in values)
    assert not Measurement.objects.filter(run=bad_run, series__metric__startswith="accuracy").exists()

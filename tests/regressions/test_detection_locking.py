"""Ingest and detection at the same time on the same series: neither waits for the other, so the pair
cannot deadlock (an ingest's deferred foreign-key checks run at COMMIT, in its own order)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from dashboard.benchmarks.models import Measurement, Series
from dashboard.benchmarks.services import report_ingest
from dashboard.regressions.detect.alerts import series_lock

pytestmark = pytest.mark.django_db(transaction=True)

FIRST, SECOND = "82a85dc1" + "0" * 32, "c0ffee00" + "1" * 32


def test_an_ingest_commits_while_a_detection_holds_the_series_it_measures(vllm_cpu_report) -> None:
    report_ingest(raw=vllm_cpu_report, commit_sha=FIRST, suite_name="tiny-llama-cpu", hardware_class="cpu")
    series_ids = list(Series.objects.values_list("pk", flat=True))
    locked, release = threading.Event(), threading.Event()

    def detection_in_progress() -> None:
        try:
            with transaction.atomic():
                assert len(list(series_lock().filter(pk__in=series_ids).order_by("pk"))) == len(series_ids)
                locked.set()
                release.wait(timeout=30)
        finally:
            connection.close()

    detection = threading.Thread(target=detection_in_progress)
    detection.start()
    try:
        assert locked.wait(timeout=10)
        with connection.cursor() as cursor:
            # Waiting for a lock held by the detection would fail the ingest here instead of hanging.
            cursor.execute("SET lock_timeout = '3s'")
        outcome = report_ingest(
            raw=vllm_cpu_report, commit_sha=SECOND, suite_name="tiny-llama-cpu", hardware_class="cpu"
        )
    finally:
        release.set()
        detection.join(timeout=30)
        with connection.cursor() as cursor:
            cursor.execute("RESET lock_timeout")

    assert outcome.created
    assert Measurement.objects.filter(run=outcome.run).count() == len(series_ids)

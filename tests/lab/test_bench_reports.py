"""The bench's stored report sample outlives a cleaned checkout: the dataset stays in PostgreSQL while
`make clean` empties var/ (and another checkout has a report storage of its own), and the size measure
read every sampled report, so a reused dataset crashed the bench where a report was missing."""

from typing import cast

import pytest
from django.core.files.storage import default_storage

from dashboard.benchmarks.models import Run
from dashboard.benchmarks.report_storage import report_read_gzip, report_save
from lab.bench import SAMPLE_REPORT, reports_sample_store
from tests.factories import RunFactory

pytestmark = pytest.mark.django_db


def test_reports_missing_from_the_storage_are_written_again_and_present_ones_are_kept() -> None:
    raw = SAMPLE_REPORT.read_bytes()
    kept, lost = cast(Run, RunFactory()), cast(Run, RunFactory())
    for run in (kept, lost):
        Run.objects.filter(pk=run.pk).update(report_key=report_save(run_id=run.pk, raw=raw))
    kept.refresh_from_db()
    lost.refresh_from_db()
    kept_bytes = report_read_gzip(key=kept.report_key)
    default_storage.delete(lost.report_key)
    said: list[str] = []

    reports_sample_store(say=said.append)

    lost.refresh_from_db()
    assert default_storage.exists(lost.report_key)
    assert report_read_gzip(key=kept.report_key) == kept_bytes
    assert said == ["stored reports: 1 of 2 missing from the report storage, written again"]
    # Nothing missing: nothing written, nothing said.
    said.clear()
    reports_sample_store(say=said.append)
    assert said == []

"""Raw reports outside the database: each run's report gzipped in Django's default storage (files under
MEDIA_ROOT, or an S3-compatible bucket), under a key derived from the run; the run row keeps the key."""

import gzip

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage


def report_key(*, run_id: int) -> str:
    """Where run `run_id`'s report lies: a thousand runs to a folder, so no folder grows without end."""
    return f"reports/{run_id // 1000}/run-{run_id}.json.gz"


def report_save(*, run_id: int, raw: bytes) -> str:
    """Store a run's raw report under its key, replacing any earlier one; returns the key.

    gzip level 1: several times faster than the default on a large report, for a few % more bytes. Written
    before the run's transaction commits: a rolled-back ingest leaves a file under an id never used again.
    """
    return default_storage.save(report_key(run_id=run_id), ContentFile(gzip.compress(raw, compresslevel=1)))


def report_read_gzip(*, key: str) -> bytes:
    """The raw report stored under `key`, as stored (gzip)."""
    with default_storage.open(key, "rb") as stored:
        return stored.read()


def report_read(*, key: str) -> bytes:
    """The raw report stored under `key`, decompressed."""
    return gzip.decompress(report_read_gzip(key=key))

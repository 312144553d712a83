"""Raw reports live in the report storage (files under MEDIA_ROOT here), not in the run table: ingest
writes them there, the run page's link reads them from there, and the migration moved the old ones."""

import gzip
import os
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest
from django.conf import settings
from django.core.files.storage import default_storage
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from dashboard.benchmarks.models import Commit, Run, Suite
from dashboard.benchmarks.report_storage import report_read
from tests.factories import CommitFactory, SuiteFactory

ROOT = Path(__file__).resolve().parents[2]
SHA = "82a85dc1" + "0" * 32
BEFORE = ("benchmarks", "0009_duplicate_indexes_dropped_main_order_indexed")
AFTER = ("benchmarks", "0010_raw_reports_in_storage")


def _row_bytes(run_id: int) -> int:
    """The run's row as PostgreSQL stores it, every column's value included."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_column_size(run.*) FROM benchmarks_run run WHERE id = %s", [run_id])
        return cursor.fetchone()[0]


@pytest.mark.django_db
def test_ingest_stores_the_report_gzipped_in_the_storage_and_only_its_key_in_the_run(
    tmp_path, vllm_cpu_report
) -> None:
    path = tmp_path / "report.json"
    path.write_bytes(vllm_cpu_report)

    call_command("ingest_report", path, commit=SHA, suite="tiny-llama-cpu", hardware="cpu")

    run = Run.objects.get()
    stored = Path(settings.MEDIA_ROOT) / run.report_key
    # A thousand runs to a folder: the folder follows the run id.
    assert run.report_key == f"reports/{run.pk // 1000}/run-{run.pk}.json.gz" and stored.is_file()
    assert gzip.decompress(stored.read_bytes()) == vllm_cpu_report
    assert stored.stat().st_size < len(vllm_cpu_report) / 4
    assert _row_bytes(run.pk) < stored.stat().st_size / 4


@pytest.mark.django_db
def test_the_run_pages_raw_report_link_serves_the_stored_report(client, tmp_path, vllm_cpu_report) -> None:
    path = tmp_path / "report.json"
    path.write_bytes(vllm_cpu_report)
    call_command("ingest_report", path, commit=SHA, suite="tiny-llama-cpu", hardware="cpu")
    run = Run.objects.get()

    assert f'href="/runs/{run.pk}/report.json"' in client.get(f"/runs/{run.pk}/").content.decode()
    served = client.get(f"/runs/{run.pk}/report.json")
    assert served.status_code == 200 and served.content == vllm_cpu_report
    packed = client.get(f"/runs/{run.pk}/report.json", headers={"Accept-Encoding": "gzip, br"})
    assert packed["Content-Encoding"] == "gzip" and "Accept-Encoding" in packed["Vary"]
    assert packed.content == (Path(settings.MEDIA_ROOT) / run.report_key).read_bytes()
    assert gzip.decompress(packed.content) == vllm_cpu_report

    default_storage.delete(run.report_key)
    (Path(settings.MEDIA_ROOT) / run.report_key).parent.mkdir(parents=True, exist_ok=True)
    (Path(settings.MEDIA_ROOT) / run.report_key).write_bytes(gzip.compress(b'{"benchmarks": "replaced"}'))
    assert client.get(f"/runs/{run.pk}/report.json").content == b'{"benchmarks": "replaced"}'


@pytest.mark.django_db(transaction=True)
def test_migration_moves_a_report_from_the_table_to_the_storage_and_back() -> None:
    commit, suite = cast(Commit, CommitFactory()), cast(Suite, SuiteFactory())
    packed = gzip.compress(b'{"benchmarks": ["old"]}')
    executor = MigrationExecutor(connection)
    leaves = executor.loader.graph.leaf_nodes()
    try:
        executor.migrate([BEFORE])
        old_run = executor.loader.project_state([BEFORE]).apps.get_model("benchmarks", "Run")
        run_id = old_run.objects.create(
            commit_id=commit.pk, suite_id=suite.pk, hardware_class="cpu", report_gz=packed
        ).pk
        without = old_run.objects.create(commit_id=commit.pk, suite_id=suite.pk, hardware_class="cpu").pk

        executor = MigrationExecutor(connection)
        executor.migrate([AFTER])

        # Read with the columns that migration knew: later ones are not there yet.
        moved = Run.objects.only("report_key").get(pk=run_id)
        assert moved.report_key == f"reports/{run_id // 1000}/run-{run_id}.json.gz"
        assert default_storage.open(moved.report_key).read() == packed
        assert report_read(key=moved.report_key) == b'{"benchmarks": ["old"]}'
        assert Run.objects.only("report_key").get(pk=without).report_key == ""
        columns = {
            column.name
            for column in connection.introspection.get_table_description(
                connection.cursor(), "benchmarks_run"
            )
        }
        assert "report_gz" not in columns

        executor = MigrationExecutor(connection)
        executor.migrate([BEFORE])

        back = (
            executor.loader.project_state([BEFORE]).apps.get_model("benchmarks", "Run").objects.get(pk=run_id)
        )
        assert bytes(back.report_gz) == packed
        assert not default_storage.exists(moved.report_key)
    finally:
        MigrationExecutor(connection).migrate(leaves)


def test_a_bucket_setting_puts_reports_in_that_s3_compatible_store() -> None:
    probe = (
        "import django; django.setup(); from django.core.files.storage import storages; "
        "s = storages['default']; "
        "print(type(s).__name__, s.bucket_name, s.endpoint_url, s.location)"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "dashboard.settings",
        "PERFWATCH_REPORTS_BUCKET": "perfwatch-reports",
        "PERFWATCH_REPORTS_ENDPOINT_URL": "https://minio.internal:9000",
        "PERFWATCH_REPORTS_PREFIX": "prod",
    }

    printed = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()

    assert printed == ["S3Storage", "perfwatch-reports", "https://minio.internal:9000", "prod"]

"""Commands answer bad input with one line, and one bad suite file never stops the good ones."""

import io
import shutil
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from dashboard.benchmarks.models import Run, Suite

pytestmark = pytest.mark.django_db

SUITES = Path(__file__).resolve().parents[2] / "runners" / "suites"


def test_load_suites_loads_every_good_file_and_names_every_bad_one(tmp_path) -> None:
    shutil.copy(SUITES / "tiny-llama-cpu.yaml", tmp_path)
    (tmp_path / "broken.yaml").write_text("name: broken\n  - not: yaml: at all\n")
    (tmp_path / "misspelt.yaml").write_text(
        (SUITES / "tiny-llama-cpu.yaml").read_text().replace("name: tiny-llama-cpu", "name: misspelt")
        .replace("max_seconds:", "max_second:")
    )  # fmt: skip
    errors = io.StringIO()

    with pytest.raises(CommandError, match=r"^2 suite file\(s\) not loaded; the 1 others were$"):
        call_command("load_suites", directory=tmp_path, stderr=errors)

    assert list(Suite.objects.values_list("name", flat=True)) == ["tiny-llama-cpu"]
    lines = errors.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"not loaded: {tmp_path / 'broken.yaml'}: not valid YAML")
    assert lines[1].startswith(
        f"not loaded: {tmp_path / 'misspelt.yaml'}: benchmark.max_seconds: Field required"
    )


def test_a_mistyped_commit_sha_is_one_line_and_queues_nothing() -> None:
    call_command("load_suites", stdout=io.StringIO())

    with pytest.raises(CommandError) as raised:
        call_command(
            "benchmark_versions", suite="tiny-llama-cpu", versions="0.32.0", commit=["0.32.0=8ga85dc1"]
        )

    assert str(raised.value) == "invalid commit sha '8ga85dc1': expected 7 to 40 hexadecimal characters"
    assert not Run.objects.exists()


def test_reproduce_of_an_unknown_run_is_one_line() -> None:
    with pytest.raises(CommandError, match=r"^run 999 does not exist or recorded no commands$"):
        call_command("reproduce", "999")
    with pytest.raises(CommandError, match=r"^'x1' is not a run number$"):
        call_command("reproduce", "x1")

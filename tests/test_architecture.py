"""docs/architecture.md names the files and functions a stored report passes through: they must exist."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "architecture.md").read_text()
FLOW = DOC.split("## A stored report", 1)[1].split("\n## ", 1)[0]


def _flow_rows() -> list[tuple[list[str], list[str]]]:
    rows = []
    for line in FLOW.splitlines():
        if line.startswith("| `"):
            files_cell, what = line.split(" | ", 1)
            names = re.findall(r"`(\w+)`", what)
            rows.append((re.findall(r"`([\w/.]+\.py)`", files_cell), names))
    return rows


def _defined(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}


def test_the_flow_of_a_stored_report_touches_at_most_six_files_that_exist() -> None:
    rows = _flow_rows()
    files = [file for row_files, _ in rows for file in row_files]
    # One of two entries, then the common path: at most six files along either way.
    assert len(rows) <= 6 and len(files) == len(set(files))
    for file in files:
        assert (ROOT / file).is_file(), file


def test_every_function_the_flow_names_is_defined_in_its_row() -> None:
    for files, names in _flow_rows():
        defined = set().union(*(_defined(ROOT / file) for file in files))
        for name in names:
            assert name in defined, f"{name} is not defined in {files}"


def test_no_runner_module_is_longer_than_one_reading() -> None:
    # A node's code is read when a run fails on a machine far away: each module stays short enough to hold.
    long = {
        str(path.relative_to(ROOT)): count
        for path in (ROOT / "runners").rglob("*.py")
        if (count := len(path.read_text().splitlines())) > 500
    }
    assert long == {}

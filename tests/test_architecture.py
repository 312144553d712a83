"""docs/architecture.md names the functions each file of a pass runs: they must be defined there (which
files a pass enters is held to the map by tests/regressions/test_flow_trace.py)."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "architecture.md").read_text()


def _rows() -> list[tuple[str, list[str]]]:
    rows = []
    for name in ("store", "confirmation"):
        section = DOC.split(f"## The {name} pass", 1)[1].split("\n## ", 1)[0]
        for line in section.splitlines():
            if line.startswith("| `"):
                files_cell, what = line.split(" | ", 1)
                (path,) = re.findall(r"`([\w/.]+(?:\.py|/))`", files_cell)
                names = [name.split(".")[-1] for name in re.findall(r"`(\w+(?:\.\w+)?)`", what)]
                rows.append((path, names))
    return rows


def _defined(path: Path) -> set[str]:
    files = sorted(path.glob("*.py")) if path.is_dir() else [path]
    return {
        node.name
        for file in files
        for node in ast.walk(ast.parse(file.read_text()))
        if isinstance(node, ast.FunctionDef)
    } | {file.stem for file in files}


def test_every_function_a_pass_names_is_defined_in_its_file() -> None:
    for path, names in _rows():
        defined = _defined(ROOT / path)
        for name in names:
            assert name in defined, f"{name} is not defined in {path}"


def test_no_module_is_longer_than_one_reading_without_saying_why() -> None:
    # A module is read whole when something breaks: past 500 lines its docstring says why it is one piece.
    sources = [
        path
        for folder in ("dashboard", "runners", "workers", "lab")
        for path in (ROOT / folder).rglob("*.py")
        if "migrations" not in path.parts
    ]
    sources += (ROOT / "dashboard" / "web" / "static" / "perfwatch").glob("*.js")
    long = {
        str(path.relative_to(ROOT)): count
        for path in sources
        if (count := len((text := path.read_text()).splitlines())) > 500
        and "Longer than 500 lines:" not in text[:1500]
    }
    assert long == {}

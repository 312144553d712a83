import json
import subprocess
import sys
from io import StringIO
from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command

REPOSITORY = Path(__file__).resolve().parents[2]


def series_csv(path: Path, *, first: float, second: float, split: int = 412, length: int = 612) -> Path:
    rng = np.random.default_rng(3)
    level = np.where(np.arange(length) < split, first, second)
    values = level * (1.0 + 0.01 * rng.normal(size=length))
    path.write_text(
        "commit,value\n" + "".join(f"c{i},{value!r}\n" for i, value in enumerate(values.tolist()))
    )
    return path


def detect(*arguments: str) -> dict:
    out = StringIO()
    call_command("change_points", *arguments, stdout=out)
    return json.loads(out.getvalue())


def test_throughput_drop_is_printed_as_json_at_the_first_row_after_it(tmp_path):
    path = series_csv(tmp_path / "throughput.csv", first=183.0, second=171.0)

    result = detect("--csv", str(path))

    (change,) = result["change_points"]
    assert set(change) == {"index", "before", "after", "change_pct", "p_value"}
    assert change["index"] == 412
    assert change["before"] == pytest.approx(183.0, abs=0.3)
    assert change["after"] == pytest.approx(171.0, abs=0.3)
    assert change["change_pct"] == pytest.approx(-6.6, abs=0.3)
    assert change["change_pct"] == round(change["change_pct"], 1)
    assert isinstance(change["p_value"], float) and change["p_value"] < 1e-4


@pytest.mark.parametrize(("second", "kind"), [(171.0, "regression"), (195.0, "improvement")])
def test_higher_is_better_names_the_kind_of_each_change(tmp_path, second, kind):
    path = series_csv(tmp_path / "throughput.csv", first=183.0, second=second)

    (change,) = detect("--csv", str(path), "--higher-is-better")["change_points"]

    assert change["kind"] == kind


def test_minimum_change_hides_smaller_changes(tmp_path):
    path = series_csv(tmp_path / "throughput.csv", first=183.0, second=171.0)

    assert detect("--csv", str(path), "--min-change-pct", "10")["change_points"] == []


def test_step_free_series_prints_an_empty_list(tmp_path):
    path = series_csv(tmp_path / "flat.csv", first=0.25, second=0.25)

    assert detect("--csv", str(path)) == {"change_points": []}


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("commit,seconds\nabc,1.0\n", "no `value` column"),
        ("commit,value\nabc,1.0\ndef,fast\n", "line 3: value 'fast' is not a number"),
        ("commit,value\nabc,1.0\ndef,\n", "line 3: value '' is not a number"),
        ("commit,value\nabc,nan\n", "is not finite"),
        ("", "no `value` column"),
    ],
)
def test_bad_csv_is_refused_with_its_reason(tmp_path, content, reason):
    path = tmp_path / "bad.csv"
    path.write_text(content)

    with pytest.raises(CommandError, match=reason):
        detect("--csv", str(path))


def test_missing_file_exits_non_zero_with_a_one_line_reason(tmp_path):
    missing = tmp_path / "missing.csv"

    finished = subprocess.run(
        [sys.executable, "manage.py", "change_points", "--csv", str(missing)],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert finished.returncode != 0
    assert finished.stdout == ""
    assert finished.stderr.strip().splitlines() == [
        f"CommandError: cannot read {missing}: No such file or directory"
    ]


def test_evaluation_prints_every_measure():
    out = StringIO()

    call_command("evaluate_detector", "--series", "20", "--seed", "4", stdout=out)

    report = out.getvalue()
    for measure in (
        "series: 20",
        "all steps",
        "steps >= 2x noise",
        "F1",
        "false alarms / 1000 points on step-free series: iid",
        "commits until flagged: median",
        "time per series",
        "time for 10,000 points",
    ):
        assert measure in report

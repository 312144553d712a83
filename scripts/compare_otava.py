"""Score apache-otava on the labelled set of `evaluate_detector`, with the same measures.

apache-otava pins numpy 2.2 and brings dozens of distributions, so it lives in its own virtualenv and
runs in a worker process; this script stays in the project's environment and feeds it one series per line:

    python3 -m venv var/otava-venv && var/otava-venv/bin/pip install apache-otava==0.8.0
    .venv/bin/python scripts/compare_otava.py --series 300

Times include sending each series to the worker as JSON (well under a millisecond per 1,000 points).
"""

from __future__ import annotations

import argparse
import json
import selectors
import subprocess
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt

from lab.evaluation import (
    Detect,
    detector_evaluate,
    detector_indices,
    labelled_series_generate,
    report_format,
)

REPOSITORY = Path(__file__).resolve().parents[1]
DEFAULT_OTAVA_PYTHON = REPOSITORY / "var" / "otava-venv" / "bin" / "python"
REPLY_TIMEOUT_S = 300.0

# Runs inside otava's virtualenv: one JSON list of values in, one JSON reply out, per line.
WORKER = """
import json, sys
from otava.analysis import compute_change_points
window, max_pvalue, min_magnitude = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
for line in sys.stdin:
    try:
        found, _ = compute_change_points(
            json.loads(line), window_len=window, max_pvalue=max_pvalue, min_magnitude=min_magnitude
        )
        reply = {"indices": [int(point.index) for point in found]}
    except Exception as error:
        reply = {"indices": [], "error": f"{type(error).__name__}: {error}"}
    print(json.dumps(reply), flush=True)
"""

# (label, window length, p-value, minimum relative change): otava's defaults, and the setting that
# measured best for it in shared/notes/change-points.md with our minimum change added.
CONFIGURATIONS = [
    ("apache-otava 0.8.0, defaults (window 50, p 0.001)", 50, 0.001, 0.0),
    ("apache-otava 0.8.0, tuned (window 100, p 1e-4, min change 2 %)", 100, 1e-4, 0.02),
]


class OtavaWorker:
    """An otava process that answers change-point indices for one series per line."""

    def __init__(self, *, python: Path, window: int, max_pvalue: float, min_magnitude: float) -> None:
        self.process = subprocess.Popen(
            [str(python), "-c", WORKER, str(window), str(max_pvalue), str(min_magnitude)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.selector = selectors.DefaultSelector()
        assert self.process.stdout is not None
        self.selector.register(self.process.stdout, selectors.EVENT_READ)
        self.errors: list[str] = []

    def detect(self, values: npt.NDArray[np.float64]) -> list[int]:
        assert self.process.stdin is not None and self.process.stdout is not None
        # otava's code expects a plain list of floats.
        self.process.stdin.write(json.dumps(values.tolist()) + "\n")
        self.process.stdin.flush()
        if not self.selector.select(timeout=REPLY_TIMEOUT_S):
            raise TimeoutError(f"otava gave no answer within {REPLY_TIMEOUT_S:.0f} s")
        reply = json.loads(self.process.stdout.readline())
        if "error" in reply:
            self.errors.append(reply["error"])
        return [int(index) for index in reply["indices"]]

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


def section_print(*, title: str, series: list, detect: Detect) -> None:
    print(f"== {title}")
    print(report_format(report=detector_evaluate(series=series, detect=detect)), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--series", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--otava-python", type=Path, default=DEFAULT_OTAVA_PYTHON)
    options = parser.parse_args()
    if not options.otava_python.exists():
        print(f"no otava environment at {options.otava_python}: see this script's docstring", file=sys.stderr)
        return 2
    series = labelled_series_generate(count=options.series, seed=options.seed)
    section_print(title="change_points_detect (this project)", series=series, detect=detector_indices)
    for title, window, max_pvalue, min_magnitude in CONFIGURATIONS:
        worker = OtavaWorker(
            python=options.otava_python, window=window, max_pvalue=max_pvalue, min_magnitude=min_magnitude
        )
        try:
            section_print(title=title, series=series, detect=worker.detect)
        finally:
            worker.close()
        if worker.errors:
            print(
                f"otava failed on {len(worker.errors)} series, counted as finding nothing: {worker.errors[0]}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

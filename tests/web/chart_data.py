"""Reading chart JSON as the chart script does: typed-array columns and the commits table."""

import base64
from typing import Any

import numpy as np

DTYPES = {
    "f8": "<f8",
    "f4": "<f4",
    "i4": "<i4",
    "u4": "<u4",
    "i2": "<i2",
    "u2": "<u2",
    "i1": "i1",
    "u1": "u1",
}


def column(value: Any) -> list[float]:
    """A trace column as numbers, whether a plain list or a base64 typed array."""
    if isinstance(value, dict):
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=DTYPES[value["dtype"]]).tolist()
    return list(value)


def line_traces(figure: dict) -> list[dict]:
    return [trace for trace in figure["data"] if not trace.get("meta")]


def trace_commits(commits: dict, trace: dict) -> list[dict]:
    """What each point of a line trace shows on hover and opens on click, found by x in the table."""
    row_of = {x: row for row, x in enumerate(column(commits["x"]))}
    points = []
    for x, y in zip(column(trace["x"]), column(trace["y"]), strict=True):
        row = row_of[x]
        points.append(
            {
                "x": x,
                "y": y,
                "url": commits["url"].replace("{sha}", commits["sha"][row]),
                "sha": commits["sha"][row],
                "subject": commits["subject"][row],
                "pr": commits["pr"][row],
                "time": commits["time"][row],
            }
        )
    return points

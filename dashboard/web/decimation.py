"""Thin a series to what a chart of a given pixel width can show, without losing a step or an outlier.

The x span is cut into equal buckets (a few pixels each); each bucket keeps its lowest and its highest
point, so every extreme of the series stays drawn and a level shift shows wherever it happens. No
Django here: numbers in, indexes out.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

# Two points (min and max) per bucket: one bucket per two pixels draws about one point per pixel.
PIXELS_PER_BUCKET = 2


def buckets_for(*, width_px: int) -> int:
    """How many min/max buckets a chart `width_px` wide gets."""
    return max(1, width_px // PIXELS_PER_BUCKET)


def decimate_minmax(
    x: npt.NDArray[np.float64],
    y: npt.NDArray[np.float64],
    *,
    buckets: int,
    x_range: tuple[float, float] | None = None,
) -> npt.NDArray[np.intp]:
    """Ascending indexes of the points to draw: every point when they fit in `buckets` twice over,
    else the lowest and highest y of each of `buckets` equal slices of `x_range` (default: x's own
    span), plus the first and last point so the line reaches both ends. `x` must be sorted."""
    count = len(x)
    if count <= 2 * buckets:
        return np.arange(count, dtype=np.intp)
    low, high = x_range if x_range is not None else (float(x[0]), float(x[-1]))
    span = high - low
    if span <= 0:
        bucket = np.zeros(count, dtype=np.int64)
    else:
        bucket = np.clip(((x - low) / span * buckets).astype(np.int64), 0, buckets - 1)
    # Sorted by bucket, then y: the first row of a bucket is its minimum and the last its maximum.
    order = np.lexsort((y, bucket))
    sorted_bucket = bucket[order]
    starts = np.flatnonzero(np.r_[True, sorted_bucket[1:] != sorted_bucket[:-1]])
    ends = np.r_[starts[1:], count] - 1
    keep = np.concatenate((order[starts], order[ends], [0, count - 1]))
    return np.unique(keep).astype(np.intp)

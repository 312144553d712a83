"""How gunicorn runs the web app: the image, docker-compose.yml and the bench start it with
`--config python:dashboard.gunicorn_conf`. A worker gives the memory of a heavy page back to the system
once the page is sent, rather than holding its peak for the rest of its life."""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any

# glibc's mallopt parameter, and the size from which a block is mapped on its own (glibc's default).
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 128 * 1024


def _glibc() -> Any:
    """The C library when it is glibc (the image's and the bench's), else None: the hooks then do nothing."""
    name = ctypes.util.find_library("c")
    try:
        library = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return library if library is not None and hasattr(library, "malloc_trim") else None


_LIBC = _glibc()


def post_fork(server: Any, worker: Any) -> None:
    # glibc raises its mmap threshold to the size of each large block freed, so that the next arrays of
    # that size (a timeline's columns, a few MB each) come from the heap and stay resident once freed. A
    # fixed threshold keeps every large block mapped on its own and unmapped when it is freed.
    if _LIBC is not None:
        _LIBC.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)


def post_request(worker: Any, req: Any, environ: Any, resp: Any) -> None:
    # The heap's free pages back to the system after each request: a fraction of a millisecond.
    if _LIBC is not None:
        _LIBC.malloc_trim(0)

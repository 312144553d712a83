"""How gunicorn runs the web app: the image, docker-compose.yml and the bench start it with
`--config python:dashboard.gunicorn_conf`. The workers start with the app loaded, and a worker gives
the memory of a heavy page back to the system once the page is sent, rather than holding its peak for
the rest of its life."""

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

# The app is loaded once, in the master, before the workers are forked: each worker starts with Django set
# up, rather than the first request each one serves paying for it.
preload_app = True


def when_ready(server: Any) -> None:
    # With the views' modules too (the URL map imports them, numpy and scipy among them) and the shared
    # cache's client library: without this the first request of every worker took 0.7-1.5 s more, and a
    # page and its chart data, served by two workers, could pay it twice. Nothing here opens a connection
    # that the forked workers would then share.
    import redis  # noqa: F401  (imported by the cache on its first use)
    from django.urls import get_resolver

    get_resolver().resolve("/")


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

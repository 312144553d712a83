"""A runner node says it is alive even while it holds no run, so the runners page can tell an idle
node from a dead one."""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery.signals import worker_ready, worker_shutdown
from django.conf import settings

logger = logging.getLogger(__name__)
_stop = threading.Event()


def _beat(*, name: str, hardware_class: str) -> None:
    from django.db import DatabaseError, connection

    from dashboard.benchmarks.runs import runner_register
    from runners.fingerprint import environment_fingerprint

    environment = environment_fingerprint()
    while not _stop.is_set():
        try:
            runner_register(name=name, hardware_class=hardware_class, environment=environment)
        except DatabaseError as error:  # the next beat tries again; the node keeps working
            logger.warning("runner presence not recorded: %s", error)
        finally:
            connection.close()
        _stop.wait(settings.PERFWATCH_HEARTBEAT_S)


@worker_ready.connect
def presence_start(**_: Any) -> None:
    name, hardware_class = settings.PERFWATCH_RUNNER_NAME, settings.PERFWATCH_RUNNER_HARDWARE_CLASS
    if not hardware_class:
        return  # a control worker, not a runner node
    threading.Thread(
        target=_beat,
        kwargs={"name": name, "hardware_class": hardware_class},
        name="runner-presence",
        daemon=True,
    ).start()


@worker_shutdown.connect
def presence_stop(**_: Any) -> None:
    _stop.set()

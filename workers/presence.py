"""A runner node checks at start-up that its host has every program its install recipes call, then says
it is alive even while it holds no run, so the runners page can tell an idle node from a dead one; each
time the dashboard answers, the node re-sends the finished reports it kept while it could not."""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery.signals import worker_init, worker_ready, worker_shutdown
from django.conf import settings

logger = logging.getLogger(__name__)
_stop = threading.Event()


def _beat(*, hardware_class: str) -> None:
    from pathlib import Path

    from runners.api_client import ApiRefused, ApiUnreachable
    from runners.delivery import reports_resend
    from runners.fingerprint import environment_fingerprint
    from workers.tasks import runner_api

    api = runner_api()
    environment = {**environment_fingerprint(), "hardware_class": hardware_class}
    while not _stop.is_set():
        try:
            api.presence(environment=environment)
            # The dashboard answers: hand over what finished while it did not (or before a restart).
            reports_resend(api=api, work_root=Path(settings.PERFWATCH_WORK_DIR))
        except (ApiRefused, ApiUnreachable) as error:  # the next beat tries again; the node keeps working
            logger.warning("runner presence not recorded: %s", error)
        _stop.wait(settings.PERFWATCH_HEARTBEAT_S)


@worker_init.connect
def node_tools_check(**_: Any) -> None:
    """Stop a runner node that could not install anything, with the line that says what to install."""
    if not settings.PERFWATCH_RUNNER_HARDWARE_CLASS:
        return
    from runners.node_setup import NodeMisconfigured
    from runners.node_setup import node_tools_check as check

    try:
        tools = check()
    except NodeMisconfigured as error:
        logger.critical("this runner node cannot build environments: %s", error)
        # Celery logs and swallows a receiver's exceptions; SystemExit is not one of them.
        raise SystemExit(f"perfwatch runner: {error}") from None
    logger.info("runner node tools: %s", tools.summary())


@worker_ready.connect
def presence_start(**_: Any) -> None:
    hardware_class = settings.PERFWATCH_RUNNER_HARDWARE_CLASS
    if not hardware_class:
        return  # a control worker, not a runner node
    threading.Thread(
        target=_beat,
        kwargs={"hardware_class": hardware_class},
        name="runner-presence",
        daemon=True,
    ).start()


@worker_shutdown.connect
def presence_stop(**_: Any) -> None:
    _stop.set()

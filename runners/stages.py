"""The names a run's pipeline shares with the web app: its stages and its step logs.

A stage is also the run's status while it is in it: `RunStatus` takes its values from here, so the two
cannot drift apart. Step logs are `<name>.log` in the run's work directory.
"""

from __future__ import annotations

from pathlib import Path

STAGE_INSTALLING = "installing"
STAGE_STARTING_SERVER = "starting_server"
STAGE_BENCHMARKING = "benchmarking"
STAGE_PROFILING = "profiling"  # profile runs only: after the measured levels, never part of them
STAGE_STORING = "storing"
PIPELINE_STAGES = (
    STAGE_INSTALLING,
    STAGE_STARTING_SERVER,
    STAGE_BENCHMARKING,
    STAGE_PROFILING,
    STAGE_STORING,
)

LOG_INSTALL = "install"
LOG_SERVER = "server"
LOG_GUIDELLM = "guidellm"
LOG_ACCURACY = "accuracy"
LOG_NAMES = (LOG_INSTALL, LOG_SERVER, LOG_GUIDELLM, LOG_ACCURACY)


def log_path(*, work_dir: Path, name: str) -> Path:
    """Where the step log `name` (one of LOG_NAMES) of a run lives."""
    return work_dir / f"{name}.log"

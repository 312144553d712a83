"""A finished run's report is kept on the node until the dashboard has stored it.

The body of the upload is written to disk before the first try, so a dashboard that is down longer than
the retries (or a node that restarts meanwhile) loses nothing: the node re-sends every kept report each
time it says it is alive, and an operator can hand one to the dashboard by hand
(`manage.py run_report_ingest FILE`). A report the dashboard refuses (the run was cancelled, or taken by
another attempt) is set aside, never re-sent and never deleted.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runners.api_client import ApiRefused, ApiUnreachable, RunnerApi, RunNotHeld

logger = logging.getLogger(__name__)

KEPT_DIR_NAME = "kept-reports"
REFUSED_SUFFIX = ".refused.json"
INGEST_COMMAND = "python manage.py run_report_ingest"


@dataclass(frozen=True)
class KeptReport:
    """A finished run's upload as it waits on the node's disk."""

    path: Path
    run_id: int
    attempt: int
    runner: str
    kept_at: datetime
    body: Mapping[str, Any]

    def upload_body(self, *, resent: bool) -> dict[str, Any]:
        """The complete call's body, saying which attempt it is, whether the first upload of it failed
        (`resent`), and how long it has waited on the node."""
        waited_s = (datetime.now(UTC) - self.kept_at).total_seconds()
        return {
            **self.body,
            "attempt": self.attempt,
            "delivery": {
                "kept_at": self.kept_at.isoformat(),
                "kept_s": round(max(0.0, waited_s), 1),
                "resent": resent,
            },
        }


def kept_dir(work_root: Path) -> Path:
    return work_root / KEPT_DIR_NAME


def complete_body(*, raw_report: bytes, evidence: Mapping[str, Any]) -> dict[str, Any]:
    return {**evidence, "report": base64.b64encode(raw_report).decode()}


def report_keep(
    *, work_root: Path, run_id: int, attempt: int, runner: str, body: Mapping[str, Any]
) -> KeptReport:
    """Write the upload to the node's disk (atomically) before anything is sent."""
    directory = kept_dir(work_root)
    directory.mkdir(parents=True, exist_ok=True)
    kept_at = datetime.now(UTC)
    path = directory / f"run-{run_id}-attempt-{attempt}.json"
    record = {
        "run": run_id,
        "attempt": attempt,
        "runner": runner,
        "kept_at": kept_at.isoformat(),
        "body": dict(body),
    }
    temporary = directory / f".{path.name}.{uuid.uuid4().hex[:8]}"
    temporary.write_text(json.dumps(record))
    os.replace(temporary, path)
    return KeptReport(path=path, run_id=run_id, attempt=attempt, runner=runner, kept_at=kept_at, body=body)


def kept_report_read(path: Path) -> KeptReport:
    record = json.loads(path.read_text())
    return KeptReport(
        path=path,
        run_id=int(record["run"]),
        attempt=int(record["attempt"]),
        runner=str(record["runner"]),
        kept_at=datetime.fromisoformat(str(record["kept_at"])),
        body=dict(record["body"]),
    )


def reports_kept(work_root: Path) -> list[KeptReport]:
    """The reports waiting on this node, oldest first (set-aside ones excluded)."""
    directory = kept_dir(work_root)
    if not directory.is_dir():
        return []
    paths = [p for p in directory.glob("run-*.json") if not p.name.endswith(REFUSED_SUFFIX)]
    return sorted((kept_report_read(path) for path in paths), key=lambda kept: kept.kept_at)


def report_deliver(*, api: RunnerApi, kept: KeptReport, resent: bool = False) -> bool:
    """Upload a kept report (retried for minutes on first delivery, tried once when `resent`); True once
    stored (the file is then removed), False when the dashboard refused it (the file is set aside with
    the reason). ApiUnreachable, or a 5xx from a proxy in front of a dashboard that is down, leaves it."""
    try:
        api.complete_body(run_id=kept.run_id, body=kept.upload_body(resent=resent), retry=not resent)
    except RunNotHeld as refusal:
        _set_aside(kept, reason=refusal.reason)
        return False
    except ApiRefused as refusal:
        if refusal.status >= 500:
            raise
        _set_aside(kept, reason=refusal.reason)
        return False
    kept.path.unlink(missing_ok=True)
    return True


def _set_aside(kept: KeptReport, *, reason: str) -> None:
    aside = kept.path.with_name(kept.path.name.removesuffix(".json") + REFUSED_SUFFIX)
    os.replace(kept.path, aside)
    logger.warning(
        "the dashboard refused the report of run %s attempt %s (%s); it is kept at %s (%s FILE ingests it)",
        kept.run_id,
        kept.attempt,
        reason,
        aside,
        INGEST_COMMAND,
    )


def reports_resend(*, api: RunnerApi, work_root: Path) -> list[int]:
    """Try each kept report once; the runs whose report was stored now. Stops at the first that cannot
    reach the dashboard (the next call tries again)."""
    stored = []
    for kept in reports_kept(work_root):
        try:
            if report_deliver(api=api, kept=kept, resent=True):
                logger.info("kept report of run %s delivered", kept.run_id)
                stored.append(kept.run_id)
        except (ApiUnreachable, ApiRefused) as error:
            logger.info("kept report of run %s still waiting: %s", kept.run_id, error)
            break
    return stored

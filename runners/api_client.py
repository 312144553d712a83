"""The runner node's side of the runner API: JSON over HTTPS with the node's runner token.

A node holds no database credentials: it claims runs, renews their lease, reports stages and hands over
results and failures through these calls. The server decides; a 409 means the run is not this node's
(any more) and the node stops working on it. These errors are not RunnerErrors on purpose: they are
about the run's ownership, not a failure of the benchmark, and pass through the pipeline untouched.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

API_TIMEOUT_S = 30.0
# Results are the run's whole point: a few minutes of API trouble must not lose them.
DELIVERY_ATTEMPTS = 8
DELIVERY_BACKOFF_S = 2.0
DELIVERY_BACKOFF_MAX_S = 60.0


class ApiRefused(Exception):
    """The API answered with an error; `status` the HTTP status, the message its one-line reason."""

    def __init__(self, *, status: int, reason: str) -> None:
        self.status = status
        self.reason = reason
        super().__init__(f"HTTP {status}: {reason}")


class RunNotHeld(ApiRefused):
    """409: the run is not (or no longer) this runner's: cancelled, requeued, finished or taken."""


class ApiUnreachable(Exception):
    """The API could not be reached or did not answer in time."""


@dataclass(frozen=True)
class ClaimedRun:
    run_id: int
    attempt: int
    commit_sha: str
    version: str
    suite: Mapping[str, Any]
    heartbeat_s: float
    profile: bool = False  # a profile run: the suite's profiling stage follows its levels


@dataclass(frozen=True)
class RunnerApi:
    """Calls to `base_url` (the dashboard's address) with `token` (a runner token)."""

    base_url: str
    token: str
    timeout_s: float = API_TIMEOUT_S

    def _post(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            f"{self.base_url.rstrip('/')}/api/runner/{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return dict(json.loads(response.read() or b"{}"))
        except urllib.error.HTTPError as error:
            try:
                reason = str(json.loads(error.read(65536)).get("error") or error.reason)
            except (ValueError, AttributeError, OSError):
                reason = str(error.reason)
            kind = RunNotHeld if error.code == 409 else ApiRefused
            raise kind(status=error.code, reason=reason) from None
        except (urllib.error.URLError, OSError, ValueError) as error:
            raise ApiUnreachable(f"{self.base_url}: {getattr(error, 'reason', error)}") from None

    def _delivered(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST, retried with backoff while the API is unreachable or answers 5xx."""
        delay_s = DELIVERY_BACKOFF_S
        for attempt in range(DELIVERY_ATTEMPTS):
            try:
                return self._post(path, body)
            except ApiUnreachable:
                if attempt == DELIVERY_ATTEMPTS - 1:
                    raise
            except ApiRefused as error:
                if error.status < 500 or attempt == DELIVERY_ATTEMPTS - 1:
                    raise
            time.sleep(delay_s)
            delay_s = min(DELIVERY_BACKOFF_MAX_S, delay_s * 2)
        raise AssertionError("unreachable")

    def presence(self, *, environment: Mapping[str, Any]) -> None:
        self._post("presence/", {"environment": environment})

    def claim(self, *, run_id: int, environment: Mapping[str, Any]) -> ClaimedRun:
        """Take a queued run; RunNotHeld when another delivery or runner has it."""
        answer = self._delivered(f"runs/{run_id}/claim/", {"environment": environment})
        return ClaimedRun(
            run_id=int(answer["run"]),
            attempt=int(answer["attempt"]),
            commit_sha=str(answer["commit"]),
            version=str(answer.get("version") or ""),
            suite=answer["suite"],
            heartbeat_s=float(answer["heartbeat_s"]),
            profile=bool(answer.get("profile", False)),
        )

    def heartbeat(self, *, run_id: int, logs: Mapping[str, str]) -> None:
        """Renew the lease with the latest log tails; RunNotHeld when the run was taken away."""
        self._post(f"runs/{run_id}/heartbeat/", {"logs": logs})

    def stage(self, *, run_id: int, stage: str) -> None:
        self._delivered(f"runs/{run_id}/stage/", {"stage": stage})

    def complete_body(self, *, run_id: int, body: Mapping[str, Any], retry: bool = True) -> None:
        """Hand over a finished run's report and evidence (runners/delivery.py builds and keeps the body);
        `retry` False tries once, for a re-send of a kept report."""
        if retry:
            self._delivered(f"runs/{run_id}/complete/", body)
        else:
            self._post(f"runs/{run_id}/complete/", body)

    def profile(
        self,
        *,
        run_id: int,
        trace_gzip: bytes,
        trace_name: str,
        summary: Mapping[str, Any],
        server_metrics: Mapping[str, float],
        settings: Mapping[str, Any],
    ) -> None:
        """Hand over a held run's profile (before `complete`): its gzip'd trace and summary."""
        self._delivered(
            f"runs/{run_id}/profile/",
            {
                "trace": base64.b64encode(trace_gzip).decode(),
                "trace_name": trace_name,
                "summary": summary,
                "server_metrics": server_metrics,
                "settings": settings,
            },
        )

    def fail(
        self,
        *,
        run_id: int,
        reason: str,
        retryable: bool,
        evidence: Mapping[str, Any],
        raw_report: bytes | None = None,
        waiting: bool = False,
        retries_max: int | None = None,
    ) -> str:
        """Report a failure with its evidence; return the run's new status ("queued" or "failed").
        `waiting`: not a failure but "not yet" (no wheel yet), to be tried again later."""
        body = {**evidence, "reason": reason, "retryable": retryable, "waiting": waiting}
        if retries_max is not None:
            body["retries_max"] = retries_max
        if raw_report:
            body["report"] = base64.b64encode(raw_report).decode()
        return str(self._delivered(f"runs/{run_id}/fail/", body)["status"])

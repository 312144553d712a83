"""A local HTTP server that replays recorded GitHub REST responses (GitHub cannot be reached from here).

Each ``fixtures/recorded-*.json`` file is one exchange: the request (method, path, query, and the headers
it must carry, such as If-None-Match) and GitHub's response (status, headers, body). Absolute
``https://api.github.com`` URLs in a response are rewritten to this server, as a replaying proxy would,
so Link-header paging stays on it.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures"
GITHUB_API = "https://api.github.com"


@dataclass(frozen=True)
class ReceivedRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]


class FakeGitHubRecordedServer:
    """Serves the given recordings on 127.0.0.1; unknown requests get GitHub's 404 shape."""

    def __init__(self, *recording_names: str) -> None:
        self.recordings = [json.loads((FIXTURES / name).read_text()) for name in recording_names]
        self.received: list[ReceivedRequest] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        # A short poll interval, so that shutting the server down does not stall every test.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    def __enter__(self) -> FakeGitHubRecordedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _match(self, request: ReceivedRequest) -> dict[str, Any] | None:
        candidates = []
        for recording in self.recordings:
            expected = recording["request"]
            wanted_headers = {name.lower(): value for name, value in expected.get("headers", {}).items()}
            if (
                expected["method"] == request.method
                and expected["path"] == request.path
                and expected.get("query", {}) == request.query
                and all(request.headers.get(name) == value for name, value in wanted_headers.items())
            ):
                candidates.append((len(wanted_headers), recording))
        # The most specific recording wins: a conditional request gets the 304, a plain one the 200.
        return max(candidates, key=lambda candidate: candidate[0])[1] if candidates else None

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urllib.parse.urlsplit(self.path)
                request = ReceivedRequest(
                    method="GET",
                    path=parts.path,
                    query=dict(urllib.parse.parse_qsl(parts.query)),
                    headers={name.lower(): value for name, value in self.headers.items()},
                )
                server.received.append(request)
                recording = server._match(request)
                if recording is None:
                    self._send(404, {"Content-Type": "application/json"}, {"message": "Not Found"})
                    return
                response = recording["response"]
                self._send(response["status"], response["headers"], response["body"])

            def _send(self, status: int, headers: dict[str, str], body: Any) -> None:
                if body is None:
                    payload = b""
                elif isinstance(body, str):
                    payload = body.encode()
                else:
                    payload = json.dumps(body).replace(GITHUB_API, server.base_url).encode()
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value.replace(GITHUB_API, server.base_url))
                if status != 304:
                    self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return

        return Handler

import socket
import threading
from collections.abc import Iterator

import pytest


@pytest.fixture
def silent_server_port() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts connections and never answers, like a remote that hangs."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            accepted.append(connection)

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1]
    server.close()
    for connection in accepted:
        connection.close()

"""GitHub webhook signatures (``X-Hub-Signature-256``). Pure: no Django."""

from __future__ import annotations

import hashlib
import hmac
import re

_SIGNATURE_HEADER = re.compile(r"sha256=(?P<digest>[0-9a-fA-F]{64})")


def signature_verify(*, secret: bytes, body: bytes, header: str | None) -> bool:
    """Whether ``header`` is ``sha256=`` + the HMAC-SHA256 of the raw ``body`` under ``secret``.

    A missing or malformed header is simply not a valid signature. An empty secret verifies nothing:
    a webhook without a configured secret must not accept anyone's payload.
    """
    if not secret or header is None:
        return False
    match = _SIGNATURE_HEADER.fullmatch(header.strip())
    if match is None:
        return False
    expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
    # Constant time, so response timing does not reveal how much of a forged digest was right.
    return hmac.compare_digest(expected, match.group("digest").lower())

import hashlib
import hmac

import pytest

from dashboard.github.signatures import signature_verify

# GitHub's documented example ("Validating webhook deliveries").
DOCUMENTED_SECRET = b"It's a Secret to Everybody"
DOCUMENTED_PAYLOAD = b"Hello, World!"
DOCUMENTED_HEADER = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


def test_githubs_documented_test_vector_is_accepted():
    assert signature_verify(secret=DOCUMENTED_SECRET, body=DOCUMENTED_PAYLOAD, header=DOCUMENTED_HEADER)


def test_digest_in_upper_case_is_accepted():
    header = "sha256=" + DOCUMENTED_HEADER.removeprefix("sha256=").upper()

    assert signature_verify(secret=DOCUMENTED_SECRET, body=DOCUMENTED_PAYLOAD, header=header)


def test_forged_signature_is_rejected():
    forged = hmac.new(b"guessed secret", DOCUMENTED_PAYLOAD, hashlib.sha256).hexdigest()

    assert not signature_verify(secret=DOCUMENTED_SECRET, body=DOCUMENTED_PAYLOAD, header=f"sha256={forged}")


def test_tampered_body_is_rejected():
    assert not signature_verify(secret=DOCUMENTED_SECRET, body=b"Hello, World?", header=DOCUMENTED_HEADER)


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "sha256=",
        "sha1=757107ea0eb2509fc211221cce984b8a37570b6d",
        "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e1",
        "sha256=zz7107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17,extra",
    ],
)
def test_missing_or_malformed_header_is_rejected(header: str | None):
    assert not signature_verify(secret=DOCUMENTED_SECRET, body=DOCUMENTED_PAYLOAD, header=header)


def test_empty_secret_verifies_nothing():
    header = "sha256=" + hmac.new(b"", DOCUMENTED_PAYLOAD, hashlib.sha256).hexdigest()

    assert not signature_verify(secret=b"", body=DOCUMENTED_PAYLOAD, header=header)

"""Bearer tokens for the OTLP receivers and the UI.

README "The collector": ``PROMPTPRISM_INGEST_TOKEN``, ``PROMPTPRISM_UI_TOKEN``.

One comparison, used by every listener, in constant time so that response
timing does not reveal how much of a guessed token was right.
"""

from __future__ import annotations

import hmac

AUTHORIZATION = "authorization"  # header / gRPC metadata key (gRPC keys are lowercase)
BEARER_PREFIX = "bearer "


def bearer_token(header_value: str | bytes | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` value, or None."""
    if header_value is None:
        return None
    if isinstance(header_value, bytes):
        header_value = header_value.decode("latin-1")
    text = header_value.strip()
    if text[: len(BEARER_PREFIX)].lower() != BEARER_PREFIX:
        return None
    return text[len(BEARER_PREFIX):].strip() or None


def authorized(expected: str | None, header_value: str | bytes | None) -> bool:
    """True when no token is configured, or the header carries exactly it."""
    if not expected:
        return True
    presented = bearer_token(header_value)
    if presented is None:
        return False
    return hmac.compare_digest(presented.encode("utf-8"), expected.encode("utf-8"))

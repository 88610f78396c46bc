"""The read side's failures and the one table that turns them into HTTP answers.

Every front door (the JSON API, the inspector's pages, the insight routes)
maps a failure through ``status_of``: the API answers JSON ``{"error": …}``,
the pages the styled error page, with the same status for the same failure.
"""

from __future__ import annotations

import logging

from .._logsafe import describe_store_error
from ..store.base import StoreError, StoreUnavailable

logger = logging.getLogger(__name__)


class BadArgument(ValueError):
    """The caller asked for something malformed: an id, a filter, a time (HTTP 400)."""


class NotFound(LookupError):
    """Nothing matches (HTTP 404)."""


class Ambiguous(LookupError):
    """A prefix matches more than one request (HTTP 409)."""

    def __init__(self, prefix: str, candidates: list[str], more: bool):
        listed = ", ".join(candidates) + (", …" if more else "")
        super().__init__(f"request id prefix {prefix!r} is ambiguous: it matches {listed}")
        self.candidates = candidates
        self.more = more


# Failures that become an answer; anything else is a bug and should surface.
ANSWERED_ERRORS = (BadArgument, NotFound, Ambiguous, StoreError)

# A client told the store is down may retry after this long.
RETRY_AFTER_SECONDS = 5

TITLES = {400: "Bad request", 404: "Not found", 405: "Method not allowed", 409: "Ambiguous id",
          500: "Store failure", 503: "Store unavailable"}


def status_of(error: Exception) -> int:
    if isinstance(error, BadArgument):
        return 400
    if isinstance(error, NotFound):
        return 404
    if isinstance(error, Ambiguous):
        return 409
    if isinstance(error, StoreUnavailable):
        return 503
    return 500


def message_of(error: Exception) -> str:
    """The one line a person reads; store failures are logged here (once, without content)."""
    status = status_of(error)
    # Never the store's own text: it quotes the query and the values bound into it.
    if status == 503:
        return f"store unavailable or busy, retry later ({describe_store_error(error)})"
    if status == 500:
        logger.error("read failed: %s", describe_store_error(error))
        return f"store query failed ({describe_store_error(error)})"
    return str(error)


def headers_of(error: Exception) -> dict[str, str] | None:
    return {"Retry-After": str(RETRY_AFTER_SECONDS)} if status_of(error) == 503 else None


def body_of(error: Exception) -> dict:
    """The JSON body: ``error``, and for an ambiguous prefix the candidates."""
    body: dict = {"error": message_of(error)}
    if isinstance(error, Ambiguous):
        body.update(candidates=error.candidates, more_candidates=error.more)
    return body


__all__ = ["ANSWERED_ERRORS", "Ambiguous", "BadArgument", "NotFound", "TITLES", "body_of", "headers_of",
           "message_of", "status_of"]

"""Log-safe descriptions of failures: the collector never logs prompt content.

Error messages are not safe to log as they are. ClickHouse quotes the
offending input ("Cannot parse input … before: '<row data>'"), pyarrow quotes
the value it could not convert, protobuf's JSON parser echoes field values —
and rows, values and fields hold prompts. These helpers keep what an operator
needs (which failure, where) and drop the message text; ``RateLimitedLog``
keeps a client that sends garbage in a loop from flooding the log.
"""

from __future__ import annotations

import logging
import re
import time
import traceback

_SERVER_CODE = re.compile(r"Code: (\d+)")
_SERVER_NAME = re.compile(r"\(([A-Z][A-Z0-9_]+)\)")
# Frames shown for an unexpected exception: enough to find the bug.
TRACEBACK_FRAMES = 6
# Warnings about bad payloads are logged at most once per this many seconds:
# a misconfigured client sending garbage in a loop must not flood the log.
WARNING_INTERVAL_SECONDS = 10.0


def describe_store_error(error: BaseException) -> str:
    """Server errors → code and name; transport failures → their text; else the type."""
    from .store.base import StoreUnavailable

    text = str(error)
    code, name = _SERVER_CODE.search(text), _SERVER_NAME.search(text)
    if code or "DB::Exception" in text:
        described = f"ClickHouse error {code.group(1) if code else '?'}"
        return f"{described} {name.group(1)}" if name else described
    if isinstance(error, StoreUnavailable):
        # Raised by the store for connection refused / timeouts: no row data.
        return text[:300]
    return type(error).__name__


def describe_exception(error: BaseException) -> str:
    """The exception's type and where it was raised, without its message."""
    frames = traceback.extract_tb(error.__traceback__)[-TRACEBACK_FRAMES:]
    where = " <- ".join(f"{frame.filename.rsplit('/', 1)[-1]}:{frame.lineno} {frame.name}"
                        for frame in reversed(frames))
    return f"{type(error).__name__} at {where}" if where else type(error).__name__


class RateLimitedLog:
    """Log a warning at most once per interval; count the ones suppressed."""

    def __init__(self, logger: logging.Logger, interval_seconds: float = WARNING_INTERVAL_SECONDS):
        self.logger = logger
        self.interval_seconds = interval_seconds
        self._next = 0.0
        self.suppressed = 0

    def warning(self, message: str, *args: object) -> None:
        self.log(logging.WARNING, message, *args)

    def error(self, message: str, *args: object) -> None:
        self.log(logging.ERROR, message, *args)

    def log(self, level: int, message: str, *args: object) -> None:
        now = time.monotonic()
        if now < self._next:
            self.suppressed += 1
            return
        self._next = now + self.interval_seconds
        if self.suppressed:
            message += f" ({self.suppressed} similar warnings suppressed)"
            self.suppressed = 0
        self.logger.log(level, message, *args)

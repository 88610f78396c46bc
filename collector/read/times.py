"""Times and durations as every read route and CLI verb takes them: one syntax, one parser.

A **moment** (``since=``, ``until=``) is an RFC 3339 time
(``2025-01-31T12:00:00Z``; a bare date or time is UTC), Unix seconds
(``1738324800``), ``now``, or an age counted back from now (``15m``, ``2h``,
``7d``, ``1w``). A **duration** (``bucket=``) is an age's syntax without the
"back from now" (``90s``, ``15m``, ``1d``), or plain seconds (``3600``).

Moments come back as Unix nanoseconds: the store's start times are
nanoseconds, and ``2025-01-31T12:00:00.000001Z`` must not lose its
microsecond. Pure, standard library only.
"""

from __future__ import annotations

import datetime
import re
import time

from .errors import BadArgument

NANOSECONDS = 1_000_000_000
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}

_DURATION = re.compile(r"(\d+)\s*([smhdw])")
_SECONDS = re.compile(r"\d+(\.\d+)?")

# The store keeps start times as Int64 nanoseconds (DateTime64(9)): 1970 to 2262,
# but the tables' keys (toDate, toStartOfHour) are DateTime-based and end on
# 2106-02-07: past that, ClickHouse 24.8 prunes every part of a condition
# `started_at < <a later moment>` and answers nothing (the 24.8 pass of make
# test found it). A moment outside 1970-2106, or a longer duration than any
# window, is a bad argument (400), never a query that overflows in the store
# (issue 14).
MAX_MOMENT_NS = (2**32 - 1) * 1_000_000_000
MAX_DURATION_SECONDS = 100 * 366 * 86400

MOMENT_FORMS = "an RFC 3339 time (2025-01-31T12:00:00Z), a date, Unix seconds, now, or an age such as 15m, 2h, 7d"
DURATION_FORMS = "a number of seconds or a duration such as 90s, 15m, 1h, 1d, 1w"


def now_ns() -> int:
    return time.time_ns()


def parse_duration(name: str, text: str | int) -> int:
    """``15m`` → 900; ``3600`` → 3600 (whole seconds, at least 1), or BadArgument naming ``name``."""
    value = str(text).strip()
    relative = _DURATION.fullmatch(value)
    if relative:
        seconds = int(relative.group(1)) * UNIT_SECONDS[relative.group(2)]
    elif value.isdigit():
        seconds = int(value)
    else:
        raise BadArgument(f"{name}={text!r}: expected {DURATION_FORMS}")
    if seconds < 1:
        raise BadArgument(f"{name}={text!r}: must be at least 1 second")
    if seconds > MAX_DURATION_SECONDS:
        raise BadArgument(f"{name}={text!r}: must be at most 100 years")
    return seconds


def parse_moment(name: str, text: str | int | float, *, now: int | None = None) -> int:
    """A moment (see the module) → Unix nanoseconds; ``now`` in nanoseconds (default: the clock)."""
    moment = _parse_moment(name, text, now)
    if not 0 <= moment <= MAX_MOMENT_NS:
        raise BadArgument(f"{name}={text!r}: must fall between 1970 and 2106")
    return moment


def _parse_moment(name: str, text: str | int | float, now: int | None) -> int:
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return int(text * NANOSECONDS)
    value = str(text).strip()
    current = now_ns() if now is None else int(now)
    if value == "now":
        return current
    relative = _DURATION.fullmatch(value)
    if relative:
        return current - int(relative.group(1)) * UNIT_SECONDS[relative.group(2)] * NANOSECONDS
    if _SECONDS.fullmatch(value):
        whole, _, fraction = value.partition(".")
        return int(whole) * NANOSECONDS + int((fraction or "0")[:9].ljust(9, "0"))
    try:
        moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise BadArgument(f"{name}={text!r}: expected {MOMENT_FORMS}") from None
    if moment.tzinfo is None:  # a bare date or time is read as UTC
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    delta = moment - epoch
    return (delta.days * 86400 + delta.seconds) * NANOSECONDS + delta.microseconds * 1000


def rfc3339_seconds(nanoseconds: int) -> str:
    """Unix nanoseconds → ``2025-01-31T12:00:00Z`` (whole seconds, UTC)."""
    moment = datetime.datetime.fromtimestamp(nanoseconds // NANOSECONDS, datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


__all__ = ["DURATION_FORMS", "MOMENT_FORMS", "NANOSECONDS", "UNIT_SECONDS", "now_ns", "parse_duration",
           "parse_moment", "rfc3339_seconds"]

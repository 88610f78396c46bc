"""Whether recorded spans carry content (prompt text, messages, tool definitions).

Resolution, most specific first: the ``capture_content=`` argument of a
recording call → :func:`configure_content_capture` → the
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` environment variable
(read once, on first use) → ``NO_CONTENT``. Structure, sizes and hashes are
recorded whatever the mode.

promptprism's blocks and tool definitions are *span* events, so ``SPAN_ONLY``
and ``SPAN_AND_EVENT`` (and ``true``) turn content on; ``EVENT_ONLY`` asks for
content on log events only, which promptprism does not emit, so its spans stay
content-free.
"""

from __future__ import annotations

import logging
import os

_logger = logging.getLogger(__name__)

# The content capture switch and its values (README "Instrumenting an application", content).
ENV_CAPTURE_MESSAGE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
CAPTURE_NO_CONTENT = "NO_CONTENT"
CAPTURE_SPAN_ONLY = "SPAN_ONLY"
CAPTURE_EVENT_ONLY = "EVENT_ONLY"
CAPTURE_SPAN_AND_EVENT = "SPAN_AND_EVENT"

CAPTURE_MODES = (CAPTURE_NO_CONTENT, CAPTURE_SPAN_ONLY, CAPTURE_EVENT_ONLY, CAPTURE_SPAN_AND_EVENT)
_SPAN_CONTENT_MODES = frozenset((CAPTURE_SPAN_ONLY, CAPTURE_SPAN_AND_EVENT))

_configured: str | None = None
_from_environment: str | None = None


def parse_capture_mode(value: str | bool | None) -> str:
    """``true``/``false`` (any case), a mode name, or a bool → a mode name; anything else is an error."""
    if value is None:
        return CAPTURE_NO_CONTENT
    if isinstance(value, bool):
        return CAPTURE_SPAN_ONLY if value else CAPTURE_NO_CONTENT
    normalized = value.strip().upper()
    if normalized == "TRUE":
        return CAPTURE_SPAN_ONLY
    if normalized in ("FALSE", ""):
        return CAPTURE_NO_CONTENT
    if normalized in CAPTURE_MODES:
        return normalized
    raise ValueError(f"{ENV_CAPTURE_MESSAGE_CONTENT}: unknown value {value!r}; "
                     f"use true, false or one of {', '.join(CAPTURE_MODES)}")


def configure_content_capture(mode: str | bool | None) -> None:
    """Set the process-wide capture mode; ``None`` goes back to the environment variable."""
    global _configured
    _configured = None if mode is None else parse_capture_mode(mode)


def capture_mode() -> str:
    """The effective process-wide capture mode."""
    global _from_environment
    if _configured is not None:
        return _configured
    if _from_environment is None:
        raw = os.environ.get(ENV_CAPTURE_MESSAGE_CONTENT)
        try:
            _from_environment = parse_capture_mode(raw)
        except ValueError as error:
            # A typo in an environment variable must not break the application:
            # capture nothing (the safe side) and say so once.
            _logger.warning("%s; capturing no content", error)
            _from_environment = CAPTURE_NO_CONTENT
    return _from_environment


def reread_environment() -> None:
    """Forget the cached environment value (tests, or after changing the variable at run time)."""
    global _from_environment
    _from_environment = None


def span_content_enabled(explicit: str | bool | None = None) -> bool:
    """Whether a span recorded now should carry content."""
    mode = parse_capture_mode(explicit) if explicit is not None else capture_mode()
    return mode in _SPAN_CONTENT_MODES

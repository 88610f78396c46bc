"""Correlation attributes set ambiently for every request recorded inside a block.

>>> with correlation(conversation_id="c-42", process_kind="worker"):
...     ...  # every record_llm_request here carries both attributes

Nested blocks add to (and override) the outer ones; explicit arguments of a
recording call override both.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator, Mapping

from ..wire import names

# Keyword → span attribute (README "The request span on the wire").
CORRELATION_ATTRIBUTES: Mapping[str, str] = {
    "conversation_id": names.GEN_AI_CONVERSATION_ID,
    "message_id": names.MESSAGE_ID,
    "process_kind": names.PROCESS_KIND,
    "process_id": names.PROCESS_ID,
    "run_id": names.RUN_ID,
    "run_mode": names.RUN_MODE,
    "attempt": names.ATTEMPT,
    "record_id": names.RECORD_ID,
}

_current: ContextVar[Mapping[str, str | int]] = ContextVar("promptprism_correlation", default={})


def correlation_attributes(**values: str | int | None) -> dict[str, str | int]:
    """Span attributes for correlation keywords; ``None`` values are left out."""
    attributes: dict[str, str | int] = {}
    for keyword, value in values.items():
        if value is None:
            continue
        key = CORRELATION_ATTRIBUTES.get(keyword)
        if key is None:
            raise TypeError(f"unknown correlation keyword {keyword!r}; use one of {', '.join(CORRELATION_ATTRIBUTES)}")
        attributes[key] = int(value) if keyword == "attempt" else str(value)
    return attributes


@contextmanager
def correlation(*, conversation_id: str | None = None, message_id: str | None = None,
                process_kind: str | None = None, process_id: str | None = None, run_id: str | None = None,
                run_mode: str | None = None, attempt: int | None = None,
                record_id: str | None = None) -> Iterator[Mapping[str, str | int]]:
    """Attach correlation attributes to every request recorded inside the block."""
    added = correlation_attributes(
        conversation_id=conversation_id, message_id=message_id, process_kind=process_kind,
        process_id=process_id, run_id=run_id, run_mode=run_mode, attempt=attempt, record_id=record_id,
    )
    merged = {**_current.get(), **added}
    token = _current.set(merged)
    try:
        yield merged
    finally:
        _current.reset(token)


def current_correlation() -> Mapping[str, str | int]:
    """The correlation attributes in effect here (span attribute key → value)."""
    return _current.get()

"""Captured content fields joined back from their stored items. Pure.

The write path stores each content field of a request (messages, template
variables, system instructions) split into items, each item's text once per
day in ``contents`` and the item keys in ``request_content`` (write/rows.py,
``split_content``; migration 021). Here a ``request_content`` row and the
texts of its keys become the field's JSON text again — the same JSON value
the span carried — so that nothing downstream (``request_view``, ``events``)
knows the text was stored apart.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

from ..record import CONTENT_ARRAY, CONTENT_COLUMNS, CONTENT_OBJECT, CONTENT_WHOLE

ContentKey = tuple[str, str]  # (day as YYYY-MM-DD, sha256 of the stored text)


def keys(references: Iterable[Mapping[str, Any]]) -> list[ContentKey]:
    """Every (day, key) the ``request_content`` rows point to."""
    return [(reference["content_day"], key) for reference in references
            for column in CONTENT_COLUMNS for key in reference.get(f"{column.name}_keys") or ()]


def _item(text: str, raw: int, finish_reason: str = "") -> str:
    if raw:
        return json.dumps(text, ensure_ascii=False)
    if finish_reason and text.endswith("}"):  # a message object: its finish_reason back in
        separator = "," if text.rstrip("}").rstrip() not in ("{", "") else ""
        return text[:-1] + separator + '"finish_reason":' + json.dumps(finish_reason, ensure_ascii=False) + "}"
    return text


def joined_text(reference: Mapping[str, Any], name: str, texts: Mapping[ContentKey, str]) -> str:
    """Content field ``name`` of one request as JSON text; '' when absent or when an item's text is missing."""
    form = int(reference.get(f"{name}_form") or 0)
    item_keys = reference.get(f"{name}_keys") or []
    items = [texts.get((reference["content_day"], key)) for key in item_keys]
    if any(item is None for item in items):
        return ""
    raw = list(reference.get(f"{name}_raw") or [0] * len(items))
    if form == CONTENT_WHOLE:
        return items[0] if items else ""
    if form == CONTENT_ARRAY:
        finish_reasons = list(reference.get(f"{name}_finish_reasons") or [""] * len(items))
        return "[" + ",".join(_item(text, flag, finish_reason)
                              for text, flag, finish_reason in zip(items, raw, finish_reasons)) + "]"
    if form == CONTENT_OBJECT:
        names = reference.get(f"{name}_names") or []
        return "{" + ",".join(json.dumps(member, ensure_ascii=False) + ":" + _item(text, flag)
                              for member, text, flag in zip(names, items, raw)) + "}"
    return ""


def fill(rows: Iterable[dict[str, Any]], references: Mapping[str, Mapping[str, Any]],
         texts: Mapping[ContentKey, str]) -> None:
    """Set each content field of ``rows`` (in place) from its request's reference ('' when none)."""
    for row in rows:
        reference = references.get(row["request_id"])
        for column in CONTENT_COLUMNS:
            row[column.key] = joined_text(reference, column.name, texts) if reference else ""

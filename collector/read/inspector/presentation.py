"""Request objects → what the inspector's templates lay out. Pure, no I/O.

Templates stay simple loops: proportions, colours and message shapes are
worked out here, where they can be tested without a browser.
"""

from __future__ import annotations

import datetime
import json
from typing import Any, Mapping

from ..formatting import MINUS_SIGN, byte_size, signed_byte_size, signed_count
from ..palette import layer_color, layer_style

# A block narrower than this share of the composition bar is still drawn
# (at this width) so that it can be hovered; proportions stay in the title.
MINIMUM_SEGMENT_PERCENT = 0.35


# The page's conventions: "–" for a missing value, the typographic minus sign.
def human_bytes(value: Any) -> str:
    return "–" if value is None else byte_size(int(value))


def signed_bytes(value: Any) -> str:
    return "–" if value is None else signed_byte_size(int(value), minus=MINUS_SIGN)


def signed(value: Any) -> str:
    return "–" if value is None else signed_count(int(value), minus=MINUS_SIGN)


def percent(value: Any) -> str:
    if value is None:
        return "–"
    share = float(value) * 100
    return f"{share:.1f}%" if share >= 0.1 or share == 0 else "<0.1%"


def decimal(value: Any, digits: int = 0) -> str:
    return "–" if value is None else f"{float(value):,.{digits}f}"


def plural(count: Any, singular: str, plural_form: str = "") -> str:
    """``1 message``, ``2 messages``, ``1,204 blocks`` (a missing count: ``– messages``)."""
    word = singular if count == 1 else (plural_form or singular + "s")
    return f"{number(count)} {word}"


def number(value: Any) -> str:
    return "–" if value is None else f"{int(value):,}"


def milliseconds(value: Any) -> str:
    """A duration in whole milliseconds, rounded as the CLI rounds it (``number`` cuts: 2.6 → 2)."""
    return "–" if value is None else number(round(value))


def pretty_json(text: Any) -> str:
    """Tool definitions and structured parts, indented for reading; non-JSON text unchanged."""
    if text is None:
        return ""
    if isinstance(text, str):
        try:
            value = json.loads(text)
        except ValueError:
            return text
    else:
        value = text
    return json.dumps(value, indent=2, ensure_ascii=False)


FILTERS = {
    "human_bytes": human_bytes,
    "signed_bytes": signed_bytes,
    "signed": signed,
    "percent": percent,
    "number": number,
    "milliseconds": milliseconds,
    "decimal": decimal,
    "plural": plural,
    "pretty_json": pretty_json,
}
GLOBALS = {"layer_style": layer_style, "layer_color": layer_color}


def composition(blocks: list[Mapping[str, Any]], whole: int) -> list[dict[str, Any]]:
    """Segments of a byte-proportional bar: one per block, widths in percent of ``whole``."""
    if whole <= 0:
        return []
    return [
        {
            "index": block["index"],
            "name": block["name"],
            "layer": block["layer"],
            "size": block["size"],
            "width": max(100.0 * int(block["size"]) / whole, MINIMUM_SEGMENT_PERCENT),
        }
        for block in blocks
    ]


GLOBALS["composition"] = composition


def trace_rows(requests: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per request of a trace, with growth and a bar scaled to the largest prompt."""
    if not requests:
        return []
    first_ns = min(_ns(item["started_at"]) for item in requests)
    largest = max(int(item["prompt"]["bytes"]) for item in requests) or 1
    rows = []
    for position, item in enumerate(requests, start=1):
        prompt = item["prompt"]
        blocks = prompt["blocks"] or ([{"index": 0, "name": "(unmapped)", "layer": "", "size": prompt["bytes"]}]
                                      if prompt["bytes"] else [])
        scale = 100.0 * int(prompt["bytes"]) / largest
        rows.append({
            "position": position,
            "request": item,
            "offset_ms": round((_ns(item["started_at"]) - first_ns) / 1e6),
            "segments": [
                {**segment, "width": segment["width"] * scale / 100.0}
                for segment in composition(blocks, int(prompt["bytes"]))
            ],
            "previous": item["previous"],
        })
    return rows


def layer_legend(requests: list[Mapping[str, Any]]) -> list[str]:
    """The layers of these requests' blocks, in first-seen order, for a colour legend."""
    seen: dict[str, None] = {}
    for item in requests:
        for block in item["prompt"]["blocks"]:
            seen.setdefault(block["layer"], None)
    return list(seen)


def _ns(rfc3339_text: str) -> int:
    """Nanoseconds of an RFC 3339 UTC string produced by request_view.rfc3339."""
    whole, _, fraction = rfc3339_text.rstrip("Z").partition(".")
    moment = datetime.datetime.fromisoformat(whole).replace(tzinfo=datetime.timezone.utc)
    return int(moment.timestamp()) * 1_000_000_000 + int((fraction or "0").ljust(9, "0")[:9])


def message_views(messages: Any) -> list[dict[str, Any]]:
    """Captured messages in any of the shapes instrumentations send → role + text/data parts.

    Handles the GenAI semantic-convention shape (``parts``), the provider
    shape (``content`` as a string or a list) and anything else as JSON.
    """
    if messages is None:
        return []
    if isinstance(messages, str):
        return [{"role": "raw", "parts": [{"kind": "text", "label": "text", "text": messages}], "extra": None}]
    if isinstance(messages, Mapping):
        messages = [messages]
    views = []
    for message in messages:
        if not isinstance(message, Mapping):
            views.append({"role": "?", "parts": [_data_part("value", message)], "extra": None})
            continue
        parts = []
        if isinstance(message.get("parts"), list):
            for part in message["parts"]:
                parts.append(_part(part))
        content = message.get("content")
        if isinstance(content, str):
            parts.append({"kind": "text", "label": "text", "text": content})
        elif isinstance(content, list):
            for part in content:
                parts.append(_part(part))
        for key in ("tool_calls", "function_call"):
            if message.get(key):
                parts.append(_data_part(key, message[key]))
        extra = {key: value for key, value in message.items()
                 if key not in ("role", "parts", "content", "tool_calls", "function_call")}
        views.append({"role": str(message.get("role", "?")), "parts": parts, "extra": extra or None})
    return views


def _part(part: Any) -> dict[str, Any]:
    if isinstance(part, str):
        return {"kind": "text", "label": "text", "text": part}
    if isinstance(part, Mapping):
        kind = str(part.get("type", ""))
        for key in ("content", "text"):
            if kind in ("text", "input_text", "output_text", "") and isinstance(part.get(key), str):
                return {"kind": "text", "label": kind or "text", "text": part[key]}
        return _data_part(kind or "part", part)
    return _data_part("part", part)


def _data_part(label: str, value: Any) -> dict[str, Any]:
    return {"kind": "data", "label": label, "text": json.dumps(value, indent=2, ensure_ascii=False)}


def request_page(item: Mapping[str, Any]) -> dict[str, Any]:
    """Everything request.html lays out beyond the request object itself."""
    prompt = item["prompt"]
    return {
        "command": f"promptprism prompt show {item['request_id']}",
        "composition": composition(prompt["blocks"], int(prompt["bytes"])),
        "messages": message_views(item["messages"]),
        "response_messages": message_views(item["response"]["messages"]),
    }

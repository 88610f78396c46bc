"""Attribute values as text, the way the OpenTelemetry Collector's ClickHouse
exporter writes them (pdata ``Value.AsString``: Go's encoding/json for
arrays, maps and floats). Pure.

Kept apart from ``write.rows`` so the column layout and the Go spelling of
values each stay readable on their own.
"""

from __future__ import annotations

import base64
import math
from decimal import Decimal
from typing import Any

_GO_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f",
                    "<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _go_json_string(text: str) -> str:
    # Go's encoding/json: HTML-safe escapes, other control characters as \u00XX.
    out = []
    for char in text:
        escaped = _GO_JSON_ESCAPES.get(char)
        if escaped is not None:
            out.append(escaped)
        elif ord(char) < 0x20:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _go_float(value: float) -> str:
    """A float64 as Go's JSON encoder (and pdata AsString) writes it: ES6 style."""
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    digits_text = "".join(map(str, digits)).rstrip("0") or "0"
    magnitude = abs(value)
    prefix = "-" if sign else ""
    if magnitude < 1e-6 or magnitude >= 1e21:
        power = exponent + len(digits) - 1  # exponent of the first digit
        mantissa = digits_text[0] + ("." + digits_text[1:] if len(digits_text) > 1 else "")
        return f"{prefix}{mantissa}e{'-' if power < 0 else '+'}{abs(power):02d}".replace("e-0", "e-")
    return prefix + format(abs(Decimal(repr(value))).normalize(), "f")


def _go_scalar(value: Any) -> str | None:
    """A bool, int or finite float as Go writes it, alone or inside JSON alike; None for any other value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and not (math.isnan(value) or math.isinf(value)):
        return _go_float(value)
    return None


def _go_json(value: Any) -> str:
    if value is None:
        return "null"
    scalar = _go_scalar(value)
    if scalar is not None:
        return scalar
    if isinstance(value, float):
        raise ValueError("unsupported value")  # NaN, ±Inf: Go's json.Marshal fails the same way
    if isinstance(value, (bytes, bytearray)):
        return _go_json_string(base64.b64encode(bytes(value)).decode("ascii"))
    if isinstance(value, dict):
        items = sorted((str(key), item) for key, item in value.items())
        return "{" + ",".join(f"{_go_json_string(key)}:{_go_json(item)}" for key, item in items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_go_json(item) for item in value) + "]"
    return _go_json_string(str(value))


def otel_attribute_string(value: Any) -> str:
    """One attribute value as the ClickHouse exporter stores it (pdata ``AsString``)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    scalar = _go_scalar(value)
    if scalar is not None:
        return scalar
    if isinstance(value, float):
        return f"json: unsupported value: {'NaN' if math.isnan(value) else ('+Inf' if value > 0 else '-Inf')}"
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    try:
        return _go_json(value)
    except ValueError:
        return ""  # AsString ignores json.Marshal's error and returns the empty result

"""What every convention shares: the ``Convention`` shape and how attribute values become field values. Pure."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..otlp.attribute_text import otel_attribute_string
from ..record import RequestRecord


@dataclass(frozen=True, slots=True)
class Convention:
    """How one family of span attributes fills the request record."""

    name: str
    fill: Callable[[Mapping[str, object], RequestRecord], None]
    attributes: frozenset[str] = frozenset()  # the keys it turns into fields
    prefixes: tuple[str, ...] = ()  # key prefixes it turns into fields (flattened forms)


def text(value: object) -> str:
    """A value for a text field: a string as it is, anything else as otel_traces spells it."""
    return value if value.__class__ is str else otel_attribute_string(value)


def integer(value: object) -> int | None:
    """A whole number from an int, a float without fraction or a decimal string; None otherwise."""
    if type(value) is int:
        return value
    if type(value) is float and value.is_integer():
        return int(value)
    if type(value) is str:
        try:
            return int(value)
        except ValueError:
            return None
    return None


def number(value: object) -> float | None:
    """A real number from an int, a float or a decimal string; None otherwise (booleans are not numbers)."""
    if type(value) is int or type(value) is float:
        return float(value)
    if type(value) is str:
        try:
            return float(value)
        except ValueError:
            return None
    return None


def string_list(value: object) -> list[str]:
    """A list of strings from an array, or from a JSON array as text; a lone string is a list of one."""
    if isinstance(value, list):
        return [text(item) for item in value]
    if isinstance(value, str) and value:
        try:
            parsed = json.loads(value)
        except ValueError:
            return [value]
        return string_list(parsed) if isinstance(parsed, list) else [value]
    return []


def _json_default(value: object) -> str:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return str(value)


def json_text(value: object) -> str:
    """Captured content as the record holds it: compact JSON, text unescaped, bytes as base64."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_json_default)


def parsed(value: Any) -> Any:
    """A JSON string parsed (kept as text when it is not JSON); structured values as they are."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def content_text(value: object) -> str:
    """A content attribute as JSON text: a string is taken to be JSON text already."""
    return value if value.__class__ is str else json_text(value)

"""Query parameters bound into the SQL text, for chdb builds whose ``Session.query`` takes none.

chdb 2.1.x (ClickHouse 24.8, the compose file's server version) has no
``params`` argument, and a ``SET param_x = …`` breaks its session for good
(every later statement fails). There ``{name:Type}`` placeholders are
replaced, before the query is sent, by a literal that ClickHouse reads back as
exactly the value given:

- ``String``: a quoted literal in which every byte means itself: ``\\``,
  ``'``, NUL and the other control bytes are written as escapes, so a
  trailing backslash, a quote or a tab cannot end the literal or change it;
- ``Identifier``: a back-quoted name, back-quotes and backslashes escaped;
- integer types: the integer, checked, cast to the declared type (so the
  expression's type is the one the query declared, as with real binding);
- any other type: ``CAST('<text>' AS <Type>)``.

Placeholders are found by a small lexer that skips string literals, quoted
identifiers, heredocs (``$tag$…$tag$``) and comments, the places where
ClickHouse does not substitute either. A placeholder whose name has no value
is an error, as it is in ClickHouse. ``tests/collector/store/test_inline.py``
checks, on whichever chdb is installed, that hostile values come back byte
for byte and select the same rows as ClickHouse's own binding.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from .base import StoreError

_PLACEHOLDER = re.compile(r"\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*([A-Za-z][A-Za-z0-9_]*(?:\([A-Za-z0-9_, ']*\))?)\s*\}")
_HEREDOC = re.compile(r"\$([A-Za-z0-9_]*)\$")
_INTEGER_TYPE = re.compile(r"U?Int(8|16|32|64|128|256)")
# ClickHouse's escapes in a quoted literal (its lexer reads these back byte for byte).
_LITERAL_ESCAPES = {"\\": "\\\\", "'": "\\'", "\0": "\\0", "\b": "\\b", "\f": "\\f",
                    "\r": "\\r", "\n": "\\n", "\t": "\\t"}
_LITERAL_TABLE = str.maketrans(_LITERAL_ESCAPES | {chr(code): f"\\x{code:02X}" for code in range(32)
                                                    if chr(code) not in _LITERAL_ESCAPES} | {"\x7f": "\\x7F"})


def quoted(text: str) -> str:
    """A ClickHouse string literal holding ``text`` exactly."""
    return "'" + text.translate(_LITERAL_TABLE) + "'"


def literal(value: Any, kind: str) -> str:
    """The SQL text that stands for ``value`` bound as ClickHouse type ``kind``."""
    if kind == "Identifier":
        return "`" + str(value).replace("\\", "\\\\").replace("`", "\\`") + "`"
    if value is None:
        if kind.startswith("Nullable("):
            return f"CAST(NULL AS {kind})"
        raise StoreError(f"query parameter of type {kind} is None")
    if kind == "String":
        return quoted(value if isinstance(value, str) else str(value))
    if _INTEGER_TYPE.fullmatch(kind):
        if isinstance(value, bool):
            value = int(value)
        try:
            number = int(value) if isinstance(value, int) else int(str(value), 10)
        except ValueError:
            raise StoreError(f"query parameter of type {kind} is not an integer: {str(value)[:40]!r}") from None
        return f"CAST({number} AS {kind})"
    return f"CAST({quoted(str(value))} AS {kind})"


def bind_inline(sql: str, params: Mapping[str, Any]) -> str:
    """``sql`` with every ``{name:Type}`` outside literals and comments replaced by its value's literal."""
    out: list[str] = []
    position, length = 0, len(sql)
    start = 0  # the start of the text not yet copied
    while position < length:
        char = sql[position]
        if char in "'`\"":
            position = _end_of_quoted(sql, position, char)
        elif sql.startswith("--", position):
            newline = sql.find("\n", position)
            position = length if newline < 0 else newline + 1
        elif sql.startswith("/*", position):
            end = sql.find("*/", position + 2)
            position = length if end < 0 else end + 2
        elif char == "$" and (heredoc := _HEREDOC.match(sql, position)):
            end = sql.find(heredoc.group(0), heredoc.end())
            position = length if end < 0 else end + len(heredoc.group(0))
        elif char == "{" and (placeholder := _PLACEHOLDER.match(sql, position)):
            name, kind = placeholder.group(1), placeholder.group(2)
            if name not in params:
                raise StoreError(f"query parameter {name!r} ({kind}) has no value")
            out.append(sql[start:position])
            out.append(literal(params[name], kind))
            position = start = placeholder.end()
        else:
            position += 1
    out.append(sql[start:])
    return "".join(out)


def _end_of_quoted(sql: str, position: int, quote: str) -> int:
    """The index after the literal or quoted identifier opened at ``position`` (backslash escapes, doubled quotes)."""
    index = position + 1
    while index < len(sql):
        char = sql[index]
        if char == "\\":
            index += 2
        elif char == quote:
            if index + 1 < len(sql) and sql[index + 1] == quote:
                index += 2
            else:
                return index + 1
        else:
            index += 1
    return len(sql)

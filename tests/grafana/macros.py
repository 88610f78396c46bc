"""What Grafana and the ClickHouse plugin do to a panel's SQL before it runs.

A model of grafana/clickhouse-datasource, in the order it applies them:

1. frontend ``applyConditionalAll``: ``$__conditionalAll(phrase, $var)`` becomes
   ``1=1`` when ``$var`` is All (``$__all``) or empty, else ``phrase``;
   arguments split at top-level commas;
2. Grafana's template service: ``${var:singlequote}`` → ``'a','b'``;
   ``${var:queryparam}`` → ``var-var=a&var-var=b`` (Grafana 11's scene
   variables answer it from their URL state: ``urlUtil.toUrlParams``, whose
   encoding keeps ``@:$,;`` and writes a space as ``%20``; All is ``$__all``);
   ``$var`` / ``${var}`` → the plugin's format (a list → ``'a','b'``, one
   value as is); ``$__all`` expands to every option;
3. backend macros (pkg/macros/macros.go): ``$__timeFilter(c)`` →
   ``c >= toDateTime(from) AND c <= toDateTime(to)``, ``$__timeInterval(c)`` →
   ``toStartOfInterval(toDateTime(c), INTERVAL n second)``, ``$__interval_s``,
   ``$__fromTime`` / ``$__toTime`` → ``toDateTime(seconds)`` and the ``_ms`` forms.

An unknown ``$__macro`` or variable is an error here, so a panel that would
fail in Grafana fails the test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

ALL = "$__all"


@dataclass
class Variable:
    name: str
    value: list[str] | str  # ALL, one value, or several
    options: list[str] = field(default_factory=list)

    def values(self) -> list[str]:
        if self.value == ALL or self.value == [ALL]:
            return list(self.options)
        return [self.value] if isinstance(self.value, str) else list(self.value)


def _macro_args(sql: str, open_index: int) -> tuple[list[str], int]:
    """Arguments of the call whose '(' is at open_index, split at depth-1 commas; and the index after ')'."""
    depth, start, args = 0, open_index + 1, []
    for index in range(open_index, len(sql)):
        char = sql[index]
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                args.append(sql[start:index])
                return args, index + 1
        elif char == "," and depth == 1:
            args.append(sql[start:index])
            start = index + 1
    raise ValueError("unbalanced parentheses in macro call")


def apply_conditional_all(sql: str, variables: dict[str, Variable]) -> str:
    macro = "$__conditionalAll("
    index = sql.rfind(macro)
    while index != -1:
        args, end = _macro_args(sql, index + len(macro) - 1)
        if len(args) != 2:
            raise ValueError(f"$__conditionalAll takes 2 arguments, got {len(args)}")
        phrase = args[0]
        name = re.search(r"(?<=\$\{)\w+(?=\})|(?<=\$)\w+", args[1].strip())
        if name:
            variable = variables[name.group(0)]
            if variable.value in ("", ALL) or variable.value == [ALL]:
                phrase = "1=1"
        sql = sql[:index] + phrase + sql[end:]
        index = sql.rfind(macro)
    return sql


def _singlequote(values: list[str]) -> str:
    return ",".join("'" + value.replace("'", "\\'") + "'" for value in values)


# encodeURIComponent, then AngularJS's exceptions (@ : $ , ; kept) and !'()* encoded:
# grafana/data's encodeURIComponentAsAngularJS(value, pctEncodeSpaces=true).
_ANGULAR_KEPT = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~@:$,;")


def _angular_encode(value: str) -> str:
    return "".join(chr(byte) if byte in _ANGULAR_KEPT else f"%{byte:02X}" for byte in value.encode("utf-8"))


def _queryparam(variable: Variable) -> str:
    selected = variable.value if isinstance(variable.value, list) else [variable.value]
    return "&".join(f"var-{variable.name}={_angular_encode(value)}" for value in selected)


def interpolate(sql: str, variables: dict[str, Variable]) -> str:
    def braced(match: re.Match) -> str:
        name, form = match.group(1), match.group(2)
        if name.startswith("__"):
            return match.group(0)  # built-ins (${__value.raw}) are resolved elsewhere
        values = variables[name].values()
        if form == "singlequote":
            return _singlequote(values)
        if form == "queryparam":
            return _queryparam(variables[name])
        if form is None:
            return _singlequote(values) if len(values) != 1 or isinstance(variables[name].value, list) and len(variables[name].value) > 1 else values[0]
        raise ValueError(f"format {form} not modelled")

    sql = re.sub(r"\$\{(\w+)(?::(\w+))?\}", braced, sql)

    def bare(match: re.Match) -> str:
        name = match.group(1)
        if name.startswith("__"):
            return match.group(0)
        values = variables[name].values()
        return values[0] if len(values) == 1 else _singlequote(values)

    return re.sub(r"\$(\w+)", bare, sql)


@dataclass(frozen=True)
class TimeRange:
    from_ms: int
    to_ms: int
    interval_ms: int


def expand_backend_macros(sql: str, time_range: TimeRange) -> str:
    from_s, to_s = time_range.from_ms // 1000, time_range.to_ms // 1000
    seconds = max(time_range.interval_ms // 1000, 1)
    simple = {
        "fromTime": f"toDateTime({from_s})",
        "toTime": f"toDateTime({to_s})",
        "fromTime_ms": f"fromUnixTimestamp64Milli({time_range.from_ms})",
        "toTime_ms": f"fromUnixTimestamp64Milli({time_range.to_ms})",
        "interval_s": str(seconds),
    }

    def with_column(name: str, column: str) -> str:
        if name == "timeFilter":
            return f"{column} >= toDateTime({from_s}) AND {column} <= toDateTime({to_s})"
        if name == "timeFilter_ms":
            return (f"{column} >= fromUnixTimestamp64Milli({time_range.from_ms}) AND "
                    f"{column} <= fromUnixTimestamp64Milli({time_range.to_ms})")
        if name == "timeInterval":
            return f"toStartOfInterval(toDateTime({column}), INTERVAL {seconds} second)"
        raise ValueError(f"macro $__{name} not known to the plugin")

    out, position = [], 0
    for match in re.finditer(r"\$__(\w+)", sql):
        if match.start() < position:
            continue
        name = match.group(1)
        out.append(sql[position:match.start()])
        end = match.end()
        if end < len(sql) and sql[end] == "(":
            args, end = _macro_args(sql, end)
            out.append(with_column(name, args[0].strip()))
        elif name in simple:
            out.append(simple[name])
        else:
            raise ValueError(f"macro $__{name} not known to the plugin")
        position = end
    out.append(sql[position:])
    return "".join(out)


def expand(sql: str, variables: dict[str, Variable], time_range: TimeRange) -> str:
    return expand_backend_macros(interpolate(apply_conditional_all(sql, variables), variables), time_range)


# Grafana's `percentencode` format (encodeURIComponentStrict): encodeURIComponent
# of the value's UTF-8 bytes, with !'()* encoded as well.
_URI_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~")


def percentencode(value: str) -> str:
    return "".join(chr(byte) if byte in _URI_UNRESERVED else f"%{byte:02X}" for byte in value.encode("utf-8"))


def interpolate_value(text: str, raw: str) -> str:
    """A data link's text with the clicked value in place, as Grafana formats it (`raw` or `percentencode`)."""
    def value(match: re.Match) -> str:
        form = match.group(1)
        if form == "percentencode":
            return percentencode(raw)
        if form is None:
            return raw
        raise ValueError(f"format {form} not modelled")

    return re.sub(r"\$\{__value\.raw(?::(\w+))?\}", value, text)

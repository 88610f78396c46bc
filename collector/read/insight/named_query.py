"""A named insight query and the two front doors it is rendered for.

Each query is written once with a handful of ``{{slot}}`` placeholders;
:meth:`InsightQuery.render` fills them for ``STORE`` (the collector's API:
bound ClickHouse parameters) or ``GRAFANA`` (the ClickHouse plugin's macros
and dashboard variables). The queries themselves are in ``growth_queries``,
``cache_queries`` and ``queries``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from ....wire.canonical import BYTES_PER_TOKEN  # the one ratio every estimate uses


@dataclass(frozen=True)
class Dialect:
    name: str
    slots: dict[str, str]
    # Slots that take a column argument: {{time_filter:started_at}}.
    column_slots: dict[str, str] = field(default_factory=dict)


STORE = Dialect(
    "store",
    slots={
        "db": "{db:Identifier}",
        "from": "toDateTime({since:Int64}, 'UTC')",
        "to": "toDateTime({until:Int64}, 'UTC')",
        "bucket_seconds": "{bucket_seconds:UInt32}",
        "dimension": "{dimension:String}",
        "limit": "{limit:UInt32}",
        "filters": (
            "({service:String} = '' OR service = {service:String})"
            " AND ({model:String} = '' OR model = {model:String})"
            " AND ({process:String} = '' OR process_kind = {process:String})"
        ),
        "conversation_filter": "({conversation:String} = '' OR conversation_id = {conversation:String})",
        # The hourly rollups know no conversation: with one, a query reads raw rows only.
        "conversation_unset": "({conversation:String} = '')",
    },
    column_slots={
        "time_filter": "{column} >= toDateTime({{since:Int64}}, 'UTC') AND {column} <= toDateTime({{until:Int64}}, 'UTC')",
        "bucket": "toStartOfInterval(toDateTime({column}), INTERVAL {{bucket_seconds:UInt32}} second)",
    },
)

def grafana_selection(column: str, variable: str) -> str:
    """``column`` among the values selected in the dashboard variable ``variable``; every row when All.

    The values come from captured telemetry (a service's name is whatever a
    client sent), so they reach the SQL percent-encoded (``queryparam``:
    ``var-service=a%27b&var-service=c%5C``, nothing but letters, digits and
    ``-_.~%@:$,;=&``) and are decoded by ClickHouse: no quote or backslash in a
    value can end the string literal, which ``singlequote`` (``'a\\'b'``, a
    trailing backslash left as is) does not guarantee.
    """
    values = (f"arrayMap(pair -> decodeURLFormComponent(substring(pair, position(pair, '=') + 1)), "
              f"splitByChar('&', '${{{variable}:queryparam}}'))")
    return f"$__conditionalAll({column} IN (SELECT arrayJoin({values})), ${variable})"


# Dashboard variables the Grafana rendering refers to (grafana.py defines them).
GRAFANA = Dialect(
    "grafana",
    slots={
        "db": "${database}",
        "from": "$__fromTime",
        "to": "$__toTime",
        "bucket_seconds": "$__interval_s",
        "dimension": "${dimension:singlequote}",
        # A table shows the worst offenders first; 500 rows is more than a
        # panel can usefully show and keeps the browser responsive.
        "limit": "500",
        "filters": (
            f"{grafana_selection('service', 'service')}"
            f" AND {grafana_selection('model', 'model')}"
            f" AND {grafana_selection('process_kind', 'process')}"
        ),
        # Conversations are drilled into from the inspector, not the dashboard.
        "conversation_filter": "1 = 1",
        "conversation_unset": "1 = 1",
    },
    column_slots={
        "time_filter": "$__timeFilter({column})",
        "bucket": "$__timeInterval({column})",
    },
)

_SLOT = re.compile(r"\{\{([a-z_]+)(?::([a-z_]+))?\}\}")


@dataclass(frozen=True)
class InsightQuery:
    """One named query. ``panel`` says how Grafana shows it: ``timeseries``
    queries return ``time`` first, then an optional string series column,
    then numbers; ``table`` and ``stat`` queries return rows."""

    name: str
    title: str
    description: str
    panel: str
    sql: str
    # The parameters the STORE rendering binds (besides db).
    params: tuple[str, ...]
    # Queries that read the hourly rollups: their SQL as a function of how the rolled-up
    # hours are found (hours.Plan); ``sql`` is ``build(hours.Lookup())``.
    build: Callable[[Any], str] | None = None

    def render(self, dialect: Dialect, plan: Any = None) -> str:
        """The SQL for ``dialect``; with ``plan`` (an ``hours.Known``), built for the hours it knows."""
        sql = self.build(plan) if plan is not None and self.build is not None else self.sql

        def replace(match: re.Match) -> str:
            slot, column = match.group(1), match.group(2)
            if column is not None:
                return dialect.column_slots[slot].format(column=column)
            return dialect.slots[slot]

        return _SLOT.sub(replace, sql).strip()

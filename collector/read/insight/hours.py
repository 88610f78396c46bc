"""Which hours of a window the hourly rollups serve, and which rows the rest is computed from.

The rollup job (``rollups``) recomputes whole hours from the deduplicated
rows and records each computation in ``rollup_hours`` (migration 024). A
query takes, per hour, the rows of the newest recorded computation, for the
whole hours inside its window only; every other row of the window (the
current hour, the ragged edges, hours the job has not done yet) is computed
from raw rows as before. So an answer is the raw computation's, whatever the
job's progress; the rollups only make it cheap.

A query's SQL is built by a function of a ``Plan``, which says how the
hours served by the rollups are found:

* ``Lookup`` (the Grafana panels, and the text the tests read): the SQL finds
  them itself, in a ``computed`` CTE over ``rollup_hours``;
* ``Known`` (the collector's API, CLI and overview page): the read side asked
  ``rollup_hours`` first (``ROLLED_UP_HOURS``) and the hours are constants in
  the SQL. On a small store ClickHouse spends most of a query *planning* it,
  and the CTE is planned again wherever it is referenced (a growth
  attribution referenced it through ~20 scalar subqueries): with constants the
  raw rows are read by plain time ranges, a query over a window the job has
  not computed yet has no rollup branch at all, and the demo's overview page
  plans in a fraction of the time. The newest computation of each hour is
  still read when the query runs, so a recomputation in between changes
  nothing; an hour computed in between is read raw, which gives the same answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

HOUR = 3600


@dataclass(frozen=True)
class Condition:
    """A condition on a rolled-up ``hour``: its SQL, and the same test in Python over the bound parameters."""

    sql: str
    holds: Callable[[int, Mapping[str, Any]], bool]


# Whole hours inside [from, to] (to is inclusive, as $__timeFilter).
INSIDE_WINDOW = Condition("hour >= {{from}} AND hour + 3600 <= {{to}}",
                          lambda hour, p: hour >= p["since"] and hour + HOUR <= p["until"])
# Whole hours inside one of the two periods of a growth comparison:
# [from - (to - from), from) and [from, to]; an hour is never split between them.
INSIDE_PERIODS = Condition("hour >= {{from}} - ({{to}} - {{from}}) AND hour + 3600 <= {{to}}"
                           " AND (hour + 3600 <= {{from}} OR hour >= {{from}})",
                           lambda hour, p: (hour >= p["since"] - (p["until"] - p["since"]) and hour + HOUR <= p["until"]
                                            and (hour + HOUR <= p["since"] or hour >= p["since"])))
# A chart's buckets must hold whole hours for an hour's rollup to fall in one of them.
HOUR_BUCKETS = Condition("{{bucket_seconds}} % 3600 = 0", lambda hour, p: p["bucket_seconds"] % HOUR == 0)
# The hourly rollups know no conversation: with one, a query reads raw rows only.
CONVERSATION_UNSET = Condition("{{conversation_unset}}", lambda hour, p: p["conversation"] == "")


def computed(*conditions: Condition) -> str:
    """The ``computed`` CTE: (hour, computed_at) of the newest computation of each
    hour that satisfies ``conditions``."""
    where = " AND ".join(condition.sql for condition in conditions)
    return f"""computed AS (
        SELECT hour, max(computed_at) AS computed_at
        FROM {{{{db}}}}.rollup_hours
        WHERE {where}
        GROUP BY hour
    )"""


# Rollup rows of the hours in ``computed``.
ROLLED = "(hour, computed_at) IN (SELECT hour, computed_at FROM computed)"


def outside_run(column: str, cte: str = "computed") -> str:
    """True for rows outside the run of hours in ``cte`` when that run has no holes (else true
    for all rows): constants once the scalar subqueries are computed, so the primary key and
    the day partitions prune by them."""
    return (f"({column} < assumeNotNull((SELECT min(hour) FROM {cte}))"
            f" OR {column} >= assumeNotNull((SELECT max(hour) FROM {cte})) + 3600"
            " OR assumeNotNull((SELECT count() != intDiv(toUInt32(max(hour)) - toUInt32(min(hour)), 3600) + 1"
            f" FROM {cte})))")


def not_rolled(column: str) -> str:
    """Raw rows of the hours not in ``computed`` (``column``: the row's start). The NOT IN
    alone would read every day of the window; when the computed hours are one run without
    holes (the usual case) the ranges before and after it say the same as constants, so
    only the day partitions of the window's edges are read."""
    return f"toStartOfHour({column}) NOT IN (SELECT hour FROM computed) AND {outside_run(column)}"


# The same for the two periods of a growth comparison: the hour that holds the
# period boundary is never rolled up, so each period's run is checked on its own.
PERIOD_RUNS = """computed_previous AS (SELECT hour FROM computed WHERE hour < {{from}}),
    computed_current AS (SELECT hour FROM computed WHERE hour >= {{from}})"""


def not_rolled_in_periods(column: str) -> str:
    return (f"toStartOfHour({column}) NOT IN (SELECT hour FROM computed)"
            f" AND (({column} < {{{{from}}}} AND {outside_run(column, 'computed_previous')})"
            f" OR ({column} >= {{{{from}}}} AND {outside_run(column, 'computed_current')}))")


# --- plans: how a query's SQL finds the hours the rollups serve ----------------------


class Lookup:
    """The SQL looks the hours up itself (``computed`` CTE): the Grafana panels' rendering."""

    rollups = True

    def ctes(self, *conditions: Condition, periods: bool = False) -> list[str]:
        return [computed(*conditions), *([PERIOD_RUNS] if periods else [])]

    @property
    def rolled(self) -> str:
        return ROLLED

    def not_rolled(self, column: str) -> str:
        return not_rolled(column)

    def not_rolled_in_periods(self, column: str) -> str:
        return not_rolled_in_periods(column)

    def union(self, rolled: str, raw: str) -> str:
        return f"{rolled}\n        UNION ALL\n        {raw}"


# More separate runs of rolled-up hours than this (a store the job has done
# patchily): the raw rows are found by their hour instead of by time ranges.
RANGES_MAX = 24


def _moment(second: int) -> str:
    return f"toDateTime({int(second)}, 'UTC')"


class Known(Lookup):
    """The rolled-up hours were read before the query (``ROLLED_UP_HOURS``): constants in its SQL.

    ``hours``: every computed hour of a range covering the query's (Unix
    seconds); ``params``: the query's bound parameters, against which
    ``ctes`` applies the query's conditions to pick its hours.
    """

    def __init__(self, hours: tuple[int, ...], params: Mapping[str, Any], *, raw: bool = True):
        self._all = hours
        self._params = params
        self.hours: tuple[int, ...] = ()
        # False: no raw row outside the hours (looked up first), so only the rollup branch is read
        self.raw = raw

    def ctes(self, *conditions: Condition, periods: bool = False) -> list[str]:
        self.hours = tuple(sorted(hour for hour in self._all
                                  if all(condition.holds(hour, self._params) for condition in conditions)))
        return []

    @property
    def rollups(self) -> bool:  # type: ignore[override]
        return bool(self.hours)

    @property
    def rolled(self) -> str:
        if not self.hours:
            return "0 = 1"  # (a branch ``union`` leaves out)
        listed = ", ".join(_moment(hour) for hour in self.hours)
        # the newest computation of each hour, read when the query runs
        return (f"hour >= {_moment(self.hours[0])} AND hour <= {_moment(self.hours[-1])}"
                f" AND (hour, computed_at) IN (SELECT hour, max(computed_at) FROM {{{{db}}}}.rollup_hours"
                f" WHERE hour IN ({listed}) GROUP BY hour)")

    def not_rolled(self, column: str) -> str:
        if not self.hours:
            return "1 = 1"
        runs: list[list[int]] = []  # [first hour, end of the last hour)
        for hour in self.hours:
            if runs and runs[-1][1] == hour:
                runs[-1][1] = hour + HOUR
            else:
                runs.append([hour, hour + HOUR])
        if len(runs) > RANGES_MAX:
            return f"toStartOfHour({column}) NOT IN ({', '.join(_moment(hour) for hour in self.hours)})"
        ranges = [f"{column} < {_moment(runs[0][0])}"]
        ranges += [f"({column} >= {_moment(before[1])} AND {column} < {_moment(after[0])})"
                   for before, after in zip(runs, runs[1:])]
        ranges.append(f"{column} >= {_moment(runs[-1][1])}")
        return "(" + " OR ".join(ranges) + ")"

    def not_rolled_in_periods(self, column: str) -> str:
        # the hour holding the period boundary is never among them: the ranges between them say it all
        return self.not_rolled(column)

    def union(self, rolled: str, raw: str) -> str:
        if not self.hours:
            return raw
        return super().union(rolled, raw) if self.raw else rolled


# Whether any request row lies outside the rolled-up hours in a range (``{{raw_rows}}``:
# ``Known.not_rolled``): none, and a query reads its rollup branch only.
RAW_ROWS = """
SELECT count() AS n FROM (
    SELECT 1 FROM {db:Identifier}.requests
    WHERE started_at >= toDateTime({since:Int64}, 'UTC') AND started_at <= toDateTime({until:Int64}, 'UTC')
      AND {{raw_rows}}
    LIMIT 1)
"""

# The hours computed by the rollup job in a range (Unix seconds, inclusive): read once
# before the queries that ``Known`` renders.
ROLLED_UP_HOURS = """
SELECT DISTINCT toInt64(toUnixTimestamp(hour)) AS hour
FROM {db:Identifier}.rollup_hours
WHERE hour >= toDateTime({since:Int64}, 'UTC') AND hour <= toDateTime({until:Int64}, 'UTC')
ORDER BY hour
"""

Plan = Lookup

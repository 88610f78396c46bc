"""Which hours of a window the hourly rollups serve, and which rows the rest is computed from.

The rollup job (``rollups``) recomputes whole hours from the deduplicated
rows and records each computation in ``rollup_hours`` (migration 024). A
query takes, per hour, the rows of the newest recorded computation, for the
whole hours inside its window only; every other row of the window (the
current hour, the ragged edges, hours the job has not done yet) is computed
from raw rows as before. So an answer is the raw computation's, whatever the
job's progress; the rollups only make it cheap.
"""

from __future__ import annotations


def computed(hours_inside: str, *conditions: str) -> str:
    """The ``computed`` CTE: (hour, computed_at) of the newest computation of each
    hour that satisfies ``hours_inside`` (a condition on ``hour``) and ``conditions``."""
    where = " AND ".join((hours_inside, *conditions))
    return f"""computed AS (
        SELECT hour, max(computed_at) AS computed_at
        FROM {{{{db}}}}.rollup_hours
        WHERE {where}
        GROUP BY hour
    )"""


# Whole hours inside [from, to] (to is inclusive, as $__timeFilter).
INSIDE_WINDOW = "hour >= {{from}} AND hour + 3600 <= {{to}}"
# Whole hours inside one of the two periods of a growth comparison:
# [from - (to - from), from) and [from, to]; an hour is never split between them.
INSIDE_PERIODS = ("hour >= {{from}} - ({{to}} - {{from}}) AND hour + 3600 <= {{to}}"
                  " AND (hour + 3600 <= {{from}} OR hour >= {{from}})")
# A chart's buckets must hold whole hours for an hour's rollup to fall in one of them.
HOUR_BUCKETS = "{{bucket_seconds}} % 3600 = 0"

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

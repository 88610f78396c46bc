"""Run the named insight queries against a store and shape the answers.

The SQL lives in ``queries``; this module binds parameters, runs the STORE
rendering and turns rows into the JSON the API serves (and the CLI and the
overview page show). The summaries are pure functions of those rows, so the
sentence "prompt +18 %: skills_prompt +14 %, memory +4 %" is tested without
a store.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Mapping

from ...store.base import Store
from . import hours, queries
from ..errors import BadArgument
from ..models import LIMIT_MAX
from ..times import NANOSECONDS, parse_duration, parse_moment, rfc3339_seconds
from .queries import BYTES_PER_TOKEN, DIMENSIONS, QUERIES, STORE

# Without an explicit window the insight answers are about the last week:
# the period over which prompt changes usually ship and get noticed.
DEFAULT_SINCE = "7d"
DEFAULT_PERIOD_SECONDS = 7 * 86400

# The stored range's upper bound when no window is selected (toDateTime's range ends in 2106).
ALL_TIME_UNTIL = 4_102_444_800  # 2100-01-01

# A chart reads well with a few dozen points; buckets are rounded up to one
# of these so that they line up with clock hours and days.
TARGET_BUCKETS = 48
BUCKET_STEPS = (60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 7 * 86400)

# Per-request cache rows returned by default; the aggregates cover the whole
# window whatever this is.
CACHE_ROWS_DEFAULT = 100

# A part whose share of the prompt's change is below this is noise in the
# one-line summary (it still appears in the table).
SUMMARY_MIN_CONTRIBUTION_PCT = 0.5
SUMMARY_PARTS_MAX = 5

@dataclass(frozen=True)
class Window:
    since: int  # Unix seconds, inclusive
    until: int  # Unix seconds, inclusive (as Grafana's $__timeFilter)

    @property
    def seconds(self) -> int:
        return self.until - self.since

    @classmethod
    def parse(cls, since: Any = None, until: Any = None, *, now: float | None = None) -> "Window":
        """The window ``since`` – ``until`` (``times``' syntax; ages count back from ``now``,
        Unix seconds, default the clock); without ``since`` the DEFAULT_SINCE before ``until``."""
        # Whole seconds compared with nanosecond start times: now is rounded up,
        # so that requests stored in the current second are inside the window.
        now_ns = time.time_ns() if now is None else int(now * NANOSECONDS)
        now_ns = -(-now_ns // NANOSECONDS) * NANOSECONDS
        end = -(-parse_moment("until", until, now=now_ns) // NANOSECONDS) if until not in (None, "") \
            else now_ns // NANOSECONDS
        if since in (None, ""):
            start = end - parse_duration("since", DEFAULT_SINCE)
        else:
            start = parse_moment("since", since, now=now_ns) // NANOSECONDS
        if start >= end:
            raise BadArgument("since must be earlier than until")
        return cls(start, end)

    def as_json(self) -> dict[str, Any]:
        return {"since": rfc3339_seconds(self.since * NANOSECONDS), "until": rfc3339_seconds(self.until * NANOSECONDS),
                "seconds": self.seconds}


def bucket_for(window: Window, requested: Any = None) -> int:
    """The chart bucket in seconds: as asked (``times``' duration syntax), else about TARGET_BUCKETS per window."""
    if requested not in (None, ""):
        return parse_duration("bucket", requested)
    wanted = window.seconds / TARGET_BUCKETS
    return next((step for step in BUCKET_STEPS if step >= wanted), BUCKET_STEPS[-1])


@dataclass(frozen=True)
class Filters:
    service: str = ""
    model: str = ""
    process: str = ""
    conversation: str = ""

    def as_params(self) -> dict[str, str]:
        return {"service": self.service, "model": self.model, "process": self.process,
                "conversation": self.conversation}


def _limit(value: Any, default: int) -> int:
    if value in (None, ""):
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise BadArgument(f"limit must be a whole number, got {value!r}") from None
    if not 1 <= number <= LIMIT_MAX:
        raise BadArgument(f"limit must be between 1 and {LIMIT_MAX}")
    return number


def _listing_params(window: Window, filters: Filters, bucket_seconds: int, limit: Any) -> dict[str, Any]:
    """Parameters of the cache and headroom groups: window, bucket, filters and a row limit."""
    return {"since": window.since, "until": window.until, "bucket_seconds": bucket_seconds,
            "limit": _limit(limit, CACHE_ROWS_DEFAULT), **filters.as_params()}


@dataclass(frozen=True)
class Snapshot:
    """What the read side learns about the store before it runs insight queries (two small reads).

    ``hours``: the hours the rollup job had computed in since–until (Unix
    seconds, inclusive), which ``hours.Known`` writes into the SQL as
    constants. ``event_prompts``: whether any OTLP log event could carry a
    system prompt (``genai_events`` with a contribution); without one the view
    ``prompt_requests`` is the table ``requests`` row for row (it only fills in
    prompts from those events), and the queries read the table: the view's
    join with ``event_prompts`` is most of a small query's planning.
    """

    since: int
    until: int
    hours: tuple[int, ...]
    event_prompts: bool = True

    def covers(self, since: int, until: int) -> bool:
        return self.since <= since and until <= self.until


# A row of genai_events that event_prompts reads (migration 022's view: contribution != '').
_ANY_EVENT_PROMPT = "SELECT count() AS n FROM (SELECT 1 FROM {db:Identifier}.genai_events WHERE contribution != '' LIMIT 1)"
_PROMPT_REQUESTS_VIEW = re.compile(r"(\{db:Identifier\}\.)prompt_requests\b")


def snapshot(store: Store, since: int, until: int) -> Snapshot:
    rows = store.query(hours.ROLLED_UP_HOURS, {"db": store.database, "since": since, "until": until})
    (events,) = store.query(_ANY_EVENT_PROMPT, {"db": store.database})
    return Snapshot(since, until, tuple(int(row["hour"]) for row in rows), bool(int(events["n"])))


# Queries that read a period and the period of the same length before it.
_TWO_PERIODS = frozenset({"growth_attribution", "growth_total", "growth_attribution_by_name_and_layer",
                          "growth_period_requests"})


def _rolled_range(since: int, until: int, *, periods: bool = False) -> tuple[int, int]:
    """The range whose rolled-up hours a query over since–until may read: its window, or
    with ``periods`` the previous period too."""
    return (max(0, since - (until - since)), until) if periods else (since, until)


def run(store: Store, name: str | queries.InsightQuery, params: Mapping[str, Any], *,
        known: Snapshot | None = None, lookup: bool = False) -> list[dict[str, Any]]:
    """Run one named query (STORE rendering) with exactly the parameters it declares.

    The store's ``Snapshot`` (``known``, else read now) specializes the SQL:
    the rolled-up hours as constants (``hours.Known``), and the table for the
    view when no event carries a prompt; ClickHouse plans that far faster than
    the SQL that finds both out itself. ``lookup`` runs that SQL instead (the
    Grafana panels' form), for tests that hold the two side by side.
    """
    query = QUERIES[name] if isinstance(name, str) else name
    bound = {"db": store.database}
    for key in query.params:
        bound[key] = params[key]
    if lookup:
        return _booleans(store.query(query.render(STORE), bound))
    if "since" in query.params:
        first, last = _rolled_range(int(params["since"]), int(params["until"]),
                                    periods=query.name in _TWO_PERIODS)
        if known is None or not known.covers(first, last):
            known = snapshot(store, first, last)
    plan = hours.Known(known.hours, params) if known and query.build else None
    sql = query.render(STORE, plan)
    if plan is not None and plan.hours and not _raw_rows(store, plan, first, last):
        # every request of its window lies in a rolled-up hour: the rollup branch alone
        plan = hours.Known(known.hours, params, raw=False)
        sql = query.render(STORE, plan)
    if known and not known.event_prompts:
        sql = _PROMPT_REQUESTS_VIEW.sub(r"\1requests", sql)
    return _booleans(store.query(sql, bound))


def _raw_rows(store: Store, plan: hours.Known, since: int, until: int) -> bool:
    """Whether a request row of since–until lies outside the hours ``plan`` chose (read by time ranges)."""
    sql = hours.RAW_ROWS.replace("{{raw_rows}}", plan.not_rolled("started_at"))
    (row,) = store.query(sql, {"db": store.database, "since": since, "until": until})
    return bool(int(row["n"]))


def _booleans(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for row in rows:
        for key in _BOOLEAN_COLUMNS.intersection(row):
            row[key] = bool(row[key])
    return rows


# Conditions come back from ClickHouse as 0/1; the JSON answer says true/false.
_BOOLEAN_COLUMNS = frozenset({
    "has_previous", "prefix_identical", "changed_is_new", "cache_break", "turn_before_stable",
    "provider_missed", "mapped", "cache_read_covers_prefix", "changed_in_prefix",
})


# --- growth ------------------------------------------------------------------


def _run_query(store: Store, query: queries.InsightQuery, params: Mapping[str, Any],
               known: Snapshot | None = None) -> list[dict[str, Any]]:
    return run(store, query, params, known=known)


def growth_window(store: Store, filters: Filters, *, now: float | None = None,
                  within: Window | None = None, known: Snapshot | None = None) -> tuple[Window, str]:
    """The default growth comparison: the latest part of the stored requests against the part before it.

    Up to the newest request with a system prompt (matching ``filters``, and
    inside ``within`` when given), the latest half of the stored range, at
    most ``DEFAULT_PERIOD_SECONDS``, against the period of the same length
    before it: so whenever two periods of data exist, they are what is
    compared. Returns the window and a phrase saying how it was chosen.
    """
    bounds = within or Window(0, ALL_TIME_UNTIL)
    (row,) = _run_query(store, queries.GROWTH_RANGE, {"since": bounds.since, "until": bounds.until,
                                                      **filters.as_params()}, known)
    if not row["requests"]:
        return Window.parse(None, None, now=now), "the last 7 days (no requests stored yet)"
    # Whole seconds compared with nanosecond start times: end one second after the newest.
    until = int(row["last_second"]) + 1
    # Rounded up, so that the earlier period starts at or before the oldest request.
    period = min(DEFAULT_PERIOD_SECONDS, -(-(until - int(row["first_second"])) // 2))
    if period < 1:
        return Window(until - 1, until), "the one second with requests (nothing before it to compare with)"
    if period == DEFAULT_PERIOD_SECONDS:
        basis = "the 7 days up to the newest request, against the 7 days before"
    else:
        basis = "the later half of the stored requests, against the earlier half"
    return Window(until - period, until), basis


def growth(store: Store, window: Window | None, filters: Filters, *, dimension: str = "name",
           bucket: Any = None, series: bool = True, known: Snapshot | None = None,
           attribution: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Growth attribution; ``window`` None chooses it from the stored data (``growth_window``).

    ``attribution``: its rows, already read (``growth_by_name_and_layer``)."""
    if dimension not in DIMENSIONS:
        raise BadArgument(f"dimension must be one of {', '.join(DIMENSIONS)}")
    if window is None:
        window, basis = growth_window(store, filters)
        chosen = {"window_chosen": "default", "window_basis": basis}
    else:
        chosen = {"window_chosen": "given", "window_basis": "the period asked for, against the one before"}
    bucket_seconds = bucket_for(window, bucket)
    params = {"since": window.since, "until": window.until, "bucket_seconds": bucket_seconds,
              "dimension": dimension, **filters.as_params()}
    if known is None or not known.covers(*_rolled_range(window.since, window.until, periods=True)):
        known = snapshot(store, *_rolled_range(window.since, window.until, periods=True))
    if attribution is None:
        attribution = run(store, "growth_attribution", params, known=known)
    total = total_from_attribution(attribution)
    if not attribution:  # say why: nothing stored, nothing before, or no lineage in both periods
        (periods,) = _run_query(store, queries.GROWTH_PERIOD_REQUESTS, params, known)
        total["current_requests_all"] = int(periods["current_requests"])
        total["previous_requests_all"] = int(periods["previous_requests"])
    return {
        "window": window.as_json(),
        "previous_window": Window(window.since - window.seconds, window.since).as_json(),
        **chosen,
        "dimension": dimension,
        "bucket_seconds": bucket_seconds,
        "bytes_per_token": BYTES_PER_TOKEN,
        "total": total,
        "attribution": attribution,
        # Without ``series`` (a caller that does not chart it) one query fewer.
        "series": run(store, "growth_series", params, known=known) if series else [],
        "summary": growth_summary(total, attribution),
    }


def growth_by_name_and_layer(store: Store, window: Window, filters: Filters, *, bucket: Any = None,
                              known: Snapshot | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """``growth`` by name (without its series) and by layer, both attributions read by one query."""
    if known is None or not known.covers(*_rolled_range(window.since, window.until, periods=True)):
        known = snapshot(store, *_rolled_range(window.since, window.until, periods=True))
    rows = run(store, queries.GROWTH_ATTRIBUTION_BY_NAME_AND_LAYER,
               {"since": window.since, "until": window.until, **filters.as_params()}, known=known)
    by = {breakdown: [{key: value for key, value in row.items() if key != "breakdown"}
                      for row in rows if row["breakdown"] == breakdown] for breakdown in ("name", "layer")}
    return (growth(store, window, filters, dimension="name", series=False, known=known, attribution=by["name"]),
            growth(store, window, filters, dimension="layer", bucket=bucket, known=known, attribution=by["layer"]))


def total_from_attribution(attribution: list[dict[str, Any]]) -> dict[str, Any]:
    """The whole prompt's change: per-request averages of the parts add up.

    The counts are of the requests compared: those of lineages with requests
    in both periods (``lineages_compared``); ``requests_not_compared`` were in
    a lineage seen in one period only.
    """
    previous = round(sum(row["previous_bytes"] for row in attribution), 1)
    current = round(sum(row["current_bytes"] for row in attribution), 1)
    delta = round(current - previous, 1)
    return {
        "previous_bytes": previous,
        "current_bytes": current,
        "delta_bytes": delta,
        "delta_tokens": round(delta / BYTES_PER_TOKEN, 1),
        "change_pct": round(100 * delta / previous, 2) if previous else None,
        "previous_requests": max((row["previous_requests"] for row in attribution), default=0),
        "current_requests": max((row["current_requests"] for row in attribution), default=0),
        "lineages_compared": max((row.get("lineages_compared", 0) for row in attribution), default=0),
        "requests_not_compared": max((row.get("requests_not_compared", 0) for row in attribution), default=0),
    }


def _signed_pct(value: float) -> str:
    return f"{value:+.1f} %"


def growth_summary(total: Mapping[str, Any], attribution: list[Mapping[str, Any]]) -> str:
    """``prompt +18.0 % (+2,304 B ≈ +576 tokens per request): skills_prompt +14.1 %, memory +3.9 %``.

    A part named by block has its layer beside it: ``skills_prompt (layer skills) +14.1 %``.
    """
    if not total["current_requests"]:
        current_all = total.get("current_requests_all", 0)
        previous_all = total.get("previous_requests_all", 0)
        if not current_all:
            return "no requests with a system prompt in this period"
        if not previous_all:
            return (f"{current_all} request(s) with a system prompt in this period; "
                    "no requests in the previous period to compare with")
        return (f"no lineage (same conversation, service, provider, model and process) has requests in both "
                f"periods ({current_all} now, {previous_all} before): nothing to compare")
    head = (f"prompt {_signed_pct(total['change_pct'] or 0.0)} "
            f"({total['delta_bytes']:+,.0f} B ≈ {total['delta_tokens']:+,.0f} tokens per request)")
    parts = [
        row for row in attribution
        if row["contribution_pct"] is not None and abs(row["contribution_pct"]) >= SUMMARY_MIN_CONTRIBUTION_PCT
    ]
    parts.sort(key=lambda row: -abs(row["contribution_pct"]))
    if not parts:
        return head
    named = ", ".join(f"{_part_name(row)} {_signed_pct(row['contribution_pct'])}" for row in parts[:SUMMARY_PARTS_MAX])
    return f"{head}: {named}"


def _part_name(row: Mapping[str, Any]) -> str:
    layers = row.get("layers") or ""
    if not layers or row["series"] == "(unmapped)":
        return str(row["series"])
    return f"{row['series']} (layer {layers})"


# --- cache -------------------------------------------------------------------


def cache(store: Store, window: Window, filters: Filters, *, limit: Any = None,
          bucket: Any = None, known: Snapshot | None = None) -> dict[str, Any]:
    bucket_seconds = bucket_for(window, bucket)
    params = _listing_params(window, filters, bucket_seconds, limit)
    if known is None or not known.covers(*_rolled_range(window.since, window.until)):
        known = snapshot(store, *_rolled_range(window.since, window.until))
    series = run(store, "cache_series", params, known=known)
    by_block = run(store, "cache_breaks_by_block", params, known=known)
    misordered = run(store, "cache_misordered", params, known=known)
    counts = {
        "follow_ups": sum(row["follow_ups"] for row in series),
        "breaks": sum(row["breaks"] for row in series),
        "misordered": sum(row["misordered"] for row in series),
        "provider_misses": sum(row["provider_misses"] for row in series),
    }
    return {
        "window": window.as_json(),
        "bucket_seconds": bucket_seconds,
        "bytes_per_token": BYTES_PER_TOKEN,
        "counts": counts,
        "by_block": by_block,
        "misordered": misordered,
        "series": series,
        "requests": run(store, "cache_requests", params, known=known),
        "summary": cache_summary(counts, by_block, misordered),
    }


def cache_summary(counts: Mapping[str, int], by_block: list[Mapping[str, Any]],
                  misordered: list[Mapping[str, Any]]) -> list[str]:
    """One line per finding, worst first."""
    lines = []
    for row in misordered:
        lines.append(
            f"turn block {row['block']} sits before stable block {row['before_block']} in "
            f"{row['requests']} request(s): {row['uncacheable_bytes']:,} B ≈ "
            f"{row['uncacheable_tokens']:,} tokens of stable prompt can never be cached"
        )
    if counts["follow_ups"]:
        lines.append(
            f"cache broken in {counts['breaks']} of {counts['follow_ups']} follow-up request(s) "
            "(reported cache reads short of the expected prefix, and a part of it changed since the "
            "previous request of the lineage)"
        )
    for row in by_block:
        reported = row.get("reported_cache_read_tokens")
        lines.append(
            f"cache broken by {row['block']} ({row['stability']}) {row['breaks']}×, "
            f"{row['bytes_rewritten']:,} B ≈ {row['tokens_rewritten']:,} tokens re-sent uncached; "
            f"expected prefix ≈ {row.get('expected_prefix_tokens', 0):,} tokens, reported cache read "
            + ("not reported" if reported is None else f"{reported:,} tokens") + " (averages)"
        )
    if counts["provider_misses"]:
        lines.append(
            f"provider reported far fewer cached tokens than the unchanged prefix in "
            f"{counts['provider_misses']} request(s) (cache expired, or prefix below the provider's minimum)"
        )
    if not lines:
        lines.append("no cache breaks: every follow-up request kept its cacheable prefix")
    return lines


# --- headroom ------------------------------------------------------------------


def headroom(store: Store, window: Window, filters: Filters, *, limit: Any = None,
             bucket: Any = None, known: Snapshot | None = None) -> dict[str, Any]:
    bucket_seconds = bucket_for(window, bucket)
    params = _listing_params(window, filters, bucket_seconds, limit)
    if known is None or not known.covers(*_rolled_range(window.since, window.until)):
        known = snapshot(store, *_rolled_range(window.since, window.until))
    series = run(store, "headroom_series", params, known=known)
    rows = run(store, "headroom_requests", params, known=known)
    return {
        "window": window.as_json(),
        "bucket_seconds": bucket_seconds,
        "series": series,
        "requests": rows,
        "summary": headroom_summary(series, rows),
    }


def headroom_summary(series: list[Mapping[str, Any]], rows: list[Mapping[str, Any]]) -> str:
    if not rows:
        return "no requests with a known context window in this period"
    tightest = rows[0]
    return (f"tightest request {tightest['request_id']} ({tightest['model']}): "
            f"{tightest['tokens_estimate']:,} of {tightest['context_window']:,} tokens "
            f"({tightest['used_pct']} %), {tightest['headroom_tokens']:,} tokens of headroom")


__all__ = [
    "Filters", "Snapshot", "Window", "snapshot", "bucket_for", "cache", "cache_summary", "growth",
    "growth_by_name_and_layer",
    "growth_summary", "headroom", "queries", "run", "total_from_attribution",
]

"""``promptprism growth`` and ``promptprism cache``: the insight answers of the
collector's API (``/api/insight/growth``, ``/api/insight/cache``) as text
or ``--json``.

They ask the running collector instead of opening the store: the embedded
store belongs to the collector process (one chdb data directory per process).
Standard library only, like every read command.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Mapping

from ._client import get_json

DIMENSIONS = ("name", "layer", "stability", "service", "model", "process")

# Rows of per-request detail printed under `cache --requests`.
REQUESTS_SHOWN_DEFAULT = 20


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--since", help="start of the period: 7d, 24h, 30m, Unix seconds or RFC 3339 (default: "
                                            "growth compares the later half of the stored requests, at most 7 days, "
                                            "with the half before it; cache covers the last 7 days)")
    parser.add_argument("--until", help="end of the period (default now; growth without --since/--until: "
                                        "the newest stored request)")
    parser.add_argument("--service", help="only this service")
    parser.add_argument("--model", help="only this model")
    parser.add_argument("--process", help="only this process kind (promptprism.process.kind)")
    parser.add_argument("--url", help="collector API base URL (default $PROMPTPRISM_URL or http://127.0.0.1:4380)")
    parser.add_argument("--json", action="store_true", help="print the API answer as JSON")


def register(subparsers: argparse._SubParsersAction) -> None:
    growth = subparsers.add_parser(
        "growth",
        help="which blocks made the prompt grow (this period against the one before)",
        description="Average system-prompt bytes per request in the period and in the period of the same "
        "length before it, and the blocks that account for the change.",
    )
    _add_common(growth)
    growth.add_argument("--by", choices=DIMENSIONS, default="name",
                        help="attribute the change to block name (default), layer, stability, service, model or process")
    growth.set_defaults(handler=run_growth)

    cache = subparsers.add_parser(
        "cache",
        help="cache breaks and the block that caused them",
        description="Follow-up requests whose cacheable prefix (leading static and session blocks) changed, "
        "the first block that changed, and turn blocks placed before stable blocks.",
    )
    _add_common(cache)
    cache.add_argument("--conversation", help="only this conversation id")
    cache.add_argument("--requests", type=int, nargs="?", const=REQUESTS_SHOWN_DEFAULT, default=0, metavar="N",
                       help=f"also list the newest N requests with their verdict (default {REQUESTS_SHOWN_DEFAULT})")
    cache.set_defaults(handler=run_cache)


def _params(args: argparse.Namespace) -> dict[str, Any]:
    return {"since": args.since, "until": args.until, "service": args.service, "model": args.model,
            "process": args.process}


def run_growth(args: argparse.Namespace) -> int:
    answer = get_json("/api/insight/growth", {**_params(args), "dimension": args.by}, url=args.url)
    if args.json:
        json.dump(answer, sys.stdout, indent=2)
        print()
        return 0
    print(render_growth(answer))
    return 0


def run_cache(args: argparse.Namespace) -> int:
    params = {**_params(args), "conversation": args.conversation, "limit": max(args.requests, 1)}
    answer = get_json("/api/insight/cache", params, url=args.url)
    if args.json:
        json.dump(answer, sys.stdout, indent=2)
        print()
        return 0
    print(render_cache(answer, requests_shown=args.requests))
    return 0


def _window_line(answer: Mapping[str, Any]) -> str:
    window = answer["window"]
    return f"{window['since']} – {window['until']}"


def _table(rows: list[list[str]], right_aligned: set[int]) -> list[str]:
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [cell.rjust(widths[i]) if i in right_aligned else cell.ljust(widths[i]) for i, cell in enumerate(row)]
        lines.append("  ".join(cells).rstrip())
    return lines


def _pct(value: Any) -> str:
    return "–" if value is None else f"{value:+.1f} %"


def render_growth(answer: Mapping[str, Any]) -> str:
    previous = answer["previous_window"]
    chosen = answer.get("window_basis")
    lines = [
        answer["summary"],
        f"period {_window_line(answer)} against {previous['since']} – {previous['until']}"
        + (f" ({chosen})" if answer.get("window_chosen") == "default" and chosen else "")
        + f", by {answer['dimension']}; ≈{answer['bytes_per_token']} bytes per token",
        "",
    ]
    by_name = answer["dimension"] == "name"
    rows = [[answer["dimension"], *(["layer"] if by_name else []), "previous B/req", "current B/req", "Δ B/req",
             "Δ tokens", "change", "share of prompt change"]]
    for row in answer["attribution"]:
        rows.append([
            str(row["series"]), *([str(row.get("layers") or "")] if by_name else []),
            f"{row['previous_bytes']:,.0f}", f"{row['current_bytes']:,.0f}",
            f"{row['delta_bytes']:+,.0f}", f"{row['delta_tokens']:+,.0f}", _pct(row["change_pct"]),
            _pct(row["contribution_pct"]),
        ])
    total = answer["total"]
    rows.append(["(whole prompt)", *([""] if by_name else []), f"{total['previous_bytes']:,.0f}",
                 f"{total['current_bytes']:,.0f}", f"{total['delta_bytes']:+,.0f}", f"{total['delta_tokens']:+,.0f}",
                 _pct(total["change_pct"]), _pct(total["change_pct"])])
    numbers = set(range(2 if by_name else 1, len(rows[0])))
    if len(rows) > 2:
        lines.extend(_table(rows, right_aligned=numbers))
    lines.append(f"requests compared: {total['previous_requests']} previous, {total['current_requests']} current, "
                 f"within {total.get('lineages_compared', 0)} lineage(s) with requests in both periods"
                 + (f"; {total['requests_not_compared']} in lineages seen in one period only, not compared"
                    if total.get("requests_not_compared") else ""))
    return "\n".join(lines)


def render_cache(answer: Mapping[str, Any], *, requests_shown: int = 0) -> str:
    counts = answer["counts"]
    lines = list(answer["summary"])
    lines.append(f"period {_window_line(answer)}: {counts['follow_ups']} follow-up request(s), "
                 f"{counts['breaks']} cache break(s), {counts['misordered']} with a turn block "
                 f"before stable blocks; ≈{answer['bytes_per_token']} bytes per token")
    if answer["by_block"]:
        lines.append("")
        rows = [["first changed block", "stability", "breaks", "B re-sent", "≈ tokens", "expected prefix ≈ tokens",
                 "reported cache read", "example trace"]]
        for row in answer["by_block"]:
            reported = row.get("reported_cache_read_tokens")
            rows.append([str(row["block"]), str(row["stability"]), str(row["breaks"]),
                         f"{row['bytes_rewritten']:,}", f"{row['tokens_rewritten']:,}",
                         f"{row['expected_prefix_tokens']:,}", "not reported" if reported is None else f"{reported:,}",
                         str(row["example_trace_id"])])
        lines.extend(_table(rows, right_aligned={2, 3, 4, 5, 6}))
    if answer["misordered"]:
        lines.append("")
        rows = [["turn block", "sits before", "requests", "stable B after it", "≈ tokens", "example trace"]]
        for row in answer["misordered"]:
            rows.append([str(row["block"]), str(row["before_block"]), str(row["requests"]),
                         f"{row['uncacheable_bytes']:,}", f"{row['uncacheable_tokens']:,}", str(row["example_trace_id"])])
        lines.extend(_table(rows, right_aligned={2, 3, 4}))
    if requests_shown and answer["requests"]:
        lines.append("")
        rows = [["request", "conversation", "verdict", "changed block", "expected prefix B", "≈ tokens",
                 "reported cache read"]]
        for row in answer["requests"][:requests_shown]:
            reported = row["cache_read_tokens"]
            rows.append([str(row["request_id"]), str(row["conversation_id"]), str(row["verdict"]),
                         str(row["changed_block"] or "–"), f"{row['expected_prefix_bytes']:,}",
                         f"{row['expected_prefix_tokens']:,}", "not reported" if reported is None else f"{reported:,}"])
        lines.extend(_table(rows, right_aligned={4, 5, 6}))
        lines.append("expected prefix: tool definitions and the leading static and session blocks; a break is a "
                     "reported cache read short of it with a part of it changed since the previous request of "
                     "the lineage")
    return "\n".join(lines)

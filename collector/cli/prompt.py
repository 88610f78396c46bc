"""``promptprism prompt show|diff|list``: one request, two compared, or many listed.

They ask the running collector's JSON API (``PROMPTPRISM_URL``) instead of
opening the store, because the embedded store belongs to the collector
process (one chdb data directory per process). Standard library only.
Every failure is one line and a non-zero exit: unknown or ambiguous id
(with candidates), collector unreachable, bad argument.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any, Iterable, Sequence
from urllib.parse import quote

from ..read.formatting import byte_size, signed_byte_size, signed_count
from . import CommandError
from ._client import get_json

# The shortest prefix the API accepts (collector.read.lookups.REQUEST_ID_PREFIX_MIN);
# checked here too so a typo is named without a round trip.
_REQUEST_ID = re.compile(r"[0-9a-fA-F]{4,16}")

# A table cell wider than this is cut with "…": block and service names are
# short in practice, and a table that wraps is harder to read than a cut name.
CELL_WIDTH_MAX = 32



def _request_id(text: str) -> str:
    if not _REQUEST_ID.fullmatch(text or ""):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a request id: give the span id (16 hex characters) or at least 4 of its first characters"
        )
    return text.lower()


def register(subparsers: argparse._SubParsersAction) -> None:
    prompt = subparsers.add_parser("prompt", help="show, compare or list recorded LLM requests",
                                   description="Read recorded LLM requests from the running collector's API.")
    verbs = prompt.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True

    show = verbs.add_parser("show", help="one request: its prompt blocks with byte and token share",
                            description="One request's prompt, block by block, with byte and token share.")
    show.add_argument("id", type=_request_id, help="span id or a unique prefix of at least 4 characters")
    show.add_argument("--content", action="store_true", help="also print each block's text")
    show.set_defaults(handler=run_show)

    diff = verbs.add_parser("diff", help="two requests compared block by block, the change's cause first",
                            description="Block-level diff from request A to request B: the blocks responsible "
                                        "for the largest byte change come first. With one id, B is compared "
                                        "with the request before it in its lineage (same conversation, service, "
                                        "provider, model and process kind; without a conversation: trace and "
                                        "process).")
    diff.add_argument("ids", type=_request_id, nargs="+", metavar="[A] B",
                      help="the earlier request A (default: B's previous request) and the later request B "
                           "(span ids or prefixes)")
    diff.set_defaults(handler=run_diff)

    listing = verbs.add_parser("list", help="recent requests, newest first, with filters",
                               description="Recent requests, newest first.")
    listing.add_argument("--service", help="only this service")
    listing.add_argument("--model", help="only this model (requested or answered)")
    listing.add_argument("--conversation", help="only this conversation id")
    listing.add_argument("--message-id", dest="message_id", help="only requests caused by this user message")
    listing.add_argument("--process", help="only this process kind or id; KIND:ID for both")
    listing.add_argument("--run-id", dest="run_id", help="only this batch/workflow run")
    listing.add_argument("--since", help="from: RFC 3339, a date, Unix seconds or an age (15m, 2h, 7d)")
    listing.add_argument("--until", help="until (same forms as --since)")
    listing.add_argument("--limit", type=int, default=None, help="at most this many (default 50, up to 1000)")
    listing.add_argument("--cursor", help="continue after the previous page (the cursor it printed)")
    listing.set_defaults(handler=run_list)

    for parser in (prompt, show, diff, listing):
        if parser is not prompt:
            parser.add_argument("--json", action="store_true", help="print the API answer as JSON")
            parser.add_argument("--url", help="collector API base URL (default $PROMPTPRISM_URL or "
                                              "http://127.0.0.1:4380)")


# --- formatting ----------------------------------------------------------------
# The terminal's conventions: "-" for a missing value, a missing change is none.

def human_bytes(value: Any) -> str:
    return "-" if value is None else byte_size(int(value))


def signed_bytes(value: Any) -> str:
    return signed_byte_size(int(value or 0))


def signed(value: Any) -> str:
    return signed_count(int(value or 0))


def percent(value: Any) -> str:
    return "-" if value is None else f"{float(value) * 100:.1f}%"


def number(value: Any) -> str:
    return "-" if value is None else f"{int(value):,}"


def _cell(value: Any) -> str:
    text = " ".join(str(value).split())  # captured names may hold newlines
    return text if len(text) <= CELL_WIDTH_MAX else text[: CELL_WIDTH_MAX - 1] + "…"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], right: Iterable[int] = ()) -> str:
    """Columns padded to their widest cell; ``right`` lists the right-aligned (numeric) columns."""
    right = set(right)
    cells = [[_cell(value) for value in row] for row in rows]
    widths = [max([len(header)] + [len(row[column]) for row in cells]) for column, header in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(value.rjust(widths[column]) if column in right else value.ljust(widths[column])
                         for column, value in enumerate(values)).rstrip()

    return "\n".join([line(headers)] + [line(row) for row in cells])


def render_show(request: dict[str, Any], with_content: bool) -> str:
    prompt = request["prompt"]
    usage = request["usage"]
    lines = [
        f"request {request['request_id']}  trace {request['trace_id']}",
        f"{request['service']} · {request['provider']} {request['operation']} · {request['model']} · "
        f"{request['started_at']} · {number(round(request['duration_ms']))} ms",
        f"prompt {human_bytes(prompt['bytes'])} ≈{number(prompt['tokens_estimate'])} tokens (estimate, "
        f"{request['token_estimate_method']}) · "
        + (f"{len(prompt['blocks'])} blocks" if prompt["mapped"] else f"UNMAPPED: {prompt['unmapped_reason'] or 'no block map'}")
        + (f" · template {prompt['template']['name']} ({prompt['template']['origin']})" if prompt["template"]["name"] else ""),
        f"usage: in {number(usage['input_tokens'])} · out {number(usage['output_tokens'])} · "
        f"cache read {number(usage['cache_read_tokens'])} · cache write {number(usage['cache_creation_tokens'])}",
    ]
    previous = request.get("previous")
    if previous:
        lines.append(f"previous {previous['request_id']} ({previous['basis']}): prompt "
                     f"{signed_bytes(previous['prompt_bytes_delta'])}, request {signed_bytes(previous['request_bytes_delta'])}")
    for problem in prompt["problems"]:
        lines.append(f"problem: {problem}")
    if prompt["mapped"] and prompt["blocks"]:
        token_basis = "input" if prompt["token_share_basis"] == "input_tokens" else "est."
        lines += ["", table(
            ["#", "block", "layer", "stability", "source", "bytes", "bytes%", "≈tokens", f"tokens% ({token_basis})"],
            [[block["index"], block["name"], block["layer"], block["stability"], block["source"],
              number(block["size"]), percent(block["byte_share"]), number(block["tokens_estimate"]),
              percent(block["token_share"])] for block in prompt["blocks"]],
            right=(0, 5, 6, 7, 8),
        )]
    tools = request["tools"]
    lines += ["", f"tools: {len(tools)}" + (" (" + ", ".join(f"{tool['name']} {human_bytes(tool['size'])}"
                                                             for tool in tools) + ")" if tools else "")]
    lines.append(f"messages: {request['messages_count']} · response: "
                 f"{', '.join(request['response']['finish_reasons']) or '-'} · request body {human_bytes(request['request_bytes'])}")
    if with_content:
        lines.append("")
        if prompt["mapped"] and prompt["blocks"]:
            for block in prompt["blocks"]:
                lines.append(f"── #{block['index']} {block['name']} ({block['layer']}, {block['stability']}, "
                             f"{block['source']}) {human_bytes(block['size'])}"
                             + (" · redacted" if block.get("redacted") else "") + " ──")
                lines.append(block["content"] if block["content"] is not None else "(content not captured)")
        else:
            lines.append("── whole prompt ──")
            lines.append(prompt["text"] if prompt["text"] is not None else "(content not captured)")
    return "\n".join(lines)


def render_diff(diff: dict[str, Any]) -> str:
    a, b = diff["a"], diff["b"]
    lines = [
        f"a {a['request_id']}  {a['started_at']}  prompt {human_bytes(a['prompt_bytes'])}",
        f"b {b['request_id']}  {b['started_at']}  prompt {human_bytes(b['prompt_bytes'])}",
        f"prompt {signed_bytes(diff['prompt_bytes_delta'])} (≈{signed(diff['tokens_delta_estimate'])} tokens, estimate)"
        f" · request body {signed_bytes(diff['request_bytes_delta'])}"
        + (" · identical prompts" if diff["identical_prompt"] else ""),
    ]
    if diff.get("a_chosen_as") == "previous":
        lines.append("a is b's previous request in its lineage")
    if not diff.get("same_lineage", True):
        lines.append(f"note: a and b are not in the same lineage ({a['service']} · {a['model']} against "
                     f"{b['service']} · {b['model']}): two different streams of requests")
    if diff["responsible"]:
        lines.append(f"responsible: {diff['responsible']}")
    if diff["blocks"]:
        def position(entry):
            before = "-" if entry["index_a"] is None else f"#{entry['index_a']}"
            after = "-" if entry["index_b"] is None else f"#{entry['index_b']}"
            return f"{before}→{after}"

        lines += ["", table(
            ["change", "block", "layer", "stability", "position", "a", "b", "Δ bytes", "Δ≈tokens"],
            [[entry["status"], entry["name"], entry["layer"], entry["stability"], position(entry),
              human_bytes(entry["size_a"]), human_bytes(entry["size_b"]), signed(entry["bytes_delta"]),
              signed(entry["tokens_delta_estimate"])] for entry in diff["blocks"]],
            right=(5, 6, 7, 8),
        )]
    else:
        lines.append("no block differs")
    lines.append(f"unchanged blocks: {diff['unchanged_count']}")
    tools = diff["tools"]
    changes = ([f"+{tool['name']}" for tool in tools["added"]] + [f"-{tool['name']}" for tool in tools["removed"]]
               + [f"~{tool['name']} {signed_bytes(tool['bytes_delta'])}" for tool in tools["changed"]])
    lines.append("tools: " + (", ".join(changes) if changes else "same"))
    return "\n".join(lines)


def render_list(requests: list[dict[str, Any]]) -> str:
    if not requests:
        return "no requests match"
    return table(
        ["started", "request", "trace", "service", "process", "model", "prompt", "request", "in tok", "map"],
        [[item["started_at"][:19].replace("T", " "), item["request_id"], item["trace_id"],
          item["service"], " ".join(part for part in (item["process"]["kind"], item["process"]["id"]) if part) or "-",
          item["model"], human_bytes(item["prompt"]["bytes"]), human_bytes(item["request_bytes"]),
          number(item["usage"]["input_tokens"]),
          f"{item['prompt']['block_count']} blocks" if item["prompt"]["mapped"] else "unmapped"]
         for item in requests],
        right=(6, 7, 8),
    )


# --- handlers --------------------------------------------------------------------

def _print(answer: Any, as_json: bool, render) -> int:
    if as_json:
        json.dump(answer, sys.stdout, indent=2, ensure_ascii=False)
        print()
    else:
        print(render(answer))
    return 0


def run_show(args: argparse.Namespace) -> int:
    answer = get_json(f"/api/requests/{quote(args.id)}", url=args.url)
    return _print(answer, args.json, lambda request: render_show(request, args.content))


def run_diff(args: argparse.Namespace) -> int:
    if len(args.ids) > 2:
        raise CommandError(f"give one or two request ids, not {len(args.ids)}")
    *earlier, later = args.ids
    answer = get_json("/api/diff", {"a": earlier[0] if earlier else None, "b": later}, url=args.url)
    return _print(answer, args.json, render_diff)


def run_list(args: argparse.Namespace) -> int:
    if args.limit is not None and args.limit < 1:
        raise CommandError(f"--limit {args.limit}: must be at least 1")
    params = {name: getattr(args, name) for name in
              ("service", "model", "conversation", "message_id", "process", "run_id", "since", "until", "limit",
               "cursor")}
    answer = get_json("/api/requests", params, url=args.url)
    _print(answer, args.json, lambda listing: render_list(listing["requests"]))
    if not args.json:
        print(list_footer(answer), file=sys.stderr)
    return 0


def list_footer(listing: dict[str, Any]) -> str:
    """``3 of 120 requests; more: --cursor …`` (on stderr, so a pipe gets the table alone)."""
    total = f"{listing['total']:,}" if listing.get("total_exact", True) else f"more than {listing['total']:,}"
    line = f"{len(listing['requests']):,} of {total} requests"
    if listing.get("next_cursor"):
        line += f"; next page: --cursor {listing['next_cursor']}"
    return line

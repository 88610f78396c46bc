"""Store rows → the request objects of the JSON API (README "Reading: API, inspector, CLI"; the diff between two is ``diff``).

Pure functions, no I/O: ``queries`` fetches rows, this module shapes them,
and the API, the inspector and (through the API) the CLI show the result.

Rows read back from the store are not trusted blindly: a block's byte range
is checked against the prompt before any text is sliced with it, and a range
that does not fit is reported in ``problems`` instead of raising.

A block's or tool's ``size`` and ``sha256`` describe the original bytes.
Text the sender's redaction hook changed is shown as stored, flagged
``redacted``, and not checked against them: it was never those bytes.
"""

from __future__ import annotations

import datetime
import hashlib
from typing import Any, Callable, Iterable, Mapping

from ...wire.canonical import BYTES_PER_TOKEN
from ...wire.canonical import tokens_in_bytes as estimate_tokens
from ..conventions import parsed
from ..conventions.system_prompt import instructions_text
from ..record import RECORD_COLUMNS, REQUEST_COLUMNS, Column
from .lineage import describe as describe_lineage
from .lineage import lineage_key

# Every estimated number carries "estimate" in its name; provider-reported
# usage is shown apart from it.
TOKEN_ESTIMATE_METHOD = f"{BYTES_PER_TOKEN} bytes per token"


def rfc3339(nanoseconds: int) -> str:
    """Unix nanoseconds → RFC 3339 in UTC with nanosecond precision."""
    seconds, remainder = divmod(int(nanoseconds), 1_000_000_000)
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{remainder:09d}Z"


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 6) if whole > 0 else None


def _parse_json_text(text: str) -> Any:
    """Captured content arrives as JSON text; anything else is kept as the raw string."""
    return parsed(text) if text else None


# --- fields shown as declared (record.py) --------------------------------------

def _api_value(column: Column) -> Callable[[Any], Any]:
    """How a stored value is shown: content parsed from its JSON text, arrays and maps as lists and dicts."""
    if column.content:
        return _parse_json_text
    if column.type == "Bool":
        return bool
    if column.type.startswith("Array("):
        return lambda value: list(value or [])
    if column.type.startswith("Map("):
        return lambda value: dict(value or {})
    return lambda value: value


_Path = tuple[str, tuple[str, ...], str, Callable[[Any], Any]]  # (row key, parent keys, key, shown as)


def _paths(columns: Iterable[Column], *, first_only: bool) -> tuple[_Path, ...]:
    found = []
    for column in columns:
        for path in column.api[:1] if first_only else column.api:
            *parents, leaf = path.split(".")
            found.append((column.key, tuple(parents), leaf, _api_value(column)))
    return tuple(found)


# A summary shows each summary column at its first path, a full request every column at all of them.
_SUMMARY_PATHS = _paths((column for column in REQUEST_COLUMNS if column.summary), first_only=True)
_REQUEST_PATHS = _paths(RECORD_COLUMNS, first_only=False)  # content too (read.content fills it)


def _declared(row: Mapping[str, Any], paths: tuple[_Path, ...], into: dict[str, Any]) -> dict[str, Any]:
    """``into`` with each declared field of ``row`` set at its API path."""
    for key, parents, leaf, shown in paths:
        node = into
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = shown(row.get(key))
    return into


# --- summaries ---------------------------------------------------------------

def summary(row: Mapping[str, Any]) -> dict[str, Any]:
    """A list entry: enough to choose a request, no content."""
    return _declared(row, _SUMMARY_PATHS, {
        "started_at": rfc3339(row["started_at_ns"]),
        "duration_ms": round(int(row["duration_ns"]) / 1e6, 3),
        "prompt": {
            "bytes": row["prompt_bytes"],
            "sha256": row["prompt_sha256"],
            "tokens_estimate": estimate_tokens(row["prompt_bytes"]),
            "mapped": bool(row["mapped"]),
            "unmapped_reason": row["unmapped_reason"],
            "template": {"name": row["template_name"], "origin": row["template_origin"]},
            "block_count": row["block_count"],
        },
    })


# --- predecessors ------------------------------------------------------------

def previous_requests(
    targets: Iterable[Mapping[str, Any]], candidates: Iterable[Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """For each target row, the request just before it in its lineage (``lineage``).

    The lineage is the conversation with the same service, provider, model and
    process kind; without a conversation id (many agent loops set none), the
    trace with the same service, provider, model and process. ``basis`` says
    which of the two it was.
    """
    targets = list(targets)
    pool: dict[str, Mapping[str, Any]] = {}
    for row in [*candidates, *targets]:
        pool[row["request_id"]] = row

    def order(row: Mapping[str, Any]) -> tuple[int, str]:
        return int(row["started_at_ns"]), row["request_id"]

    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for row in pool.values():
        groups.setdefault(lineage_key(row), []).append(row)
    for members in groups.values():
        members.sort(key=order)

    found: dict[str, dict[str, Any]] = {}
    for target in targets:
        key = lineage_key(target)
        members = groups.get(key, [])
        position = next((i for i, row in enumerate(members) if row["request_id"] == target["request_id"]), None)
        if not position:  # None (absent) or 0 (first of its lineage)
            continue
        before = members[position - 1]
        found[target["request_id"]] = {
            "request_id": before["request_id"],
            "trace_id": before["trace_id"],
            "started_at": rfc3339(before["started_at_ns"]),
            "basis": key[0],
            "prompt_bytes": before["prompt_bytes"],
            "request_bytes": before["bytes_total"],
            "prompt_bytes_delta": int(target["prompt_bytes"]) - int(before["prompt_bytes"]),
            "request_bytes_delta": int(target["bytes_total"]) - int(before["bytes_total"]),
            "tokens_delta_estimate": estimate_tokens(target["prompt_bytes"]) - estimate_tokens(before["prompt_bytes"]),
        }
    return found


# --- full request objects ----------------------------------------------------

def content_key(row: Mapping[str, Any]) -> tuple[str, str]:
    """Where a block or tool row's text is in ``contents``: (day, sha256 of
    the stored text). A row whose text is stored under its own ``sha256``
    (the text as sent: since migration 040 every such row), a row written
    before migration 005 and the blocks ``events`` builds have no
    content_sha256; their text is under ``sha256``."""
    return row["day"], row.get("content_sha256") or row["sha256"]


def request_object(
    row: Mapping[str, Any],
    block_rows: list[Mapping[str, Any]],
    tool_rows: list[Mapping[str, Any]],
    contents: Mapping[tuple[str, str], str],
    previous: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One request object from its ``requests`` row, block and tool rows and their content."""
    base = summary(row)
    return _declared(row, _REQUEST_PATHS, {
        **base,
        "prompt": _prompt(row, block_rows, contents, base["usage"]),
        "tools": [_tool(tool, contents) for tool in tool_rows],
        "lineage": describe_lineage(row),
        "previous": dict(previous) if previous else None,
        "token_estimate_method": TOKEN_ESTIMATE_METHOD,
    })


def _tool(tool: Mapping[str, Any], contents: Mapping[tuple[str, str], str]) -> dict[str, Any]:
    content = contents.get(content_key(tool))
    return {
        "index": tool["index"],
        "name": tool["name"],
        "size": tool["size"],
        "sha256": tool["sha256"],
        "tokens_estimate": estimate_tokens(tool["size"]),
        "content": content,
        "redacted": content is not None and bool(tool.get("redacted")),
    }


def _block(block: Mapping[str, Any], contents: Mapping[tuple[str, str], str]) -> dict[str, Any]:
    content = contents.get(content_key(block))
    return {
        "index": block["index"],
        "name": block["name"],
        "layer": block["layer"],
        "stability": block["stability"],
        "source": block["source"],
        "start": block["start"],
        "end": block["end"],
        "size": block["size"],
        "sha256": block["sha256"],
        "content": content,
        # Only text can be redacted: a block whose text was not stored is not.
        "redacted": content is not None and bool(block.get("redacted")),
        "problems": [],
    }


def _prompt(
    row: Mapping[str, Any],
    block_rows: list[Mapping[str, Any]],
    contents: Mapping[tuple[str, str], str],
    usage: Mapping[str, Any],
) -> dict[str, Any]:
    prompt_bytes = int(row["prompt_bytes"])
    problems: list[str] = []
    blocks = [_block(block, contents) for block in block_rows]
    ranges_ok = check_ranges(blocks, prompt_bytes, problems)
    _check_contents(blocks)

    text = None
    if blocks and ranges_ok and all(block["content"] is not None and not block["problems"] for block in blocks):
        text = "".join(block["content"] for block in blocks)
    else:
        # An unmapped prompt, or blocks whose text was not stored: the span's
        # system instructions carry the whole prompt when content was captured.
        candidate = _utf8(instructions_text(row["system_instructions"]) if row["system_instructions"] else None)
        if candidate is not None and len(candidate[1]) == prompt_bytes:
            text = candidate[0]
            if ranges_ok:
                _fill_from_text(blocks, candidate[1])
    # Text with redacted blocks in it is not the prompt the hash describes.
    redacted = text is not None and any(block["redacted"] for block in blocks)
    if text is not None and row["prompt_sha256"] and not redacted:
        if hashlib.sha256(text.encode("utf-8")).hexdigest() != row["prompt_sha256"]:
            problems.append("prompt text does not match the recorded prompt sha256")

    # Token share is against the request's input tokens as the provider
    # reported them when it did, else against the estimate of the whole body.
    if usage.get("input_tokens"):
        token_basis, token_whole = "input_tokens", int(usage["input_tokens"])
    elif int(row["bytes_total"] or 0) > 0:
        token_basis, token_whole = "request_bytes_estimate", estimate_tokens(row["bytes_total"])
    else:
        token_basis, token_whole = "prompt_bytes_estimate", estimate_tokens(prompt_bytes)
    for block in blocks:
        size = int(block["size"])
        block["tokens_estimate"] = estimate_tokens(size)
        block["byte_share"] = _share(size, prompt_bytes)
        block["token_share"] = _share(block["tokens_estimate"], token_whole)

    return {
        "bytes": prompt_bytes,
        "sha256": row["prompt_sha256"],
        "tokens_estimate": estimate_tokens(prompt_bytes),
        "mapped": bool(row["mapped"]),
        "unmapped_reason": row["unmapped_reason"],
        "template": {"name": row["template_name"], "origin": row["template_origin"]},
        "declared_block_count": row["declared_block_count"],
        "block_count": row["block_count"],
        "content_captured": text is not None,
        "text": text,
        "redacted": redacted,
        "token_share_basis": token_basis,
        "blocks": blocks,
        "problems": problems,
    }


def check_ranges(blocks: list[dict[str, Any]], prompt_bytes: int, problems: list[str]) -> bool:
    """Check persisted byte ranges before anything slices with them.

    Each bad range is noted on its block and in ``problems``; returns whether
    the blocks tile ``[0, prompt_bytes)`` exactly.
    """
    ok = True
    expected_start: int | None = 0
    for block in blocks:
        start, end, size = int(block["start"]), int(block["end"]), int(block["size"])
        complaint = None
        if not 0 <= start < end <= prompt_bytes:
            complaint = f"byte range [{start}, {end}) does not fit a {prompt_bytes}-byte prompt"
        elif size != end - start:
            complaint = f"size {size} does not match byte range [{start}, {end})"
        elif expected_start is not None and start != expected_start:
            complaint = f"starts at byte {start}, the previous block ended at {expected_start}"
        if complaint:
            ok = False
            block["problems"].append(complaint)
            problems.append(f"block {block['index']} ({block['name']}): {complaint}")
        # After a bad block the next one is not blamed for it: one fault, one report.
        expected_start = None if complaint else end
    if blocks and ok and expected_start != prompt_bytes:
        ok = False
        problems.append(f"blocks end at byte {expected_start}, the prompt has {prompt_bytes} bytes")
    return ok


def _check_contents(blocks: list[dict[str, Any]]) -> None:
    for block in blocks:
        content = block["content"]
        if content is None or block["redacted"]:  # redacted text is not the bytes size and sha256 describe
            continue
        data = content.encode("utf-8")
        if len(data) != int(block["size"]):
            block["problems"].append(f"stored text is {len(data)} bytes, the block says {block['size']}")
        elif block["sha256"] and hashlib.sha256(data).hexdigest() != block["sha256"]:
            block["problems"].append("stored text does not match the block's sha256")


def _fill_from_text(blocks: list[dict[str, Any]], data: bytes) -> None:
    """Slice missing block text out of the whole prompt by UTF-8 byte range (ranges already checked)."""
    for block in blocks:
        if block["content"] is not None:
            continue
        piece = data[int(block["start"]):int(block["end"])]
        try:
            content = piece.decode("utf-8")
        except UnicodeDecodeError:
            block["problems"].append(f"byte range [{block['start']}, {block['end']}) splits a UTF-8 character")
            continue
        if block["sha256"] and hashlib.sha256(piece).hexdigest() != block["sha256"]:
            block["problems"].append("the system prompt's text at this range does not match the block's sha256")
            continue
        block["content"] = content


def _utf8(text: str | None) -> tuple[str, bytes] | None:
    """Text and its UTF-8 bytes; None when there is none (or JSON escaped half a character)."""
    if text is None:
        return None
    try:
        return text, text.encode("utf-8")
    except UnicodeEncodeError:
        return None

"""The block-level diff between two request objects (``GET /api/diff``). Pure, no I/O.

Blocks are paired by name and position; what differs is listed largest byte
change first, so a prompt that grew names the block responsible at the top.
Sizes and hashes are always there, so the diff works without captured text.
"""

from __future__ import annotations

import difflib
from difflib import SequenceMatcher
from typing import Any, Mapping

from .request_view import TOKEN_ESTIMATE_METHOD, estimate_tokens

# A content diff of a changed block is for reading, not for patching; past
# this many lines the reader wants the whole texts side by side instead.
CONTENT_DIFF_MAX_LINES = 400

# Name of the single pseudo-block that stands for an unmapped prompt without
# even its whole-prompt block (no text captured).
WHOLE_PROMPT_BLOCK_NAME = "(whole prompt)"


# --- diff --------------------------------------------------------------------

def _diff_blocks(request: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    prompt = request["prompt"]
    if prompt["blocks"]:
        return prompt["blocks"]
    if prompt["bytes"] == 0:
        return []
    # An unmapped prompt is compared as one block, on its hash alone if need be.
    return [{
        "index": 0, "name": WHOLE_PROMPT_BLOCK_NAME, "layer": "", "stability": "", "source": "",
        "size": prompt["bytes"], "sha256": prompt["sha256"], "content": prompt["text"],
    }]


def _entry(status: str, block_a: Mapping[str, Any] | None, block_b: Mapping[str, Any] | None,
           moved: bool = False) -> dict[str, Any]:
    either = block_b or block_a
    size_a = int(block_a["size"]) if block_a else 0
    size_b = int(block_b["size"]) if block_b else 0
    entry = {
        "status": status,
        "name": either["name"],
        "layer": either["layer"],
        "stability": either["stability"],
        "source": either["source"],
        "index_a": block_a["index"] if block_a else None,
        "index_b": block_b["index"] if block_b else None,
        "moved": moved,
        "size_a": size_a if block_a else None,
        "size_b": size_b if block_b else None,
        "bytes_delta": size_b - size_a,
        "tokens_delta_estimate": estimate_tokens(size_b) - estimate_tokens(size_a),
        "sha256_a": block_a["sha256"] if block_a else None,
        "sha256_b": block_b["sha256"] if block_b else None,
        "content_diff": None,
    }
    if status in ("resized", "changed") and block_a.get("content") is not None and block_b.get("content") is not None:
        lines = list(difflib.unified_diff(
            block_a["content"].splitlines(), block_b["content"].splitlines(), "a", "b", lineterm="", n=2,
        ))
        entry["content_diff"] = lines[:CONTENT_DIFF_MAX_LINES]
        entry["content_diff_truncated"] = len(lines) > CONTENT_DIFF_MAX_LINES
    return entry


def _compare(block_a: Mapping[str, Any], block_b: Mapping[str, Any], moved: bool = False) -> dict[str, Any]:
    if int(block_a["size"]) != int(block_b["size"]):
        status = "resized"
    elif block_a["sha256"] != block_b["sha256"]:
        status = "changed"
    else:
        # Same text in another place still changes the prompt (and breaks a
        # provider's prefix cache), so a move is a difference of its own.
        status = "moved" if moved else "unchanged"
    return _entry(status, block_a, block_b, moved)


def align_blocks(blocks_a: list[Mapping[str, Any]], blocks_b: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Pair blocks by name and position.

    The name sequences are aligned (longest matching runs, as difflib does)
    and blocks in matching runs pair one to one. A name left over on both
    sides (the block moved) pairs too, in order, marked ``moved``; the rest
    is added or removed.
    """
    names_a = [block["name"] for block in blocks_a]
    names_b = [block["name"] for block in blocks_b]
    pairs: list[tuple[int | None, int | None]] = []
    matcher = SequenceMatcher(None, names_a, names_b, autojunk=False)
    for tag, a_low, a_high, b_low, b_high in matcher.get_opcodes():
        if tag == "equal":
            pairs.extend(zip(range(a_low, a_high), range(b_low, b_high)))
        else:
            pairs.extend((position, None) for position in range(a_low, a_high))
            pairs.extend((None, position) for position in range(b_low, b_high))
    left_over_b = [b for a, b in pairs if a is None]
    moved: dict[int, int] = {}
    for a in [a for a, b in pairs if b is None]:
        match = next((b for b in left_over_b if names_b[b] == names_a[a]), None)
        if match is not None:
            left_over_b.remove(match)
            moved[a] = match
    entries = []
    for a, b in pairs:
        if a is not None and b is not None:
            entries.append(_compare(blocks_a[a], blocks_b[b]))
        elif a is not None and a in moved:
            entries.append(_compare(blocks_a[a], blocks_b[moved[a]], moved=True))
        elif a is not None:
            entries.append(_entry("removed", blocks_a[a], None))
        elif b in left_over_b:
            entries.append(_entry("added", None, blocks_b[b]))
    return entries


def _tool_diff(tools_a: list[Mapping[str, Any]], tools_b: list[Mapping[str, Any]]) -> dict[str, Any]:
    by_name_a = {tool["name"]: tool for tool in tools_a}
    by_name_b = {tool["name"]: tool for tool in tools_b}

    def brief(tool: Mapping[str, Any]) -> dict[str, Any]:
        return {"name": tool["name"], "size": tool["size"], "sha256": tool["sha256"]}

    changed = [
        {"name": name, "size_a": by_name_a[name]["size"], "size_b": by_name_b[name]["size"],
         "bytes_delta": int(by_name_b[name]["size"]) - int(by_name_a[name]["size"])}
        for name in by_name_a.keys() & by_name_b.keys()
        if by_name_a[name]["sha256"] != by_name_b[name]["sha256"]
        or by_name_a[name]["size"] != by_name_b[name]["size"]
    ]
    return {
        "added": [brief(by_name_b[name]) for name in by_name_b.keys() - by_name_a.keys()],
        "removed": [brief(by_name_a[name]) for name in by_name_a.keys() - by_name_b.keys()],
        "changed": sorted(changed, key=lambda item: (-abs(item["bytes_delta"]), item["name"])),
        "bytes_delta": sum(int(tool["size"]) for tool in tools_b) - sum(int(tool["size"]) for tool in tools_a),
    }


def _side(request: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "request_id": request["request_id"],
        "trace_id": request["trace_id"],
        "started_at": request["started_at"],
        "service": request["service"],
        "model": request["model"],
        "prompt_bytes": request["prompt"]["bytes"],
        "prompt_sha256": request["prompt"]["sha256"],
        "mapped": request["prompt"]["mapped"],
        "request_bytes": request["request_bytes"],
        "block_count": len(request["prompt"]["blocks"]),
        "lineage": request.get("lineage"),
    }


def diff_requests(request_a: Mapping[str, Any], request_b: Mapping[str, Any]) -> dict[str, Any]:
    """Block-level diff from request ``a`` to request ``b``.

    ``blocks`` lists every block that differs, the ones responsible for the
    largest byte change first, so a prompt that grew names its culprit at the
    top. Works on sizes and hashes alone when no content was captured.
    """
    entries = align_blocks(list(_diff_blocks(request_a)), list(_diff_blocks(request_b)))
    differing = [entry for entry in entries if entry["status"] != "unchanged"]
    differing.sort(key=lambda entry: (-abs(entry["bytes_delta"]), entry["status"] == "changed",
                                      entry["index_b"] if entry["index_b"] is not None else entry["index_a"]))
    bytes_delta = request_b["prompt"]["bytes"] - request_a["prompt"]["bytes"]
    classes_a = request_a["manifest"]["bytes"]
    classes_b = request_b["manifest"]["bytes"]
    by_status = {status: [entry for entry in differing if entry["status"] == status]
                 for status in ("added", "removed", "resized", "changed", "moved")}
    responsible = next((entry for entry in differing if entry["bytes_delta"] != 0), None) or (
        differing[0] if differing else None)
    return {
        "a": _side(request_a),
        "b": _side(request_b),
        "prompt_bytes_delta": bytes_delta,
        "tokens_delta_estimate": estimate_tokens(request_b["prompt"]["bytes"]) - estimate_tokens(request_a["prompt"]["bytes"]),
        "request_bytes_delta": int(request_b["request_bytes"]) - int(request_a["request_bytes"]),
        "byte_classes_delta": {name: int(classes_b[name]) - int(classes_a[name]) for name in classes_b},
        "identical_prompt": bool(request_a["prompt"]["sha256"]) and request_a["prompt"]["sha256"] == request_b["prompt"]["sha256"],
        # Two requests named explicitly may belong to different lineages
        # (``lineage``); the diff is still made, and says so.
        "same_lineage": request_a.get("lineage") == request_b.get("lineage"),
        "responsible": responsible["name"] if responsible else None,
        "blocks": differing,
        **by_status,
        "unchanged_count": sum(1 for entry in entries if entry["status"] == "unchanged"),
        "tools": _tool_diff(request_a["tools"], request_b["tools"]),
        "token_estimate_method": TOKEN_ESTIMATE_METHOD,
    }

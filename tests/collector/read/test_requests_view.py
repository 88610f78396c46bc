"""request_view: rows → request objects, range checks, estimates, diff. Pure, no store."""

from __future__ import annotations

import dataclasses
import datetime
import json

import pytest

from promptprism.collector.read import request_view
from promptprism.collector.read.diff import WHOLE_PROMPT_BLOCK_NAME, align_blocks, diff_requests
from promptprism.collector.read.request_view import estimate_tokens, previous_requests, request_object, rfc3339

from ..read_side_data import Part, blocks_for, build_record, sha256, tool

DAY = "2026-11-30"


def rows_for(record):
    """The rows the read queries return for one record (same keys, same shapes)."""
    row = dataclasses.asdict(record)
    row.update(started_at_ns=record.started_at_ns, day=DAY, block_count=len(record.blocks))
    blocks = [{**dataclasses.asdict(block), "day": DAY} for block in record.blocks]
    tools = [{**dataclasses.asdict(item), "day": DAY} for item in record.tools]
    contents = {(DAY, item.sha256): item.content for item in [*record.blocks, *record.tools]
                if item.content is not None}
    for item in [*blocks, *tools]:
        item.pop("content")
    return row, blocks, tools, contents


def view(record, previous=None):
    row, blocks, tools, contents = rows_for(record)
    return request_object(row, blocks, tools, contents, previous)


PARTS = [
    Part("identity", "identity", "static", "builtin", "Café ☕ 日本\n"),
    Part("template", "template", "static", "template", "Rules:\n"),
    Part("memory", "memory", "session", "store", "likes 🎉\n"),
]


def test_rfc3339_keeps_nanoseconds_in_utc():
    assert rfc3339(1_767_225_600_123_456_789) == "2026-01-01T00:00:00.123456789Z"
    parsed = datetime.datetime.fromisoformat(rfc3339(1_767_225_600_000_000_000).replace("Z", "+00:00")[:26] + "+00:00")
    assert parsed == datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


def test_token_estimate_is_four_bytes_per_token_rounded_up():
    assert [estimate_tokens(size) for size in (0, 1, 4, 5, 8, 9)] == [0, 1, 1, 2, 2, 3]


def test_request_object_has_the_spec_fields_and_exact_block_text():
    record = build_record(trace_id="a" * 32, request_id="b" * 16, parts=PARTS, tools=[tool(0, "lookup", "x")])
    result = view(record)
    for field in ("request_id", "trace_id", "service", "model", "provider", "operation", "started_at",
                  "duration_ms", "prompt", "tools", "messages", "response", "usage"):
        assert field in result, field
    assert set(result["usage"]) >= {"input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens"}
    prompt = result["prompt"]
    assert prompt["mapped"] is True and prompt["problems"] == []
    assert [block["content"] for block in prompt["blocks"]] == [part.text for part in PARTS]
    assert prompt["text"] == "".join(part.text for part in PARTS)
    # Byte offsets, not character offsets: "Café ☕ 日本\n" is 17 bytes.
    assert (prompt["blocks"][1]["start"], prompt["blocks"][1]["end"]) == (17, 24)
    assert sum(block["byte_share"] for block in prompt["blocks"]) == pytest.approx(1, abs=1e-5)
    assert prompt["blocks"][0]["tokens_estimate"] == estimate_tokens(17)
    assert result["tools"][0]["content"] == record.tools[0].content
    assert result["messages"][0]["role"] == "user"
    assert result["response"]["messages"][0]["parts"][0]["content"] == "Two meetings."
    assert result["manifest"]["bytes"]["total"] == record.bytes_total
    assert "estimate" in result["token_estimate_method"] or "per token" in result["token_estimate_method"]


@pytest.mark.parametrize("mutate, complaint", [
    (lambda blocks: blocks[1].update(end=10_000), "does not fit"),
    (lambda blocks: blocks[1].update(start=18, size=6), "previous block ended"),
    (lambda blocks: blocks[1].update(size=99), "does not match byte range"),
    (lambda blocks: blocks[1].update(start=30, end=20), "does not fit"),
])
def test_a_bad_persisted_range_is_reported_not_raised(mutate, complaint):
    record = build_record(trace_id="a" * 32, request_id="b" * 16, parts=PARTS)
    row, blocks, tools, contents = rows_for(record)
    mutate(blocks)
    result = request_object(row, blocks, tools, contents)
    problems = result["prompt"]["problems"]
    assert any(complaint in problem for problem in problems), problems
    assert result["prompt"]["blocks"][1]["problems"]
    # A map that does not tile is not used to assemble the prompt text.
    assert result["prompt"]["text"] is None or result["prompt"]["text"] == "".join(part.text for part in PARTS)


def test_blocks_not_ending_at_the_prompt_length_are_reported():
    record = build_record(trace_id="a" * 32, request_id="b" * 16, parts=PARTS)
    row, blocks, tools, contents = rows_for(record)
    row["prompt_bytes"] += 5
    result = request_object(row, blocks, tools, contents)
    assert any("blocks end at byte" in problem for problem in result["prompt"]["problems"])


def test_missing_block_text_is_sliced_from_the_system_prompt_by_utf8_bytes():
    record = build_record(trace_id="a" * 32, request_id="b" * 16, parts=PARTS)
    row, blocks, tools, contents = rows_for(record)
    contents = {}  # block text not stored, but gen_ai.system_instructions was captured
    result = request_object(row, blocks, tools, contents)
    assert [block["content"] for block in result["prompt"]["blocks"]] == [part.text for part in PARTS]


def test_a_range_splitting_a_utf8_character_is_reported():
    record = build_record(trace_id="a" * 32, request_id="b" * 16, parts=PARTS)
    row, blocks, tools, _ = rows_for(record)
    # "Café ☕ 日本\n": byte 4 is inside "é" (bytes 3-4). Shift the first boundary there.
    blocks[0].update(end=4, size=4)
    blocks[1].update(start=4, size=blocks[1]["end"] - 4)
    result = request_object(row, blocks, tools, {})
    assert "splits a UTF-8 character" in " ".join(result["prompt"]["blocks"][0]["problems"])
    assert result["prompt"]["blocks"][0]["content"] is None


def test_stored_text_that_does_not_match_its_hash_is_reported():
    record = build_record(trace_id="a" * 32, request_id="b" * 16, parts=PARTS)
    row, blocks, tools, contents = rows_for(record)
    contents[(DAY, blocks[2]["sha256"])] = "likes 🎈\n"  # same byte length, other text
    result = request_object(row, blocks, tools, contents)
    assert "sha256" in " ".join(result["prompt"]["blocks"][2]["problems"])
    assert result["prompt"]["text"] == "".join(part.text for part in PARTS)  # from system instructions


def test_unmapped_prompt_keeps_its_reason_and_whole_text():
    record = build_record(trace_id="a" * 32, request_id="b" * 16, parts=PARTS, mapped=False,
                          unmapped_reason="sentinel_collision")
    prompt = view(record)["prompt"]
    assert prompt["mapped"] is False and prompt["unmapped_reason"] == "sentinel_collision"
    assert prompt["blocks"] == [] and prompt["text"] == "".join(part.text for part in PARTS)


def test_not_captured_content_is_none_and_hashes_remain():
    record = build_record(trace_id="a" * 32, request_id="b" * 16, parts=PARTS, capture=False)
    result = view(record)
    assert result["prompt"]["text"] is None and result["messages"] is None
    assert all(block["content"] is None and len(block["sha256"]) == 64 for block in result["prompt"]["blocks"])


def summary_row(request_id, started_ms, prompt_bytes, conversation="c", trace="t" * 32, process=("channel", "1"),
                service="s", provider="openai", model="gpt-test"):
    return {"request_id": request_id, "trace_id": trace, "started_at_ns": started_ms * 1_000_000,
            "conversation_id": conversation, "service": service, "provider": provider, "model": model,
            "process_kind": process[0], "process_id": process[1],
            "prompt_bytes": prompt_bytes, "bytes_total": prompt_bytes * 2}


def test_previous_request_is_found_by_conversation_then_by_trace_and_process():
    rows = [summary_row("r1", 0, 100), summary_row("r2", 10, 150), summary_row("r3", 20, 120),
            summary_row("x1", 5, 10, conversation=""), summary_row("x2", 15, 30, conversation=""),
            summary_row("y1", 16, 30, conversation="", process=("worker", "2"))]
    found = previous_requests(rows, [])
    assert "r1" not in found and "x1" not in found and "y1" not in found
    assert found["r2"]["request_id"] == "r1" and found["r2"]["prompt_bytes_delta"] == 50
    assert found["r3"]["request_id"] == "r2" and found["r3"]["prompt_bytes_delta"] == -30
    assert found["r2"]["basis"] == "conversation"
    assert found["x2"]["request_id"] == "x1" and found["x2"]["basis"] == "trace"


def test_previous_request_stays_in_its_lineage():
    """A conversation id shared by two services and two models: four lineages, no comparison across them."""
    rows = [
        summary_row("a1", 0, 100, service="gateway", model="gpt-4.1"),
        summary_row("b1", 1, 900, service="worker", provider="anthropic", model="claude"),
        summary_row("a2", 2, 110, service="gateway", model="gpt-4.1"),
        summary_row("m1", 3, 50, service="gateway", model="gpt-4.1-mini"),
        summary_row("b2", 4, 950, service="worker", provider="anthropic", model="claude"),
        summary_row("k1", 5, 300, service="gateway", model="gpt-4.1", process=("compactor", "1")),
        summary_row("a3", 6, 120, service="gateway", model="gpt-4.1", process=("channel", "2")),
    ]
    found = previous_requests(rows, [])
    assert {target: found[target]["request_id"] for target in found} == {"a2": "a1", "b2": "b1", "a3": "a2"}
    assert found["a2"]["prompt_bytes_delta"] == 10 and found["b2"]["prompt_bytes_delta"] == 50


def test_lineage_is_one_definition_in_python_and_sql(store):
    """lineage_key and LINEAGE_SQL give the same tuple for the same rows."""
    import json

    from promptprism.collector.read.lineage import LINEAGE_SQL, lineage_key

    rows = [summary_row("a1", 0, 1, service="gateway", model="gpt-4.1"),
            summary_row("a2", 0, 1, conversation="", process=("worker", "w-2"), provider="anthropic"),
            summary_row("a3", 0, 1, conversation="", process=("", ""))]
    for row in rows:
        values = {name: row[name] for name in ("conversation_id", "trace_id", "service", "provider", "model",
                                               "process_kind", "process_id")}
        (answer,) = store.query(
            f"SELECT {LINEAGE_SQL} AS lineage FROM (SELECT {{conversation_id:String}} AS conversation_id, "
            "{trace_id:String} AS trace_id, toLowCardinality({service:String}) AS service, "
            "toLowCardinality({provider:String}) AS provider, toLowCardinality({model:String}) AS model, "
            "toLowCardinality({process_kind:String}) AS process_kind, {process_id:String} AS process_id)", values)
        assert tuple(json.loads(json.dumps(answer["lineage"]))) == lineage_key(row)


def test_previous_request_can_come_from_another_trace():
    earlier = summary_row("r0", 0, 80, trace="e" * 32)
    found = previous_requests([summary_row("r1", 10, 100)], [earlier])
    assert found["r1"]["request_id"] == "r0" and found["r1"]["trace_id"] == "e" * 32


def grown(memory: str, knowledge: str = "k\n", extra=(), capture=True, request_id="b" * 16):
    parts = [PARTS[0], PARTS[1], *extra, Part("memory", "memory", "session", "store", memory),
             Part("knowledge", "knowledge", "turn", "rag", knowledge)]
    return view(build_record(trace_id="a" * 32, request_id=request_id, parts=parts, capture=capture))


def test_diff_names_the_block_that_grew_first():
    before = grown("likes 🎉\n")
    after = grown("likes 🎉\n" + "remembered fact. " * 40, knowledge="K\n",
                  extra=[Part("skills", "skills", "static", "dir", "skill\n")])
    result = diff_requests(before, after)
    assert result["responsible"] == "memory"
    assert result["blocks"][0]["name"] == "memory" and result["blocks"][0]["status"] == "resized"
    assert result["blocks"][0]["bytes_delta"] == 17 * 40
    assert result["blocks"][0]["tokens_delta_estimate"] == estimate_tokens(17 * 40 + 10) - estimate_tokens(10)
    assert [entry["name"] for entry in result["added"]] == ["skills"]
    assert [entry["name"] for entry in result["changed"]] == ["knowledge"]
    assert result["prompt_bytes_delta"] == after["prompt"]["bytes"] - before["prompt"]["bytes"]
    assert sum(entry["bytes_delta"] for entry in result["blocks"]) == result["prompt_bytes_delta"]
    assert result["unchanged_count"] == 2
    assert any(line.startswith("+remembered") for line in result["blocks"][0]["content_diff"])


def test_diff_works_on_hashes_alone_when_content_was_not_captured():
    before = grown("likes 🎉\n", capture=False)
    after = grown("likes 🎈🎈\n", capture=False)
    result = diff_requests(before, after)
    assert result["responsible"] == "memory"
    assert result["blocks"][0]["content_diff"] is None
    same = diff_requests(before, before)
    assert same["blocks"] == [] and same["identical_prompt"] is True


def test_diff_reports_removed_and_moved_blocks():
    blocks_a = [{"index": i, "name": name, "layer": "l", "stability": "static", "source": "s", "size": 10,
                 "sha256": name, "content": None} for i, name in enumerate(["a", "b", "c", "d"])]
    blocks_b = [dict(blocks_a[0], index=0), dict(blocks_a[2], index=1), dict(blocks_a[1], index=2)]
    entries = align_blocks(blocks_a, blocks_b)
    by_name = {entry["name"]: entry for entry in entries}
    assert by_name["d"]["status"] == "removed" and by_name["d"]["bytes_delta"] == -10
    assert by_name["a"]["status"] == "unchanged"
    assert [entry["status"] for entry in entries if entry["moved"]] == ["moved"]
    before = {"prompt": {"blocks": blocks_a, "bytes": 40, "sha256": "x", "text": None, "mapped": True}, "tools": [],
              "manifest": {"bytes": {"system": 0}}, "request_id": "1", "trace_id": "t", "started_at": "",
              "service": "", "model": "", "request_bytes": 0}
    after = {**before, "prompt": {"blocks": blocks_b, "bytes": 30, "sha256": "y", "text": None, "mapped": True}}
    result = diff_requests(before, after)
    assert result["responsible"] == "d" and len(result["moved"]) == 1 and len(result["removed"]) == 1


def test_diff_of_unmapped_prompts_compares_the_whole_prompt():
    record_a = build_record(trace_id="a" * 32, request_id="1" * 16, parts=PARTS, mapped=False, unmapped_reason="x")
    record_b = build_record(trace_id="a" * 32, request_id="2" * 16, parts=PARTS + PARTS, mapped=False,
                            unmapped_reason="x")
    result = diff_requests(view(record_a), view(record_b))
    assert result["responsible"] == WHOLE_PROMPT_BLOCK_NAME
    assert result["blocks"][0]["bytes_delta"] == record_b.prompt_bytes - record_a.prompt_bytes


def test_tool_changes_are_listed_by_name():
    record_a = build_record(trace_id="a" * 32, request_id="1" * 16, parts=PARTS,
                            tools=[tool(0, "keep", "same"), tool(1, "grow", "short"), tool(2, "gone", "x")])
    record_b = build_record(trace_id="a" * 32, request_id="2" * 16, parts=PARTS,
                            tools=[tool(0, "keep", "same"), tool(1, "grow", "much longer text"), tool(2, "new", "y")])
    tools = diff_requests(view(record_a), view(record_b))["tools"]
    assert [item["name"] for item in tools["added"]] == ["new"]
    assert [item["name"] for item in tools["removed"]] == ["gone"]
    assert [item["name"] for item in tools["changed"]] == ["grow"] and tools["changed"][0]["bytes_delta"] == 11


def test_unmapped_prompt_text_is_read_by_the_ingest_rule():
    """The read side takes the system prompt out of stored system instructions with the same rule
    (conventions.system_prompt.instructions_text) that measured the prompt at ingest."""
    from promptprism.collector.conventions.system_prompt import instructions_text

    for stored in (json.dumps([{"type": "text", "content": "a"}, {"type": "text", "content": "b"}]),
                   "plain text", "not json {"):
        expected = instructions_text(stored)
        record = build_record(trace_id="a" * 32, request_id="b" * 16, parts=PARTS)
        row, _, _, _ = rows_for(record)
        row.update(prompt_bytes=len(expected.encode()), prompt_sha256=sha256(expected), system_instructions=stored,
                   mapped=False)
        prompt = request_object(row, [], [], {})["prompt"]
        assert (prompt["text"], prompt["problems"]) == (expected, [])


def test_builder_blocks_tile_the_prompt():
    prompt, blocks = blocks_for(PARTS)
    assert blocks[-1].end == len(prompt.encode()) and blocks[0].sha256 == sha256(PARTS[0].text)


def test_system_instructions_with_a_lone_surrogate_escape_do_not_break_the_request():
    record = build_record(trace_id="a" * 32, request_id="b" * 16, parts=PARTS, mapped=False,
                          unmapped_reason="no_blocks")
    row, blocks, tools, _ = rows_for(record)
    row.update(system_instructions='[{"type": "text", "content": "a\\ud800b"}]', prompt_bytes=5, prompt_sha256="")
    prompt = request_object(row, [], tools, {})["prompt"]
    assert prompt["text"] is None and prompt["content_captured"] is False


def test_block_text_sliced_from_other_system_text_is_checked_against_the_block_hash():
    record = build_record(trace_id="a" * 32, request_id="b" * 16, parts=PARTS)
    row, blocks, tools, _ = rows_for(record)
    # Same byte length, other text: the slice for block 2 is not the block's bytes.
    row["system_instructions"] = json.dumps([{"type": "text", "content": "".join(part.text for part in PARTS)
                                              .replace("likes 🎉", "likes 🎈")}])
    result = request_object(row, blocks, tools, {})
    memory = result["prompt"]["blocks"][2]
    assert memory["content"] is None and "sha256" in " ".join(memory["problems"])
    assert result["prompt"]["blocks"][0]["content"] == PARTS[0].text

"""The named insight queries against the scripted scenario in chdb."""

from __future__ import annotations

import pytest

from promptprism.collector.read.insight import report
from promptprism.collector.read.insight.queries import BYTES_PER_TOKEN, QUERIES, STORE
from promptprism.collector.read.errors import BadArgument
from promptprism.collector.read.insight.report import Filters, Window

from ...write_path_samples import write_records
from . import scenario


def _window(now_ns: int, since: str) -> Window:
    return Window.parse(since, now=now_ns // 10**9)


def test_growth_names_the_block_that_grew(scenario_store, now_ns):
    answer = report.growth(scenario_store, _window(now_ns, "7d"), Filters())
    top = answer["attribution"][0]
    assert top["series"] == "skills_prompt"
    assert top["delta_bytes"] == scenario.SKILL_GROWTH
    assert top["delta_tokens"] == pytest.approx(scenario.SKILL_GROWTH / BYTES_PER_TOKEN, abs=0.1)
    assert top["contribution_pct"] == pytest.approx(scenario.expected_growth_pct(), abs=0.6)
    # Contributions of all parts add up to the whole prompt's change.
    total = sum(row["contribution_pct"] for row in answer["attribution"])
    assert total == pytest.approx(answer["total"]["change_pct"], abs=0.05)
    assert answer["total"]["previous_requests"] == answer["total"]["current_requests"] == 12
    assert answer["summary"].startswith("prompt +")
    assert ": skills_prompt (layer skills) +" in answer["summary"]  # the block and its layer
    assert "memory" not in answer["summary"]  # below the noise threshold


def test_growth_without_a_window_compares_the_later_half_of_the_stored_data(scenario_store, now_ns):
    """The scenario spans days 12..3 ago: the default periods are placed inside it, not a week back from now
    (a week back from now would hold only this week, with nothing before it to compare with)."""
    answer = report.growth(scenario_store, None, Filters())
    assert answer["window_chosen"] == "default"
    assert answer["window_basis"] == "the later half of the stored requests, against the earlier half"
    records = scenario.records(now_ns)
    newest = max(record.started_at_ns for record in records) // 10**9
    oldest = min(record.started_at_ns for record in records) // 10**9
    window = report.Window.parse(answer["window"]["since"], answer["window"]["until"])
    assert window.until == newest + 1 and oldest - 1 <= window.since - window.seconds <= oldest
    assert answer["attribution"][0]["series"] == "skills_prompt"
    assert answer["attribution"][0]["delta_bytes"] == scenario.SKILL_GROWTH
    assert answer["total"]["previous_requests"] == answer["total"]["current_requests"] == 12
    # Explicit periods are kept as given; a week back from now has nothing before it here.
    given = report.growth(scenario_store, _window(now_ns, "7d"), Filters())
    assert given["window_chosen"] == "given" and given["window"]["seconds"] == 7 * 86400


def test_growth_default_window_of_a_long_history_is_the_last_week_of_data(store, now_ns):
    # The story twice, ten days apart: 19 days of data, more than two default periods.
    records = scenario.records(now_ns - 10 * scenario.DAY_NS) + scenario.records(now_ns)
    for number, record in enumerate(records):
        record.request_id, record.trace_id = f"{number + 1:016x}", f"{number + 1:032x}"
    write_records(store, records)
    window, basis = report.growth_window(store, Filters(), now=now_ns / 10**9)
    assert basis == "the 7 days up to the newest request, against the 7 days before"
    assert window.seconds == report.DEFAULT_PERIOD_SECONDS
    assert window.until == max(record.started_at_ns for record in records) // 10**9 + 1
    empty, basis = report.growth_window(store, Filters(service="nobody"), now=now_ns / 10**9)
    assert basis.startswith("the last 7 days") and empty.seconds == 7 * 86400


def test_growth_by_layer_and_stability(scenario_store, now_ns):
    by_layer = report.growth(scenario_store, _window(now_ns, "7d"), Filters(), dimension="layer")
    assert by_layer["attribution"][0]["series"] == "skills"
    by_stability = report.growth(scenario_store, _window(now_ns, "7d"), Filters(), dimension="stability")
    static = next(row for row in by_stability["attribution"] if row["series"] == "static")
    assert static["delta_bytes"] == scenario.SKILL_GROWTH


def test_growth_series_parts_add_up_to_the_prompt(scenario_store, now_ns):
    answer = report.growth(scenario_store, _window(now_ns, "14d"), Filters(), dimension="layer", bucket=86400)
    per_bucket: dict[str, float] = {}
    for row in answer["series"]:
        per_bucket[row["time"]] = per_bucket.get(row["time"], 0) + row["bytes_per_request"]
    prompt_sizes = {record.prompt_bytes for record in scenario.records(now_ns)}
    for total in per_bucket.values():
        assert min(prompt_sizes) - 1 <= total <= max(prompt_sizes) + 1
    assert len(per_bucket) == 6  # three days a week, two weeks


def test_filters_narrow_and_unknown_service_is_empty(scenario_store, now_ns):
    answer = report.growth(scenario_store, _window(now_ns, "7d"), Filters(service="nobody"))
    assert answer["attribution"] == []
    assert answer["summary"] == "no requests with a system prompt in this period"
    answer = report.growth(scenario_store, _window(now_ns, "7d"), Filters(service=scenario.SERVICE, model=scenario.MODEL))
    assert answer["attribution"][0]["series"] == "skills_prompt"


def test_cache_names_the_misplaced_turn_block(scenario_store, now_ns):
    answer = report.cache(scenario_store, _window(now_ns, "7d"), Filters(), limit=100)
    (misordered,) = answer["misordered"]
    assert misordered["block"] == "user_context"
    assert misordered["before_block"] == "identity"
    assert misordered["requests"] == scenario.MISORDERED_REQUESTS
    current = scenario.records(now_ns)[-1]
    stable = sum(block.size for block in current.blocks if block.stability in ("static", "session"))
    assert misordered["uncacheable_bytes"] == stable
    # With the turn block first nothing is expected from the cache: those requests
    # are not "breaks" of a prefix they no longer have; the misplaced block is what
    # `cache` names, first. This week's memory update is the one break.
    (by_block,) = answer["by_block"]
    assert (by_block["block"], by_block["stability"], by_block["breaks"]) == ("memory", "session", 1)
    assert answer["counts"] == {"follow_ups": 9, "breaks": 1, "misordered": 4, "provider_misses": 0}
    assert answer["summary"][0].startswith("turn block user_context sits before stable block identity in 4 request(s)")
    reordered = [row for row in answer["requests"] if row["conversation_id"] == "conversation-2"]
    assert {row["verdict"] for row in reordered} == {"turn_before_stable"}
    assert {row["expected_prefix_bytes"] for row in reordered} == {0}
    assert {row["verdict"] for row in answer["requests"]} == {"first", "ok", "break", "turn_before_stable"}


def test_cache_previous_week_breaks_at_memory_and_compares_reported_tokens(scenario_store, now_ns):
    window = Window(now_ns // 10**9 - 14 * 86400, now_ns // 10**9 - 7 * 86400)
    answer = report.cache(scenario_store, window, Filters(), limit=100)
    assert answer["misordered"] == []
    (by_block,) = answer["by_block"]
    assert by_block["block"] == "memory" and by_block["stability"] == "session" and by_block["breaks"] == 1
    rows = {row["request_id"]: row for row in answer["requests"]}
    broken = [row for row in rows.values() if row["cache_break"]]
    assert len(broken) == 1 and broken[0]["changed_block"] == "memory" and broken[0]["changed_index"] == 4
    assert broken[0]["prefix_identical"] is False
    # The unchanged static blocks before memory are what the cache should serve.
    assert broken[0]["expected_cached_tokens"] == broken[0]["cache_read_tokens"]
    kept = [row for row in rows.values() if row["verdict"] == "ok"]
    assert len(kept) == 8
    for row in kept:
        assert row["prefix_identical"] is True
        assert row["prefix_blocks"] == 4
        assert row["expected_cached_tokens"] == row["cache_read_tokens"] == row["prefix_bytes"] // BYTES_PER_TOKEN
    firsts = [row for row in rows.values() if row["verdict"] == "first"]
    assert len(firsts) == 3 and all(not row["has_previous"] for row in firsts)


def _follow_up(now_ns, *, cache_read_tokens, identity=scenario.IDENTITY, instructions=scenario.INSTRUCTIONS,
               memory_version=0, turn=1, tools_sha256=""):
    """One request of conversation-0 a minute after the one before it."""
    blocks = scenario.build_blocks([
        ("identity", "identity", "static", identity),
        ("instructions", "instructions", "static", instructions),
        ("skills_prompt", "skills", "static", scenario.SKILLS),
        ("memory", "memory", "session", scenario.memory_text("conversation-0", memory_version)),
        ("user_context", "state", "turn", scenario.user_context_text("conversation-0", turn)),
    ])
    record = scenario._record(trace_number=0x5000 + turn, started_at_ns=now_ns - 3600 * 10**9 + turn * 60 * 10**9,
                              conversation="conversation-0", blocks=blocks, cache_read_tokens=cache_read_tokens)
    record.bytes_tools, record.tools_catalog_sha256 = 400, tools_sha256 or "t" * 64
    return record


def _prefix_tokens(record) -> int:
    return (record.bytes_tools + sum(block.size for block in record.blocks[:4])) // BYTES_PER_TOKEN


def _verdicts(store, now_ns):
    answer = report.cache(store, Window.parse("1d", now=now_ns // 10**9), Filters(), limit=100)
    return {row["request_id"]: row for row in answer["requests"]}, answer


def test_reported_cache_reads_covering_the_prefix_are_not_a_break(store, now_ns):
    """Instructions changed since the previous request, but the provider read the whole expected
    prefix from its cache (another conversation had warmed it): no break."""
    first = _follow_up(now_ns, cache_read_tokens=0, turn=0)
    second = _follow_up(now_ns, cache_read_tokens=0, instructions=scenario.INSTRUCTIONS + "- Be kind.\n", turn=1)
    second.cache_read_tokens = _prefix_tokens(second) + 40  # tools and the prefix, and a little history
    write_records(store, [first, second])
    rows, answer = _verdicts(store, now_ns)
    row = rows[second.request_id]
    assert row["changed_block"] == "instructions" and row["changed_in_prefix"] is True
    assert row["cache_read_covers_prefix"] is True and row["cache_break"] is False and row["verdict"] == "ok"
    assert row["expected_prefix_bytes"] == 400 + sum(block.size for block in second.blocks[:4])
    assert row["expected_prefix_tokens"] == _prefix_tokens(second)
    assert answer["counts"]["breaks"] == 0 and answer["by_block"] == []


def test_a_short_cache_read_names_the_first_changed_part_in_prompt_order(store, now_ns):
    first = _follow_up(now_ns, cache_read_tokens=0, turn=0)
    # instructions and memory both changed; the provider served the tools and identity only
    second = _follow_up(now_ns, cache_read_tokens=0, instructions=scenario.INSTRUCTIONS + "- Be kind.\n",
                        memory_version=1, turn=1)
    second.cache_read_tokens = (400 + second.blocks[0].size) // BYTES_PER_TOKEN
    # the tool catalog changed: the first part of the prompt, before every block
    third = _follow_up(now_ns, cache_read_tokens=0, instructions=scenario.INSTRUCTIONS + "- Be kind.\n",
                       memory_version=1, turn=2, tools_sha256="u" * 64)
    write_records(store, [first, second, third])
    rows, answer = _verdicts(store, now_ns)
    assert rows[second.request_id]["verdict"] == "break"
    assert rows[second.request_id]["changed_block"] == "instructions"
    assert rows[second.request_id]["cache_read_tokens"] < rows[second.request_id]["expected_prefix_tokens"]
    assert rows[third.request_id]["verdict"] == "break" and rows[third.request_id]["changed_block"] == "(tools)"
    blocks = {row["block"]: row for row in answer["by_block"]}
    assert set(blocks) == {"instructions", "(tools)"}
    assert blocks["instructions"]["expected_prefix_tokens"] == _prefix_tokens(second)
    assert blocks["instructions"]["reported_cache_read_tokens"] == second.cache_read_tokens
    assert any(line.startswith("cache broken by instructions (static) 1×") and "expected prefix" in line
               and "reported cache read" in line for line in answer["summary"])


def test_the_block_a_turn_block_displaces_is_not_the_template_prose_between_them(store, now_ns):
    """As the demo's legacy override: a heading, the state, prose, then identity."""
    blocks = scenario.build_blocks([
        ("agent.system", "template", "static", "## Right now\n"),
        ("state", "state", "turn", "Local time Mon 09:00.\n"),
        ("agent.system", "template", "static", "\nYou are "),
        ("identity", "identity", "static", scenario.IDENTITY),
    ])
    write_records(store, [scenario._record(trace_number=0x7000, started_at_ns=now_ns - 3600 * 10**9,
                                           conversation="legacy", blocks=blocks, cache_read_tokens=0)])
    (misordered,) = report.cache(store, Window.parse("1d", now=now_ns // 10**9), Filters())["misordered"]
    assert (misordered["block"], misordered["before_block"]) == ("state", "identity")


def test_cache_reports_provider_misses(store, now_ns):
    records = [record for record in scenario.records(now_ns)
               if record.conversation_id == "conversation-0" and record.started_at_ns < now_ns - 7 * scenario.DAY_NS]
    for record in records[1:]:
        record.cache_read_tokens = 0  # the provider cached nothing although the prefix was unchanged
    write_records(store, records)
    window = Window(now_ns // 10**9 - 14 * 86400, now_ns // 10**9)
    answer = report.cache(store, window, Filters())
    assert answer["counts"]["provider_misses"] == 3
    assert any("provider reported far fewer cached tokens" in line for line in answer["summary"])


def test_conversation_filter(scenario_store, now_ns):
    answer = report.cache(scenario_store, _window(now_ns, "7d"), Filters(conversation="conversation-1"))
    assert {row["conversation_id"] for row in answer["requests"]} == {"conversation-1"}
    assert answer["counts"]["follow_ups"] == 3


def test_headroom(scenario_store, now_ns):
    answer = report.headroom(scenario_store, _window(now_ns, "7d"), Filters(), limit=5)
    assert len(answer["requests"]) == 5
    tightest = answer["requests"][0]
    assert tightest["context_window"] == scenario.CONTEXT_WINDOW
    assert tightest["headroom_tokens"] == scenario.CONTEXT_WINDOW - tightest["tokens_estimate"]
    assert tightest["headroom_tokens"] == min(row["headroom_tokens"] for row in answer["requests"])
    assert {row["model"] for row in answer["series"]} == {scenario.MODEL}
    assert "tightest request" in answer["summary"]


def test_requests_without_context_window_are_not_in_headroom(store, now_ns):
    records = scenario.records(now_ns)[:2]
    for record in records:
        record.context_window = 0
    write_records(store, records)
    answer = report.headroom(store, Window.parse("30d", now=now_ns // 10**9), Filters())
    assert answer["requests"] == [] and answer["series"] == []


def test_unmapped_prompts_count_as_one_part(store, now_ns):
    records = scenario.records(now_ns)
    for record in records:
        if record.started_at_ns > now_ns - 7 * scenario.DAY_NS:  # this week
            record.mapped, record.unmapped_reason, record.blocks = False, "collision", []
    write_records(store, records)
    answer = report.growth(store, Window.parse("7d", now=now_ns // 10**9), Filters())
    unmapped = next(row for row in answer["attribution"] if row["series"] == "(unmapped)")
    assert unmapped["previous_bytes"] == 0 and unmapped["current_bytes"] > 0
    assert answer["total"]["current_bytes"] == pytest.approx(
        sum(r.prompt_bytes for r in records if r.started_at_ns > now_ns - 7 * scenario.DAY_NS) / 12, abs=0.2)


def test_every_query_binds_exactly_its_parameters(store):
    for query in QUERIES.values():
        sql = query.render(STORE)
        used = set(__import__("re").findall(r"\{([a-z_]+):", sql)) - {"db"}
        assert used == set(query.params), query.name
        assert "{{" not in sql and "$" not in sql, query.name


@pytest.mark.parametrize("text", ["yesterday", "7x", "2025-13-01"])
def test_bad_time_is_a_clear_error(text):
    with pytest.raises(BadArgument, match="expected an RFC 3339 time"):
        Window.parse(text, now=1_700_000_000)


def test_window_parsing():
    assert Window.parse("24h", now=1_700_000_000) == Window(1_700_000_000 - 86400, 1_700_000_000)
    assert Window.parse("2023-11-14T00:00:00Z", "2023-11-15T00:00:00Z") == Window(1699920000, 1700006400)
    assert report.bucket_for(Window(0, 7 * 86400)) == 6 * 3600
    with pytest.raises(BadArgument):
        Window.parse("2023-11-15T00:00:00Z", "2023-11-14T00:00:00Z")  # until is before since
    # Ages count back from now, for since and until alike (as on /api/requests).
    assert Window.parse("3d", "2d", now=1_700_000_000) == Window(1_700_000_000 - 3 * 86400, 1_700_000_000 - 2 * 86400)
    # A bucket takes the same duration syntax as an age.
    assert report.bucket_for(Window(0, 86400), "1d") == report.bucket_for(Window(0, 86400), "86400") == 86400
    with pytest.raises(BadArgument, match="bucket"):
        report.bucket_for(Window(0, 86400), "1 fortnight")


def test_bad_dimension_and_limit(scenario_store, now_ns):
    with pytest.raises(BadArgument, match="dimension"):
        report.growth(scenario_store, _window(now_ns, "7d"), Filters(), dimension="colour")
    with pytest.raises(BadArgument, match="limit"):
        report.cache(scenario_store, _window(now_ns, "7d"), Filters(), limit=0)


def test_hostile_filter_values_are_bound(scenario_store, now_ns):
    answer = report.growth(scenario_store, _window(now_ns, "7d"), Filters(service="x' OR 1=1 --"))
    assert answer["attribution"] == []


def test_summary_is_pure():
    attribution = [
        {"series": "skills_prompt", "previous_bytes": 1000.0, "current_bytes": 1140.0, "contribution_pct": 14.0,
         "previous_requests": 10, "current_requests": 10},
        {"series": "memory", "previous_bytes": 0.0, "current_bytes": 40.0, "contribution_pct": 4.0,
         "previous_requests": 10, "current_requests": 10},
    ]
    total = report.total_from_attribution(attribution)
    assert report.growth_summary(total, attribution) == (
        "prompt +18.0 % (+180 B ≈ +45 tokens per request): skills_prompt +14.0 %, memory +4.0 %")


def test_default_window_ends_after_requests_of_the_current_second():
    """A request stored 0.9 s into the current second is inside the default window."""
    from promptprism.collector.read.insight.report import Window

    now = 1_764_498_462.95
    window = Window.parse(since="1h", now=now)
    assert window.until >= now  # whole seconds, rounded up
    assert Window.parse(since="1h", until="now", now=now).until >= now
    assert window.seconds == 3600


def _json_kind(clickhouse_type: str) -> tuple[str, bool]:
    """A ClickHouse output type as (JSON kind, nullable), the way the API serves its values."""
    nullable = clickhouse_type.startswith("Nullable(")
    inner = clickhouse_type[len("Nullable("):-1] if nullable else clickhouse_type
    inner = inner.removeprefix("LowCardinality(").removesuffix(")") if inner.startswith("LowCardinality(") else inner
    if inner.startswith(("DateTime", "String", "FixedString")):
        return "string", nullable
    if inner.startswith("Float"):
        return "number", nullable
    if inner.startswith(("UInt", "Int", "Bool")):
        return "integer", nullable
    raise AssertionError(f"unexpected output type {clickhouse_type}")


def test_every_insight_row_model_declares_exactly_its_querys_columns(scenario_store, now_ns):
    """The API schema types each insight row; the models must follow the SQL (names, kinds, nullability)."""
    from promptprism.collector.read.insight.queries import QUERIES, STORE
    from promptprism.collector.read.insight.report import _BOOLEAN_COLUMNS
    from promptprism.collector.read.models import INSIGHT_ROWS

    params = {"since": now_ns // 10**9 - 7 * 86400, "until": now_ns // 10**9, "bucket_seconds": 3600,
              "dimension": "name", "service": "", "model": "", "process": "", "conversation": "", "limit": 10}
    for name, model in INSIGHT_ROWS.items():
        query = QUERIES[name]
        described = scenario_store.query(f"DESCRIBE ({query.render(STORE)})",
                                          {"db": scenario_store.database, **{key: params[key] for key in query.params}})
        columns = {row["name"]: _json_kind(row["type"]) for row in described}
        assert list(columns) == list(model.model_fields), name
        schema = model.model_json_schema()["properties"]
        for column, (kind, nullable) in columns.items():
            if column in _BOOLEAN_COLUMNS:
                kind = "boolean"
            declared = schema[column]
            kinds = {option.get("type") for option in declared.get("anyOf", [declared])}
            expected = {kind}
            assert kinds - {"null"} == expected, (name, column, declared, kind)
            assert ("null" in kinds) == nullable, (name, column, "nullability")

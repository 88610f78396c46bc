"""The JSON API (SPEC §5) against a real collector fed real OTLP from the OTel SDK."""

from __future__ import annotations

import httpx
import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from promptprism.collector.read.api import api_routes

from .. import read_side_data as data

# `make test` runs the tests marked `clickhouse` on ClickHouse 24.8 too (tests/conftest.py): those whose
# answer comes from the store's SQL. Arguments refused before any query, the JSON Schema checked in Python
# and the unreachable server run on 26.x only; the SQL behind the answers they read runs in the marked ones.


@pytest.fixture(scope="module")
def api(migrated_database, tmp_path_factory):
    records = data.scenario()
    with data.running_collector(migrated_database, str(tmp_path_factory.mktemp("collector")), records) as (collector, _, url):
        with httpx.Client(base_url=url, timeout=30) as client:
            yield client, records, collector.endpoints()["otlp_grpc"]


def get(api, path, **params):
    client = api[0]
    return client.get(path, params=params)


@pytest.mark.clickhouse
def test_trace_lists_every_request_in_start_order_with_growth(api):
    response = get(api, f"/api/traces/{data.AGENT_TRACE}")
    assert response.status_code == 200
    body = response.json()
    assert body["trace_id"] == data.AGENT_TRACE
    assert [item["request_id"] for item in body["requests"]] == [data.FIRST, data.SECOND, data.THIRD]
    first, second, third = body["requests"]
    assert first["previous"] is None
    assert second["previous"]["request_id"] == data.FIRST
    assert second["previous"]["prompt_bytes_delta"] == second["prompt"]["bytes"] - first["prompt"]["bytes"] > 0
    assert third["previous"]["request_id"] == data.SECOND


@pytest.mark.clickhouse
def test_request_object_carries_the_spec_fields_from_the_real_path(api):
    records = api[1]
    sent = next(record for record in records if record.request_id == data.SECOND)
    body = get(api, f"/api/requests/{data.SECOND}").json()
    assert body["request_id"] == data.SECOND and body["trace_id"] == data.AGENT_TRACE
    assert (body["service"], body["model"], body["provider"], body["operation"]) == ("assistant", "gpt-test", "openai", "chat")
    assert body["started_at"].endswith("Z") and body["started_at"][:4].isdigit()
    assert body["duration_ms"] == pytest.approx(1250.0)
    prompt = body["prompt"]
    assert prompt["bytes"] == sent.prompt_bytes and prompt["sha256"] == sent.prompt_sha256
    assert prompt["mapped"] is True and prompt["problems"] == []
    assert prompt["template"] == {"name": "assistant.system", "origin": "builtin"}
    for block, expected in zip(prompt["blocks"], sent.blocks, strict=True):
        for field in ("index", "name", "layer", "stability", "source", "start", "end", "size", "sha256", "content"):
            assert block[field] == getattr(expected, field), field
        assert block["tokens_estimate"] == -(-expected.size // 4)
        assert 0 < block["byte_share"] <= 1 and 0 < block["token_share"] <= 1
    assert prompt["text"] == "".join(block.content for block in sent.blocks)
    assert [tool["name"] for tool in body["tools"]] == ["calendar_lookup", "send_email"]
    assert body["tools"][0]["content"] == sent.tools[0].content
    assert body["messages"][1]["parts"][0]["type"] == "tool_call"
    assert body["response"]["messages"][0]["parts"][0]["content"].startswith("Done.")
    assert body["response"]["finish_reasons"] == ["stop"]
    assert body["usage"] == {"input_tokens": sent.input_tokens, "output_tokens": 12,
                             "cache_read_tokens": 0, "cache_creation_tokens": 0}
    manifest = body["manifest"]
    assert manifest["dialect"] == "chat-completions" and manifest["body_sha256"] == sent.body_sha256
    assert manifest["bytes"]["total"] == sent.bytes_total and manifest["headroom_tokens"] == sent.headroom_tokens
    assert (body["conversation_id"], body["message_id"]) == (data.CONVERSATION, "message-7")
    assert body["process"] == {"kind": "channel", "id": "web-1"}


@pytest.mark.clickhouse
def test_request_by_unique_prefix_and_uppercase(api):
    assert get(api, f"/api/requests/{data.NO_CONTENT[:6]}").json()["request_id"] == data.NO_CONTENT
    assert get(api, f"/api/requests/{data.UNMAPPED[:4].upper()}").json()["request_id"] == data.UNMAPPED


@pytest.mark.clickhouse
def test_ambiguous_prefix_is_409_with_candidates(api):
    response = get(api, "/api/requests/a1b2")
    assert response.status_code == 409
    body = response.json()
    assert body["candidates"] == [data.FIRST, data.SECOND, data.THIRD]
    assert "ambiguous" in body["error"] and data.FIRST in body["error"]


@pytest.mark.clickhouse
@pytest.mark.parametrize("path", ["/api/requests/ffff", "/api/requests/ffffffffffffffff",
                                  "/api/traces/ffffffffffffffffffffffffffffffff"])
def test_unknown_ids_are_404(api, path):
    response = get(api, path)
    assert response.status_code == 404 and response.json()["error"]


@pytest.mark.parametrize("path", [
    "/api/requests/a1b",  # too short
    "/api/requests/a1b2%25",  # a LIKE wildcard is not hex
    "/api/requests/a1b_",
    "/api/requests/zzzz",
    "/api/requests/a1b2c3d4e5f600011",  # longer than a span id
    "/api/traces/4bf92f35",  # trace ids are whole
    "/api/traces/not-a-trace",
])
def test_malformed_ids_are_400(api, path):
    response = get(api, path)
    assert response.status_code == 400, response.text
    assert response.json()["error"]


def test_wildcards_never_reach_sql_as_wildcards(api):
    # '%' would match everything in LIKE; here it is rejected before any query.
    assert get(api, "/api/requests/%25%25%25%25").status_code == 400
    assert get(api, "/api/requests/____").status_code == 400


@pytest.mark.clickhouse
def test_unmapped_request_keeps_its_reason_and_whole_text(api):
    body = get(api, f"/api/requests/{data.UNMAPPED}").json()
    assert body["prompt"]["mapped"] is False and body["prompt"]["unmapped_reason"] == "sentinel_collision"
    assert "summarizer" in body["prompt"]["text"]


@pytest.mark.clickhouse
def test_request_without_captured_content_keeps_sizes_and_hashes(api):
    body = get(api, f"/api/requests/{data.NO_CONTENT}").json()
    assert body["prompt"]["text"] is None and body["messages"] is None
    blocks = {block["name"]: block for block in body["prompt"]["blocks"]}
    assert all(len(block["sha256"]) == 64 and block["size"] > 0 for block in blocks.values())
    # Its own text was never sent. Blocks identical to another request's
    # captured text share that text: content is stored once per (day, sha256).
    assert blocks["memory"]["content"] is None and blocks["knowledge"]["content"] is None
    assert blocks["identity"]["content"] is not None
    assert body["tools"][0]["content"] is None and body["tools"][0]["size"] > 0


@pytest.mark.clickhouse
def test_list_is_newest_first_with_every_filter(api):
    every = get(api, "/api/requests").json()["requests"]
    assert [item["request_id"] for item in every] == [data.NO_CONTENT, data.UNMAPPED, data.THIRD, data.SECOND, data.FIRST]
    assert "blocks" not in every[0]["prompt"]  # summaries carry no content

    def ids(**params):
        response = get(api, "/api/requests", **params)
        assert response.status_code == 200, response.text
        return [item["request_id"] for item in response.json()["requests"]]

    assert ids(service="billing") == [data.NO_CONTENT]
    assert ids(model="gpt-small") == [data.UNMAPPED]
    assert ids(conversation=data.CONVERSATION) == [data.THIRD, data.SECOND, data.FIRST]
    assert ids(message_id="message-7", limit=2) == [data.THIRD, data.SECOND]
    assert ids(process="worker") == [data.NO_CONTENT, data.UNMAPPED]
    assert ids(process="w-3") == [data.UNMAPPED]
    assert ids(process="worker:w-9") == [data.NO_CONTENT]
    assert ids(run_id="run-2") == [data.NO_CONTENT]
    second = every[3]["started_at"]
    assert ids(since=second, until=every[1]["started_at"]) == [data.THIRD, data.SECOND]
    assert ids(since="1d") == ids()
    assert ids(until="2000-01-01") == []
    assert ids(service="nobody") == []


@pytest.mark.parametrize("params, needle", [
    ({"limit": "0"}, "limit"), ({"limit": "many"}, "limit"), ({"limit": "100000"}, "limit"),
    ({"since": "yesterday-ish"}, "since"), ({"until": "soon"}, "until"),
    ({"servce": "typo"}, "servce"), ({"since": "1h", "until": "2h"}, "earlier"),
])
def test_bad_list_arguments_are_400(api, params, needle):
    response = get(api, "/api/requests", **params)
    assert response.status_code == 400
    assert needle in response.json()["error"]


@pytest.mark.clickhouse
def test_diff_names_the_grown_block_with_byte_and_token_deltas(api):
    response = get(api, "/api/diff", a=data.FIRST, b=data.THIRD)
    assert response.status_code == 200
    body = response.json()
    assert body["a"]["request_id"] == data.FIRST and body["b"]["request_id"] == data.THIRD
    assert body["responsible"] == "memory"
    top = body["blocks"][0]
    assert (top["name"], top["status"]) == ("memory", "resized") and top["bytes_delta"] > 0
    assert top["tokens_delta_estimate"] > 0
    assert [entry["name"] for entry in body["added"]] == ["skills"]
    assert [entry["name"] for entry in body["changed"]] == ["knowledge"]
    assert body["prompt_bytes_delta"] == sum(entry["bytes_delta"] for entry in body["blocks"])


@pytest.mark.clickhouse
def test_diff_works_on_hashes_alone(api):
    body = get(api, "/api/diff", a=data.NO_CONTENT, b=data.FIRST).json()
    assert body["blocks"] and all(entry["content_diff"] is None for entry in body["blocks"]
                                  if entry["name"] in ("memory", "knowledge"))


@pytest.mark.clickhouse
@pytest.mark.parametrize("params, status", [
    ({"a": data.FIRST}, 400), ({}, 400), ({"a": "zz", "b": data.FIRST}, 400),
    ({"a": "a1b2", "b": data.FIRST}, 409), ({"a": data.FIRST, "b": "ffffffffffffffff"}, 404),
])
def test_diff_errors_are_told_apart(api, params, status):
    response = get(api, "/api/diff", **params)
    assert response.status_code == status and response.json()["error"]


@pytest.mark.clickhouse
def test_resent_spans_do_not_duplicate_requests(api):
    # The same spans exported again (a retry after a timeout): answers list
    # each request once, whatever the store holds until its next merge.
    data.send_over_otlp(api[1][:3], api[2])
    body = get(api, f"/api/traces/{data.AGENT_TRACE}").json()
    assert [item["request_id"] for item in body["requests"]] == [data.FIRST, data.SECOND, data.THIRD]
    assert len(body["requests"][1]["prompt"]["blocks"]) == 6
    assert len(get(api, "/api/requests").json()["requests"]) == 5


@pytest.mark.clickhouse
def test_store_failure_is_500_with_a_json_error(store):
    data.write(store, data.scenario()[:1])
    store.execute(f"DROP TABLE {store.database}.request_docs SYNC")
    client = TestClient(Starlette(routes=api_routes(store)))
    response = client.get(f"/api/requests/{data.FIRST}")
    assert response.status_code == 500
    assert response.json()["error"].startswith("store query failed")
    # Argument errors are still found before the store is asked.
    assert client.get("/api/requests/xyz!").status_code == 400


def test_unreachable_server_store_is_503(port):
    from promptprism.collector.store.server import ServerStore

    client = TestClient(Starlette(routes=api_routes(ServerStore(f"http://127.0.0.1:{port}/promptprism"))))
    response = client.get(f"/api/requests/{data.FIRST}")
    assert response.status_code == 503 and response.headers["retry-after"]
    assert response.json()["error"].startswith("store unavailable")


def test_a_bad_range_persisted_in_the_store_is_reported_not_a_crash(store):
    # Reassembly never stores a bad map; a row written by an older or broken
    # writer must still be readable.
    record = data.scenario()[0]
    record.blocks[2].start += 3
    record.blocks[2].size -= 3
    record.blocks[4].end = 10_000
    data.write(store, [record])
    client = TestClient(Starlette(routes=api_routes(store)))
    response = client.get(f"/api/requests/{data.FIRST}")
    assert response.status_code == 200
    prompt = response.json()["prompt"]
    assert len(prompt["problems"]) == 2
    assert "previous block ended" in prompt["blocks"][2]["problems"][0]
    assert "does not fit" in prompt["blocks"][4]["problems"][0]
    # Text is not assembled from an untrustworthy map, but the captured system prompt still shows.
    assert prompt["text"] == "".join(part.text for part in data.agent_parts(
        "User prefers short answers. 🎯\n", "Doc: the calendar has two meetings.\n"))


# --- the served JSON Schema -------------------------------------------------------------------


def _validator(schema, definition):
    import jsonschema

    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator({**schema, "$ref": f"#/$defs/{definition}"})


@pytest.mark.clickhouse
def test_every_answer_of_the_real_collector_validates_against_the_served_schema(api):
    schema = get(api, "/api/schema").json()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    answers = {
        "RequestList": get(api, "/api/requests", limit="3"),
        "Request": get(api, f"/api/requests/{data.SECOND}"),
        "Trace": get(api, f"/api/traces/{data.AGENT_TRACE}"),
        "Diff": get(api, "/api/diff", a=data.FIRST, b=data.THIRD),
        "Growth": get(api, "/api/insight/growth", since="2d"),
        "Cache": get(api, "/api/insight/cache", since="2d"),
        "Headroom": get(api, "/api/insight/headroom", since="2d"),
    }
    for definition, response in answers.items():
        assert response.status_code == 200, (definition, response.text)
        _validator(schema, definition).validate(response.json())
    # Each route names its answer, and unmapped and content-free requests validate too.
    assert schema["routes"]["GET /api/requests/{id}"]["response"] == {"$ref": "#/$defs/Request"}
    for request_id in (data.UNMAPPED, data.NO_CONTENT):
        _validator(schema, "Request").validate(get(api, f"/api/requests/{request_id}").json())
    for path in ("/api/requests/zz", "/api/requests/a1b2", "/api/nope"):
        _validator(schema, "Error").validate(get(api, path).json())


def test_the_schema_can_fail(api):
    """A missing field, a wrong type and an undeclared key are each caught."""
    import jsonschema

    schema = get(api, "/api/schema").json()
    body = get(api, f"/api/requests/{data.SECOND}").json()
    validator = _validator(schema, "Request")
    for broken in ({k: v for k, v in body.items() if k != "trace_id"}, {**body, "duration_ms": "slow"},
                   {**body, "surprise": 1}, {**body, "usage": {**body["usage"], "input_tokens": "many"}}):
        with pytest.raises(jsonschema.ValidationError):
            validator.validate(broken)


def test_declared_fields_appear_in_the_schema_at_their_api_paths(api):
    """Fields record.py declares with an api path are derived, not written twice."""
    from promptprism.collector.record import REQUEST_COLUMNS

    definitions = get(api, "/api/schema").json()["$defs"]

    def resolve(node):
        while "$ref" in node or "anyOf" in node:
            node = definitions[node["$ref"].split("/")[-1]] if "$ref" in node else next(
                option for option in node["anyOf"] if option.get("type") != "null")
        return node

    for column in REQUEST_COLUMNS:
        for path in column.api:
            node = definitions["Request"]
            for part in path.split("."):
                node = resolve(node)
                assert part in node["properties"], (column.name, path)
                node = node["properties"][part]


def test_unknown_paths_answer_json_under_api_and_pages_elsewhere(api):
    response = get(api, "/api/nope")
    assert response.status_code == 404 and response.json() == {"error": "no such page: /api/nope"}
    page = get(api, "/nope")
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    assert "404 · Not found" in page.text and 'class="topbar"' in page.text
    assert get(api, "/api/requests", limit="abc").json()["error"].startswith("limit='abc'")
    assert client_post(api, "/api/requests").status_code == 405


def client_post(api, path):
    return api[0].post(path)


def test_bucket_takes_the_duration_syntax_of_since(api):
    assert get(api, "/api/insight/growth", since="1d", bucket="1d").json()["bucket_seconds"] == 86400
    assert get(api, "/api/insight/cache", since="1d", bucket="3600").json()["bucket_seconds"] == 3600
    response = get(api, "/api/insight/cache", bucket="soon")
    assert response.status_code == 400 and "bucket='soon'" in response.json()["error"]


def test_the_committed_schema_is_the_served_one():
    import json

    from promptprism.collector.read.models import json_schema
    from support import REPOSITORY

    committed = json.loads((REPOSITORY / "docs" / "api-schema.json").read_text(encoding="utf-8"))
    assert committed == json_schema(), "regenerate: python -m promptprism.collector.read.models > docs/api-schema.json"

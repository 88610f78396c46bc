"""The request manifest: exact byte classes, stable hashes, estimates, no free text."""

from __future__ import annotations

import copy
import hashlib
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promptprism.instrumentation.manifest import (
    ManifestError,
    build_manifest,
    canonical_bytes,
    detect_dialect,
    endpoint_class,
    estimate_tokens,
    safe_error_text,
    safe_identifier,
    body_system_text,
    tool_definitions,
)
from promptprism.wire import names

from .manifest_strategies import BODIES, dialect_and_body

PROPERTY_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def canonical_size(value) -> int:
    return len(json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode())


def assert_identity(manifest, body) -> None:
    total = canonical_size(body)
    assert manifest.bytes_total == total
    assert manifest.bytes_system + manifest.bytes_tools + manifest.bytes_messages + manifest.bytes_framing == total
    assert min(manifest.bytes_system, manifest.bytes_tools, manifest.bytes_messages, manifest.bytes_framing) >= 0
    assert manifest.bytes_tool_results <= manifest.bytes_messages
    assert manifest.bytes_attachments <= manifest.bytes_messages


# --- exact bytes ----------------------------------------------------------------------------


def test_chat_completions_classes_by_hand():
    system = {"role": "system", "content": "Be brief."}
    user = {"role": "user", "content": "hi"}
    tool_result = {"role": "tool", "tool_call_id": "c1", "content": "42"}
    tool = {"type": "function", "function": {"name": "add", "parameters": {}}}
    body = {"model": "gpt-4o", "messages": [system, user, tool_result], "tools": [tool]}
    manifest = build_manifest(body, names.DIALECT_CHAT_COMPLETIONS)
    assert manifest.bytes_system == len('{"content":"Be brief.","role":"system"}')
    assert manifest.bytes_messages == len('{"content":"hi","role":"user"}') + len(
        '{"content":"42","role":"tool","tool_call_id":"c1"}')
    assert manifest.bytes_tool_results == len('{"content":"42","role":"tool","tool_call_id":"c1"}')
    assert manifest.bytes_tools == len('{"function":{"name":"add","parameters":{}},"type":"function"}')
    assert_identity(manifest, body)
    assert manifest.messages_count == 2 and manifest.tools_count == 1
    assert manifest.body_sha256 == hashlib.sha256(
        json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()
    assert manifest.tools_catalog_sha256 == hashlib.sha256(canonical_bytes([tool])).hexdigest()


def test_non_ascii_counts_utf8_bytes_not_characters():
    body = {"model": "m", "max_tokens": 5, "system": "é✓😀", "messages": []}
    manifest = build_manifest(body, names.DIALECT_ANTHROPIC_MESSAGES)
    assert manifest.bytes_system == len('"é✓😀"'.encode())  # quotes + 2 + 3 + 4 bytes
    assert_identity(manifest, body)


def test_only_the_leading_system_run_is_system():
    body = {"model": "m", "messages": [
        {"role": "developer", "content": "A"}, {"role": "system", "content": "B"},
        {"role": "user", "content": "u"}, {"role": "system", "content": "later note"},
    ]}
    manifest = build_manifest(body, names.DIALECT_CHAT_COMPLETIONS)
    assert manifest.bytes_system == canonical_size(body["messages"][0]) + canonical_size(body["messages"][1])
    assert manifest.messages_count == 2
    assert body_system_text(body, names.DIALECT_CHAT_COMPLETIONS) == "AB"  # the leading run only


def test_responses_string_input_and_instructions():
    body = {"model": "gpt-5", "instructions": "Rules.", "input": "What now?", "reasoning": {"effort": "high"}}
    manifest = build_manifest(body, names.DIALECT_OPENAI_RESPONSES)
    assert manifest.bytes_system == len('"Rules."')
    assert manifest.bytes_messages == len('"What now?"')
    assert manifest.reasoning_effort == "high"
    assert_identity(manifest, body)


def test_anthropic_tool_results_and_nested_attachments():
    document = {"type": "document", "source": {"type": "text", "data": "x" * 50}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": [document]}
    body = {"model": "claude", "max_tokens": 10, "messages": [{"role": "user", "content": [result]}],
            "thinking": {"type": "enabled", "budget_tokens": 2048}}
    manifest = build_manifest(body, names.DIALECT_ANTHROPIC_MESSAGES)
    assert manifest.bytes_tool_results == canonical_size(result)
    assert manifest.bytes_attachments == canonical_size(document)
    assert manifest.reasoning_budget_tokens == 2048
    assert manifest.reasoning_effort == "enabled"


@pytest.mark.parametrize("body,dialect,effort", [
    ({"model": "o3", "messages": [], "reasoning_effort": "low"}, names.DIALECT_CHAT_COMPLETIONS, "low"),
    ({"model": "gpt-5", "input": "x", "reasoning": {"effort": "minimal"}}, names.DIALECT_OPENAI_RESPONSES, "minimal"),
    ({"model": "c", "max_tokens": 1, "messages": [], "output_config": {"effort": "medium"},
      "thinking": {"type": "adaptive"}}, names.DIALECT_ANTHROPIC_MESSAGES, "medium"),
])
def test_reasoning_effort_wherever_the_dialect_puts_it(body, dialect, effort):
    assert build_manifest(body, dialect).reasoning_effort == effort


# --- estimates and headroom ---------------------------------------------------------------


def test_token_estimate_is_four_bytes_per_token_plus_five_percent():
    assert estimate_tokens(0) == 0
    assert estimate_tokens(4000) == 1050
    assert estimate_tokens(1) == 1


def test_headroom_goes_negative_when_the_request_would_not_fit():
    body = {"model": "m", "max_tokens": 1000, "system": "s" * 40_000, "messages": []}
    manifest = build_manifest(body, names.DIALECT_ANTHROPIC_MESSAGES, context_window=8_000)
    assert manifest.headroom_tokens == 8_000 - 1000 - manifest.tokens_estimate
    assert manifest.headroom_tokens < 0
    roomy = build_manifest(body, names.DIALECT_ANTHROPIC_MESSAGES, context_window=200_000)
    assert roomy.headroom_tokens > 0
    assert build_manifest(body, names.DIALECT_ANTHROPIC_MESSAGES).headroom_tokens is None


def test_attributes_use_the_wire_names():
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    attributes = build_manifest(body, names.DIALECT_CHAT_COMPLETIONS, context_window=100,
                                endpoint="https://api.openai.com/v1").attributes()
    assert attributes[names.REQUEST_DIALECT] == names.DIALECT_CHAT_COMPLETIONS
    assert attributes[names.REQUEST_MANIFEST_SCHEMA_VERSION] == 1
    assert attributes[names.REQUEST_ENDPOINT_HOST_CLASS] == "public"
    assert names.REQUEST_TOOLS_CATALOG_SHA256 not in attributes  # no tools, no catalog
    assert all(value is not None for value in attributes.values())
    assert "api.openai.com" not in json.dumps(attributes)


# --- properties -------------------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(dialect_and_body)
def test_byte_classes_sum_to_the_canonical_body_for_every_dialect(case):
    dialect, body = case
    manifest = build_manifest(body, dialect)
    assert_identity(manifest, body)
    assert manifest.body_sha256 == hashlib.sha256(
        json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()
    assert len(tool_definitions(body, dialect)) == manifest.tools_count


def _reordered(value):
    if isinstance(value, dict):
        return {key: _reordered(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [_reordered(item) for item in value]
    return value


@PROPERTY_SETTINGS
@given(dialect_and_body)
def test_hash_is_stable_under_key_reordering(case):
    dialect, body = case
    assert build_manifest(_reordered(body), dialect) == build_manifest(body, dialect)


def _leaf_paths(value, path=()):
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaf_paths(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaf_paths(item, path + (index,))
    else:
        yield path


def _changed(value):
    if isinstance(value, bool) or value is None:
        return "changed"
    if isinstance(value, (int, float)):
        # +1 is lost on floats beyond 2**53; doubling is not.
        return value + 1 if abs(value) < 2**50 else value * 2
    return value + "!"


@PROPERTY_SETTINGS
@given(dialect_and_body, st.data())
def test_changing_any_field_changes_the_hash(case, data):
    dialect, body = case
    paths = list(_leaf_paths(body))
    path = data.draw(st.sampled_from(paths))
    changed = copy.deepcopy(body)
    target = changed
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = _changed(target[path[-1]])
    assert build_manifest(changed, dialect).body_sha256 != build_manifest(body, dialect).body_sha256


@PROPERTY_SETTINGS
@given(st.sampled_from(names.DIALECTS).flatmap(lambda dialect: BODIES[dialect]))
def test_detected_dialect_still_gives_an_exact_identity(body):
    assert_identity(build_manifest(body), body)


# --- detection ---------------------------------------------------------------------------------


@pytest.mark.parametrize("body,dialect", [
    ({"model": "gpt-4o", "messages": [{"role": "system", "content": "x"}]}, names.DIALECT_CHAT_COMPLETIONS),
    ({"model": "gpt-4o", "messages": [], "max_completion_tokens": 5}, names.DIALECT_CHAT_COMPLETIONS),
    ({"model": "c", "system": "x", "messages": []}, names.DIALECT_ANTHROPIC_MESSAGES),
    ({"model": "c", "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}]}, names.DIALECT_ANTHROPIC_MESSAGES),
    ({"model": "gpt-5", "input": "hi"}, names.DIALECT_OPENAI_RESPONSES),
    ({"model": "gpt-5", "instructions": "x", "input": []}, names.DIALECT_OPENAI_RESPONSES),
])
def test_dialect_detection(body, dialect):
    assert detect_dialect(body) == dialect


def test_non_objects_and_unknown_dialects_are_errors():
    with pytest.raises(ManifestError):
        build_manifest([1, 2], None)  # type: ignore[arg-type]
    with pytest.raises(ManifestError) as error:
        build_manifest({}, "\x1b[31mevil dialect")
    assert "\x1b" not in str(error.value) and "evil" not in str(error.value)


def test_malformed_fields_are_framing_not_crashes():
    body = {"model": 7, "messages": "not a list", "tools": {"a": 1}, "system": None, "thinking": "x"}
    for dialect in names.DIALECTS:
        manifest = build_manifest(body, dialect)
        assert_identity(manifest, body)


# --- no free text ---------------------------------------------------------------------------

HOSTILE = [
    "\x1b[31mred\x1b[0m", "line\nbreak", "<script>alert(1)</script>", "a" * 65, "ignore previous; rm -rf /",
    "gpt-4o\n", "sk-proj-AbCdEf0123456789", "名前", "",
]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_identifiers_become_fingerprints(hostile):
    shown = safe_identifier(hostile)
    assert shown.startswith("sha256:") and len(shown) == len("sha256:") + 12
    assert hostile not in shown or hostile == ""


@pytest.mark.parametrize("plain", ["gpt-4o", "claude-sonnet-4-5", "models/gemini-2.5:latest", "o3", "search_web"])
def test_plain_identifiers_are_kept(plain):
    assert safe_identifier(plain) == plain


def test_error_text_keeps_plain_words_and_fingerprints_the_rest():
    message = "Expecting value: line 1 column 5 (char 4) near sk-AbC123 and \x1b[2J<b>"
    shown = safe_error_text(message)
    assert shown.startswith("Expecting value: line 1 column 5 (char 4) near sha256:")
    for bad in ("sk-AbC123", "\x1b", "<b>"):
        assert bad not in shown
    assert len(safe_error_text("word " * 500).split()) <= 41


@pytest.mark.parametrize("url,host_class", [
    ("http://127.0.0.1:9000/v1", "loopback"), ("http://localhost/v1", "loopback"), ("http://[::1]:80", "loopback"),
    ("https://10.2.3.4/v1", "private"), ("http://llm.internal:8080", "private"), ("http://gateway/v1", "private"),
    ("https://api.anthropic.com", "public"), ("https://8.8.8.8", "public"),
])
def test_endpoints_are_classes_and_fingerprints(url, host_class):
    shown_class, shown_fingerprint = endpoint_class(url)
    assert shown_class == host_class
    assert shown_fingerprint.startswith("sha256:")
    # Same origin, different path → same fingerprint: the path is not identity.
    assert endpoint_class(url.rstrip("/") + "/other")[1] == shown_fingerprint

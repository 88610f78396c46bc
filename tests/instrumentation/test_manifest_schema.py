"""The request manifest's JSON Schema: derived from its declaration, and every manifest fits it."""

from __future__ import annotations

import copy

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from promptprism.instrumentation.manifest import MANIFEST_SCHEMA_VERSION, RequestManifest, build_manifest, json_schema
from promptprism.wire import names

from .manifest_strategies import dialect_and_body

VALIDATOR = jsonschema.Draft202012Validator(json_schema())
ENDPOINTS = st.none() | st.sampled_from(["http://127.0.0.1:8765/v1", "https://api.openai.com/v1",
                                         "http://10.0.0.7:4000", "https://llm.internal:8443"])


def test_the_schema_is_a_valid_json_schema_of_the_declaration():
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["title"] == "RequestManifest" and schema["additionalProperties"] is False
    properties = schema["properties"]
    assert set(properties) == set(RequestManifest.__dataclass_fields__)
    assert set(schema["required"]) == set(properties)  # to_json always writes every field
    assert properties["dialect"]["enum"] == list(names.DIALECTS)
    assert properties["schema_version"]["const"] == MANIFEST_SCHEMA_VERSION
    assert all(prop.get("description") for prop in properties.values())


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dialect_and_body, st.none() | st.integers(1, 2_000_000), ENDPOINTS)
def test_every_manifest_validates(case, context_window, endpoint):
    dialect, body = case
    manifest = build_manifest(body, dialect, context_window=context_window, endpoint=endpoint)
    document = manifest.to_json()
    VALIDATOR.validate(document)
    # The stdlib to_json and pydantic's reading of the declaration agree.
    assert TypeAdapter(RequestManifest).dump_python(manifest, mode="json") == document


@pytest.mark.parametrize("change", [
    lambda document: document.update(surprise=1),
    lambda document: document.update(dialect="gemini"),
    lambda document: document.update(body_sha256="not-a-digest"),
    lambda document: document["tools"].append({"name": "x", "size": 1}),
    lambda document: document.pop("bytes_total"),
    lambda document: document.update(schema_version=MANIFEST_SCHEMA_VERSION + 1),
    lambda document: document["tokens_by_class"].update(images=3),
], ids=["extra field", "unknown dialect", "bad digest", "tool without sha256", "missing field", "other version",
        "unknown byte class"])
def test_the_schema_rejects_what_a_manifest_never_is(change):
    body = {"model": "gpt-4o", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]}
    document = build_manifest(body).to_json()
    VALIDATOR.validate(document)
    broken = copy.deepcopy(document)
    change(broken)
    with pytest.raises(jsonschema.ValidationError):
        VALIDATOR.validate(broken)

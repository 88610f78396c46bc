"""An export's deduplication token (convert.payload_token): the same bytes of the same signal name the
same export, wherever they are converted; anything else is another export."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from promptprism.collector.store.base import checked_token
from promptprism.collector.write.convert import (
    LOGS_TOKEN_PREFIX,
    METRICS_TOKEN_PREFIX,
    convert_logs,
    convert_metrics,
    convert_traces,
    payload_token,
)
from promptprism.collector.write.sink import group_token

from ..collector_harness import prompt_export


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=4096), st.integers(min_value=0, max_value=4095), st.integers(min_value=1, max_value=255))
def test_a_token_names_its_bytes_and_signal(payload, position, change):
    token = payload_token(payload)
    assert checked_token(token) == token and len(token) == 64  # a hex digest ClickHouse takes as it is
    assert payload_token(bytes(payload)) == payload_token(memoryview(payload)) == token  # a worker hashes a view
    signals = {token, payload_token(payload, LOGS_TOKEN_PREFIX), payload_token(payload, METRICS_TOKEN_PREFIX)}
    assert len(signals) == 3  # one set in the sink remembers the tokens of every signal
    if payload:
        changed = bytearray(payload)
        changed[position % len(payload)] ^= change
        assert payload_token(bytes(changed)) != token
    assert payload_token(payload + b"\0") != token


def test_a_resent_export_has_the_token_of_the_first_and_its_group_too():
    payload = prompt_export()
    first, again = convert_traces(payload, "protobuf"), convert_traces(bytes(payload), "protobuf")
    assert first.dedup_token == again.dedup_token == payload_token(payload)
    other = convert_traces(prompt_export(), "protobuf")  # another span: other ids
    assert other.dedup_token != first.dedup_token
    assert group_token([first.dedup_token, other.dedup_token]) == group_token([other.dedup_token, again.dedup_token])


def test_the_same_bytes_sent_as_traces_logs_and_metrics_are_three_exports():
    # An empty payload is a valid export of every signal: each converter must name it apart.
    tokens = {convert(b"", "protobuf").dedup_token for convert in (convert_traces, convert_logs, convert_metrics)}
    assert tokens == {payload_token(b""), payload_token(b"", LOGS_TOKEN_PREFIX),
                      payload_token(b"", METRICS_TOKEN_PREFIX)}
    assert len(tokens) == 3

"""Failure descriptions keep what an operator needs and drop message text."""

from promptprism.collector._logsafe import describe_exception, describe_store_error
from promptprism.collector.store.base import StoreError, StoreUnavailable

SECRET = "You are Juniper, the user's password is hunter2"


def test_server_errors_keep_code_and_name_only():
    error = StoreError(f"Code: 27. DB::Exception: Cannot parse input: expected '\\t' before: '{SECRET}': "
                       "(at row 1) (CANNOT_PARSE_INPUT_ASSERTION_FAILED) (version 26.9.2.1)")
    assert describe_store_error(error) == "ClickHouse error 27 CANNOT_PARSE_INPUT_ASSERTION_FAILED"


def test_transport_failures_keep_their_text_other_errors_only_their_type():
    down = StoreUnavailable("ClickHouse at 127.0.0.1:8123: Connection refused")
    assert describe_store_error(down) == "ClickHouse at 127.0.0.1:8123: Connection refused"
    assert describe_store_error(StoreError(f"write failed: {SECRET}")) == "StoreError"
    assert describe_store_error(StoreUnavailable(f"Code: 210. DB::Exception: {SECRET}")) == "ClickHouse error 210"


def test_exceptions_are_described_by_type_and_place_not_message():
    def convert():
        raise ValueError(f"Could not convert '{SECRET}' with type str")

    try:
        convert()
    except ValueError as error:
        described = describe_exception(error)
    assert described.startswith("ValueError at test_logsafe.py:")
    assert "convert" in described and "hunter2" not in described

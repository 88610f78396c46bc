"""store.base.is_transient: which store failures may pass later (retry or spool) and which never will."""

from __future__ import annotations

import pytest

from promptprism.collector.store.base import is_transient, server_code

# What chdb said when the table's directory was made immutable (chattr +i) under an insert.
UNWRITABLE = ('Code: 1001. DB::Exception: std::__1::filesystem::filesystem_error: filesystem error: in '
              'create_directories: Operation not permitted ["/data/store/048/0482/tmp_insert_all_2_2_0"]. '
              '(STD_EXCEPTION)')


@pytest.mark.parametrize("text", [
    UNWRITABLE,
    "Code: 252. DB::Exception: Too many parts (300) in table. (TOO_MANY_PARTS)",
    "Code: 243. DB::Exception: Cannot reserve 1.00 MiB, not enough space. (NOT_ENOUGH_SPACE)",
    "Code: 159. DB::Exception: Timeout exceeded: elapsed 30 seconds. (TIMEOUT_EXCEEDED)",
    "Code: 76. DB::Exception: Cannot open file /data/x.bin, errno: 13, strerror: Permission denied. (CANNOT_OPEN_FILE)",
    "Code: 1001. DB::Exception: std::exception. Code: 1001, type: std::system_error, e.what() = "
    "No space left on device (STD_EXCEPTION)",
])
def test_faults_of_the_store_may_pass_later(text):
    assert is_transient(text)


@pytest.mark.parametrize("text", [
    "Code: 27. DB::Exception: Cannot parse input: expected '\\t' before: 'x'. (CANNOT_PARSE_INPUT_ASSERTION_FAILED)",
    "Code: 53. DB::Exception: Type mismatch in IN or VALUES section. (TYPE_MISMATCH)",
    "Code: 62. DB::Exception: Syntax error: failed at position 1. (SYNTAX_ERROR)",
    "Code: 16. DB::Exception: No such column nope in table. (NO_SUCH_COLUMN_IN_TABLE)",
])
def test_data_the_store_can_never_accept_is_not_retried(text):
    assert not is_transient(text)


def test_the_code_is_read_from_the_text():
    assert server_code(UNWRITABLE) == 1001 and server_code("no code here") is None

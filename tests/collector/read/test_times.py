"""times: the one syntax of since= / until= / bucket= for every route and verb. Pure."""

from __future__ import annotations

import pytest

from promptprism.collector.read.errors import BadArgument
from promptprism.collector.read.times import parse_duration, parse_moment

NOW = 1_700_000_000 * 10**9 + 123


@pytest.mark.parametrize("text, expected", [
    ("now", NOW),
    ("15m", NOW - 900 * 10**9),
    ("2h", NOW - 7200 * 10**9),
    ("7d", NOW - 7 * 86400 * 10**9),
    ("1w", NOW - 7 * 86400 * 10**9),
    ("1700000000", 1_700_000_000 * 10**9),
    ("1700000000.5", 1_700_000_000 * 10**9 + 500_000_000),
    ("2023-11-14T22:13:20Z", 1_700_000_000 * 10**9),
    ("2023-11-14T22:13:20.000001Z", 1_700_000_000 * 10**9 + 1000),
    ("2023-11-14T23:13:20+01:00", 1_700_000_000 * 10**9),
    ("2023-11-14", 1_699_920_000 * 10**9),  # a bare date is UTC midnight
])
def test_moments(text, expected):
    assert parse_moment("since", text, now=NOW) == expected


@pytest.mark.parametrize("text", ["yesterday", "7x", "2025-13-01", "-5m", ""])
def test_a_bad_moment_names_the_parameter_and_the_forms(text):
    with pytest.raises(BadArgument, match=r"until=.*expected an RFC 3339 time.*15m"):
        parse_moment("until", text, now=NOW)


def test_durations_take_the_age_syntax_and_plain_seconds():
    assert [parse_duration("bucket", text) for text in ("90s", "15m", "1h", "1d", "1w", "3600")] == [
        90, 900, 3600, 86400, 604800, 3600]


@pytest.mark.parametrize("text", ["0", "0m", "1.5h", "soon", "-1d"])
def test_a_bad_duration_is_a_bad_argument(text):
    with pytest.raises(BadArgument, match="bucket="):
        parse_duration("bucket", text)


@pytest.mark.parametrize("text", ["99999999999d", "9" * 30, "2300-01-01T00:00:00Z", "1969-12-31"])
def test_moments_outside_the_store_range_are_bad_arguments(text):
    with pytest.raises(BadArgument):
        parse_moment("since", text, now=NOW)


def test_durations_longer_than_any_window_are_bad_arguments():
    with pytest.raises(BadArgument):
        parse_duration("bucket", "99999999999d")

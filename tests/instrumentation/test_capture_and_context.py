"""Content-capture setting and ambient correlation attributes."""

from __future__ import annotations

import asyncio

import pytest

from promptprism.instrumentation import _capture as capture
from promptprism.instrumentation._capture import (
    capture_mode,
    configure_content_capture,
    parse_capture_mode,
    reread_environment,
    span_content_enabled,
)
from promptprism.instrumentation._context import correlation, correlation_attributes, current_correlation
from promptprism.wire import names


@pytest.mark.parametrize("raw, mode", [
    ("true", capture.CAPTURE_SPAN_ONLY), ("True", capture.CAPTURE_SPAN_ONLY), ("false", capture.CAPTURE_NO_CONTENT),
    ("span_and_event", capture.CAPTURE_SPAN_AND_EVENT), (" EVENT_ONLY ", capture.CAPTURE_EVENT_ONLY),
    ("", capture.CAPTURE_NO_CONTENT), (None, capture.CAPTURE_NO_CONTENT), (True, capture.CAPTURE_SPAN_ONLY),
    (False, capture.CAPTURE_NO_CONTENT),
])
def test_parse_capture_mode(raw, mode):
    assert parse_capture_mode(raw) == mode


def test_unknown_explicit_mode_is_an_error_but_a_bad_environment_value_is_not(monkeypatch):
    with pytest.raises(ValueError, match="OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"):
        configure_content_capture("sometimes")
    monkeypatch.setenv(capture.ENV_CAPTURE_MESSAGE_CONTENT, "sometimes")
    reread_environment()
    assert capture_mode() == capture.CAPTURE_NO_CONTENT


def test_configuration_beats_environment_and_none_restores_it(monkeypatch):
    monkeypatch.setenv(capture.ENV_CAPTURE_MESSAGE_CONTENT, "SPAN_AND_EVENT")
    reread_environment()
    assert span_content_enabled()
    configure_content_capture(False)
    assert not span_content_enabled()
    assert span_content_enabled(True)  # an explicit argument beats both
    configure_content_capture(None)
    assert span_content_enabled()


def test_correlation_nests_and_restores():
    assert current_correlation() == {}
    with correlation(conversation_id="c1", attempt=0):
        with correlation(message_id="m1", attempt=3) as inner:
            assert inner == {names.GEN_AI_CONVERSATION_ID: "c1", names.MESSAGE_ID: "m1", names.ATTEMPT: 3}
        assert current_correlation() == {names.GEN_AI_CONVERSATION_ID: "c1", names.ATTEMPT: 0}
    assert current_correlation() == {}


def test_correlation_is_per_task():
    async def task(conversation):
        with correlation(conversation_id=conversation):
            await asyncio.sleep(0)
            return current_correlation()[names.GEN_AI_CONVERSATION_ID]

    async def both():
        return await asyncio.gather(task("a"), task("b"))

    assert asyncio.run(both()) == ["a", "b"]


def test_unknown_correlation_keyword_is_rejected():
    with pytest.raises(TypeError, match="unknown correlation keyword 'conversation'"):
        correlation_attributes(conversation="x")

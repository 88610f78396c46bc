"""conventions.events: what one GenAI log event contributes to its request, computed at ingest."""

from __future__ import annotations

import json

from promptprism.collector.conventions.events import CONTRIBUTION_VERSION, DETAILS, INPUT, OUTPUT, contribute
from promptprism.collector.record import GenAIEvent
from promptprism.wire import names


def contribution(event_name: str, body=None, attributes=None) -> GenAIEvent:
    event = GenAIEvent(1, "a" * 32, "b" * 16, 0, event_name, "app", "", "" if body is None else json.dumps(body),
                       "" if attributes is None else json.dumps(attributes), "e" * 64)
    contribute(event)
    assert event.contribution_version == CONTRIBUTION_VERSION
    return event


def test_a_system_message_contributes_its_message_and_its_text():
    event = contribution(names.EVENT_SYSTEM_MESSAGE, {"content": [{"type": "text", "text": "Be "}, "brief."]})
    assert (event.contribution, event.system_text, event.message_has_parts) == (INPUT, "Be brief.", True)
    assert json.loads(event.message) == {"role": "system", "parts": [{"type": "text", "content": "Be "},
                                                                     {"type": "text", "content": "brief."}]}
    assert event.instructions_text is None and event.system_instructions is None


def test_the_bodys_role_wins_and_other_roles_carry_no_system_text():
    assert contribution(names.EVENT_USER_MESSAGE, {"role": "developer", "content": "X"}).system_text == "X"
    user = contribution(names.EVENT_USER_MESSAGE, {"content": "hi"})
    assert (user.contribution, user.system_text, json.loads(user.message)["role"]) == (INPUT, None, "user")


def test_a_message_sent_without_content_has_no_parts():
    event = contribution(names.EVENT_SYSTEM_MESSAGE, None)
    assert (event.message_has_parts, event.system_text, json.loads(event.message)) == (
        False, None, {"role": "system", "parts": []})


def test_a_choice_contributes_an_output_message_and_its_index():
    event = contribution(names.EVENT_CHOICE, {"index": 2, "finish_reason": "stop",
                                              "message": {"role": "assistant", "content": "Four."}})
    assert (event.contribution, event.message_index, event.message_has_parts) == (OUTPUT, 2, True)
    assert json.loads(event.message) == {"role": "assistant", "parts": [{"type": "text", "content": "Four."}],
                                         "finish_reason": "stop"}


def test_an_operation_details_event_contributes_the_span_attributes_it_carries():
    instructions = [{"type": "text", "content": "A"}, {"type": "text", "content": "B"}]
    messages = [{"role": "system", "content": "One."}, {"role": "developer", "parts": [{"content": "Two"}]},
                {"role": "user", "content": "hi"}]
    event = contribution(names.EVENT_INFERENCE_DETAILS, attributes={
        names.GEN_AI_SYSTEM_INSTRUCTIONS: instructions, names.GEN_AI_INPUT_MESSAGES: json.dumps(messages),
        names.GEN_AI_REQUEST_MODEL: "m"})
    assert event.contribution == DETAILS
    assert json.loads(event.system_instructions) == instructions and event.instructions_text == "AB"
    assert event.input_messages == json.dumps(messages)  # a string is JSON text already, kept as sent
    assert event.system_text == "One.\n\nTwo"
    assert event.output_messages is None and event.message is None


def test_details_without_text_say_the_attribute_is_there():
    event = contribution(names.EVENT_INFERENCE_DETAILS, attributes={
        names.GEN_AI_SYSTEM_INSTRUCTIONS: [{"type": "image"}], names.GEN_AI_INPUT_MESSAGES: []})
    assert (event.system_instructions, event.instructions_text) == ('[{"type":"image"}]', None)
    assert (event.input_messages, event.system_text) == ("[]", None)
    absent = contribution(names.EVENT_INFERENCE_DETAILS, attributes={names.GEN_AI_OPERATION_NAME: "chat"})
    assert (absent.system_instructions, absent.input_messages, absent.output_messages) == (None, None, None)

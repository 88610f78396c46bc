"""Hypothesis strategies: request bodies of each dialect, with arbitrary text and extras."""

from __future__ import annotations

from hypothesis import strategies as st

from promptprism.wire import names

# Any Unicode except surrogates (which JSON text cannot carry unescaped).
text = st.text(max_size=40)
identifier = st.from_regex(r"[A-Za-z0-9._-]{1,20}", fullmatch=True)
json_leaf = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False) | text
json_value = st.recursive(
    json_leaf,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(text, children, max_size=3),
    max_leaves=8,
)
# Parameters that belong to no class: they are framing.
extra_parameters = st.dictionaries(
    st.sampled_from(["temperature", "top_p", "metadata", "user", "seed", "stop", "x_extra"]), json_value, max_size=3
)


def _content(part_types: list[str]):
    text_part = st.fixed_dictionaries({"type": st.just("text"), "text": text})
    other_part = st.builds(lambda kind, value: {"type": kind, "payload": value}, st.sampled_from(part_types), json_value)
    return text | st.lists(text_part | other_part, max_size=3)


def chat_completions_bodies():
    role = st.sampled_from(["system", "developer", "user", "assistant", "tool", "function"])
    message = st.builds(
        lambda role, content, extra: {"role": role, "content": content, **extra},
        role, _content(["image_url", "input_audio", "file"]),
        st.dictionaries(st.sampled_from(["name", "tool_call_id"]), text, max_size=1),
    )
    tool = st.builds(lambda name, schema: {"type": "function", "function": {"name": name, "parameters": schema}},
                     identifier | text, json_value)
    return st.builds(
        lambda model, messages, tools, effort, extras: {
            "model": model, "messages": messages, **({"tools": tools} if tools else {}),
            **({"reasoning_effort": effort} if effort else {}), **extras,
        },
        identifier | text, st.lists(message, max_size=6), st.lists(tool, max_size=3),
        st.none() | st.sampled_from(["low", "medium", "high"]), extra_parameters,
    )


def anthropic_messages_bodies():
    block = st.one_of(
        st.fixed_dictionaries({"type": st.just("text"), "text": text}),
        st.fixed_dictionaries({"type": st.just("image"), "source": json_value}),
        st.fixed_dictionaries({"type": st.just("tool_result"), "tool_use_id": text,
                               "content": text | st.lists(st.fixed_dictionaries({"type": st.just("document"),
                                                                                 "source": json_value}), max_size=2)}),
        st.fixed_dictionaries({"type": st.just("tool_use"), "id": text, "name": identifier, "input": json_value}),
    )
    message = st.builds(lambda role, content: {"role": role, "content": content},
                        st.sampled_from(["user", "assistant"]), text | st.lists(block, max_size=3))
    system = st.none() | text | st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": text}), max_size=3)
    tool = st.builds(lambda name, schema: {"name": name, "input_schema": schema}, identifier | text, json_value)
    thinking = st.none() | st.builds(lambda budget: {"type": "enabled", "budget_tokens": budget},
                                     st.integers(1024, 64000))
    return st.builds(
        lambda model, system, messages, tools, thinking, max_tokens, extras: {
            "model": model, "max_tokens": max_tokens, "messages": messages,
            **({"system": system} if system is not None else {}), **({"tools": tools} if tools else {}),
            **({"thinking": thinking} if thinking else {}), **extras,
        },
        identifier | text, system, st.lists(message, max_size=6), st.lists(tool, max_size=3), thinking,
        st.integers(1, 100000), extra_parameters,
    )


def openai_responses_bodies():
    item = st.one_of(
        st.builds(lambda role, content: {"role": role, "content": content},
                  st.sampled_from(["system", "developer", "user", "assistant"]),
                  text | st.lists(st.one_of(st.fixed_dictionaries({"type": st.just("input_text"), "text": text}),
                                            st.fixed_dictionaries({"type": st.just("input_image"), "image_url": text})),
                                  max_size=3)),
        st.fixed_dictionaries({"type": st.just("function_call_output"), "call_id": text, "output": text}),
        st.fixed_dictionaries({"type": st.just("function_call"), "call_id": text, "name": identifier, "arguments": text}),
    )
    tool = st.builds(lambda name, schema: {"type": "function", "name": name, "parameters": schema},
                     identifier | text, json_value) | st.just({"type": "web_search"})
    return st.builds(
        lambda model, instructions, items, tools, effort, extras: {
            "model": model, "input": items, **({"instructions": instructions} if instructions is not None else {}),
            **({"tools": tools} if tools else {}), **({"reasoning": {"effort": effort}} if effort else {}), **extras,
        },
        identifier | text, st.none() | text, text | st.lists(item, max_size=6), st.lists(tool, max_size=3),
        st.none() | st.sampled_from(["minimal", "low", "high"]), extra_parameters,
    )


BODIES = {
    names.DIALECT_CHAT_COMPLETIONS: chat_completions_bodies(),
    names.DIALECT_ANTHROPIC_MESSAGES: anthropic_messages_bodies(),
    names.DIALECT_OPENAI_RESPONSES: openai_responses_bodies(),
}

dialect_and_body = st.sampled_from(names.DIALECTS).flatmap(lambda dialect: st.tuples(st.just(dialect), BODIES[dialect]))

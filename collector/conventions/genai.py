"""The GenAI semantic conventions (current and older spellings) → the request record. Pure.

A field that one GenAI attribute fills declares that attribute in
``record.py`` (``declared`` copies it). This module holds the rest of the
conventions, where a field has more than one source:

- the provider: ``gen_ai.provider.name``, else the older ``gen_ai.system``;
- usage: the current token names first, the older ones as a fallback;
- content flattened the older way (``gen_ai.prompt.N.role`` /
  ``.content``, ``gen_ai.completion.N.*``) when the span carries no
  ``gen_ai.input.messages`` / ``gen_ai.output.messages``.
"""

from __future__ import annotations

from typing import Mapping

from ...wire import names
from ..record import RequestRecord
from ._convention import Convention, integer, json_text
from .system_prompt import legacy_messages

# The current name first, the older spelling after it.
PROVIDER = (names.GEN_AI_PROVIDER_NAME, names.GEN_AI_SYSTEM)
USAGE = (
    ("input_tokens", (names.GEN_AI_USAGE_INPUT_TOKENS, names.GEN_AI_USAGE_PROMPT_TOKENS)),
    ("output_tokens", (names.GEN_AI_USAGE_OUTPUT_TOKENS, names.GEN_AI_USAGE_COMPLETION_TOKENS)),
)
FLATTENED_CONTENT_PREFIXES = (names.GEN_AI_PROMPT_PREFIX, names.GEN_AI_COMPLETION_PREFIX)


def fill(attributes: Mapping[str, object], record: RequestRecord) -> None:
    current, older = PROVIDER
    provider = attributes.get(current, attributes.get(older))
    record.provider = provider if isinstance(provider, str) else ""
    for field_name, keys in USAGE:
        for key in keys:
            whole = integer(attributes.get(key))
            if whole is not None:
                setattr(record, field_name, whole)
                break
    if not record.input_messages or not record.output_messages:
        inputs, outputs = legacy_messages(attributes)
        record.input_messages = record.input_messages or (json_text(inputs) if inputs else "")
        record.output_messages = record.output_messages or (json_text(outputs) if outputs else "")


CONVENTION = Convention(
    name="genai", fill=fill,
    attributes=frozenset([*PROVIDER, *(key for _, keys in USAGE for key in keys)]),
    prefixes=FLATTENED_CONTENT_PREFIXES)

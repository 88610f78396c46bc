"""Semantic conventions: what instrumentations' attributes mean for a request record.

A ``Convention`` takes a decoded span's attributes and fills request record
fields, and names the attributes it turns into fields (they are not copied
into the record's ``attributes`` as well). Reassembly runs every convention
of ``CONVENTIONS`` in order:

- ``declared``: each field ``record.py`` declares with its one span
  attribute, converted by its column's type;
- ``genai``: the GenAI semantic conventions beyond one attribute per field
  (the provider and usage under current and older names, cache reads and
  writes under every spelling, tool definitions, content flattened as
  ``gen_ai.prompt.N.*``) — OpenLLMetry, OpenLIT, provider SDKs' own spans
  and the official instrumentations all speak it;
- ``openinference``: OpenInference's ``llm.*``, ``input.value`` / ``output.value``;
- ``vercel_ai``: the Vercel AI SDK's ``ai.*`` on its ``doGenerate`` / ``doStream`` spans.

A field an earlier convention filled is kept; ``genai.complete`` then
decides what needs every convention's answer (the model's fallbacks, input
tokens that leave the cache out). The README's convention table lists which
attribute fills which field. ``detection`` says which spans are requests,
``providers`` normalises provider and operation names, ``tools`` turns every
form of tool definitions into ``tools`` rows, ``system_prompt`` finds the
system prompt in the GenAI content attributes; ``events`` computes, at
ingest, what a GenAI log event contributes to its request; ``json_text`` is
how captured content is held as text.
"""

from __future__ import annotations

from typing import Mapping

from ..record import RequestRecord
from ._convention import Convention, json_text, parsed
from . import declared, genai, openinference, vercel_ai
from .detection import is_request

__all__ = ["CONVENTIONS", "CONSUMED", "CONSUMED_PREFIXES", "Convention", "fill", "is_request", "json_text", "parsed",
           "declared", "detection", "events", "genai", "openinference", "providers", "system_prompt", "tools",
           "vercel_ai"]

CONVENTIONS: tuple[Convention, ...] = (
    declared.CONVENTION, genai.CONVENTION, openinference.CONVENTION, vercel_ai.CONVENTION)
# What every convention together turns into fields: exact keys, and key prefixes (flattened forms).
CONSUMED: frozenset[str] = frozenset().union(*(convention.attributes for convention in CONVENTIONS))
CONSUMED_PREFIXES: tuple[str, ...] = tuple(prefix for convention in CONVENTIONS for prefix in convention.prefixes)


def fill(attributes: Mapping[str, object], record: RequestRecord) -> None:
    """Fill ``record``'s fields from a span's ``attributes``, every convention in order."""
    for convention in CONVENTIONS:
        convention.fill(attributes, record)
    genai.complete(record)

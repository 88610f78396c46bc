"""Provider clients: one call records every request an official client sends.

>>> from promptprism.instrumentation.providers import instrument_openai, instrument_anthropic
>>> openai_client = instrument_openai(OpenAI())
>>> anthropic_client = instrument_anthropic(AsyncAnthropic())

Each request becomes a span (README "The request span on the wire") carrying the request manifest and, when
the system prompt was rendered through promptprism, its block map. Neither
provider library is imported here; they are the ``providers`` extra.
"""

from ._anthropic import ANTHROPIC_ROUTES, instrument_anthropic, uninstrument_anthropic
from ._openai import OPENAI_ROUTES, instrument_openai, uninstrument_openai
from ._transport import ContextWindow

__all__ = [
    "ANTHROPIC_ROUTES",
    "OPENAI_ROUTES",
    "ContextWindow",
    "instrument_anthropic",
    "instrument_openai",
    "uninstrument_anthropic",
    "uninstrument_openai",
]

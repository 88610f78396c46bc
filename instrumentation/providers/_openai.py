"""Instrument an official ``openai`` client: Chat Completions and Responses, sync and async.

Does not import the ``openai`` library (the base install has none): it wraps
the client's httpx transport, see :mod:`._transport`.

>>> client = instrument_openai(OpenAI(), context_window=128_000)
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from ...wire import names
from ._transport import ContextWindow, ProviderSettings, http_client_of, instrument_http_client, uninstrument_http_client

# Path suffixes, so Azure's /openai/deployments/NAME/chat/completions and
# proxies with a path prefix are recognised too.
OPENAI_ROUTES = (
    ("/chat/completions", names.DIALECT_CHAT_COMPLETIONS),
    ("/responses", names.DIALECT_OPENAI_RESPONSES),
)

Client = TypeVar("Client")


def instrument_openai(client: Client, *, context_window: ContextWindow = None, tracer_provider: Any = None,
                      capture_content: str | bool | None = None,
                      clock: Callable[[], int] | None = None) -> Client:
    """Record every Chat Completions and Responses request ``client`` sends; returns the client.

    ``context_window`` (tokens: one number, a ``{model: tokens}`` mapping or a
    callable) sets the manifest's headroom. ``clock`` returns the Unix time
    in ns at which a request starts (default: now), for replayed or simulated
    traffic; the span keeps the request's real duration. Copies made with
    ``client.with_options()`` share the transport and are recorded too.
    """
    settings = ProviderSettings(names.PROVIDER_OPENAI, OPENAI_ROUTES, context_window, tracer_provider, capture_content,
                                clock)
    instrument_http_client(http_client_of(client), settings)
    return client


def uninstrument_openai(client: Any) -> bool:
    return uninstrument_http_client(http_client_of(client))

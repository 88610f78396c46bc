"""Instrument an official ``anthropic`` client: Messages, sync and async, streamed or not.

Does not import the ``anthropic`` library (the base install has none): it
wraps the client's httpx transport, see :mod:`._transport`.

>>> client = instrument_anthropic(Anthropic(), context_window=200_000)
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from ...wire import names
from ._transport import ContextWindow, ProviderSettings, http_client_of, instrument_http_client, uninstrument_http_client

# Only message creation: /v1/messages/count_tokens and /v1/messages/batches
# end differently and pass through unrecorded.
ANTHROPIC_ROUTES = (("/messages", names.DIALECT_ANTHROPIC_MESSAGES),)

Client = TypeVar("Client")


def instrument_anthropic(client: Client, *, context_window: ContextWindow = None, tracer_provider: Any = None,
                         capture_content: str | bool | None = None,
                         clock: Callable[[], int] | None = None) -> Client:
    """Record every Messages request ``client`` sends; returns the client.

    ``context_window`` (tokens: one number, a ``{model: tokens}`` mapping or a
    callable) sets the manifest's headroom. ``clock`` returns the Unix time
    in ns at which a request starts (default: now), for replayed or simulated
    traffic; the span keeps the request's real duration.
    """
    settings = ProviderSettings(names.PROVIDER_ANTHROPIC, ANTHROPIC_ROUTES, context_window, tracer_provider,
                                capture_content, clock)
    instrument_http_client(http_client_of(client), settings)
    return client


def uninstrument_anthropic(client: Any) -> bool:
    return uninstrument_http_client(http_client_of(client))

"""The OTLP receivers: transports only, bytes in, an answer out.

``grpc`` (``TraceService`` / ``LogsService`` ``Export``) and ``http``
(``POST /v1/traces``, ``/v1/logs``) check the token (``auth``), bound and
decompress the payload, hand it to ``write.ingest.Ingest`` and turn its
outcome into their protocol's answer with the one status table in
``answers``. They convert nothing themselves.
"""

from __future__ import annotations

from .grpc import GrpcReceiver
from .http import traces_app

__all__ = ["GrpcReceiver", "traces_app", "answers", "auth", "grpc", "http"]

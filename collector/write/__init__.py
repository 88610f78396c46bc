"""The write path: decoded OTLP → request records → table rows → the store, durably.

``convert`` turns one export payload into tables (``otlp`` decoding,
``reassemble`` into request records, ``genai_events`` for log records,
``rows`` into Arrow columns); ``workers`` runs it in other processes;
``ingest`` is the transport-independent front the receivers call;
``sink`` makes the tables durable (``spool`` on disk while the store is down).
Nothing here imports the read side.
"""

from __future__ import annotations

__all__ = ["convert", "genai_events", "ingest", "reassemble", "rows", "sink", "spool", "workers"]

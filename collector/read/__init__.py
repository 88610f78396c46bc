"""The read side: stored rows → request objects, diffs and insights, served as API, pages and CLI answers.

``queries`` holds the named SQL of the lookups, ``lookups`` validates what a
caller asked for and answers with request objects (``request_view``), joined
with their GenAI log events (``events``); ``diff`` compares two requests,
``lineage`` says which requests may be compared at all. ``api`` (JSON),
``inspector`` (HTML) and ``insight`` (growth, cache, headroom; also the
Grafana dashboard) are the front doors; ``formatting`` is shared by the
inspector and the CLI.

Nothing is imported here: the CLI's light verbs import ``formatting``
without pulling in the web server.
"""

from __future__ import annotations

__all__ = ["api", "diff", "events", "formatting", "insight", "inspector", "lineage", "lookups", "queries",
           "request_view"]

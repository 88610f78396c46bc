"""Insight queries — prompt growth, cache breaks, context headroom.

One set of named SQL queries (``queries``) serves four front doors: the
Grafana dashboards (``grafana`` renders them with the plugin's macros), the
JSON API and the overview page (``routes``), and the CLI verbs ``growth`` and
``cache`` (through the API). ``report`` runs them and shapes the answers.
"""

from __future__ import annotations

__all__ = ["cache_queries", "grafana", "growth_queries", "named_query", "overview", "queries", "report", "routes"]

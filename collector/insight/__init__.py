"""Insight queries — prompt growth, cache breaks, context headroom.

One set of named SQL queries (``queries``) serves four front doors: the
Grafana dashboards (``grafana`` renders them with the plugin's macros), the
JSON API and the overview page (``routes``), and the CLI verbs ``growth`` and
``cache`` (through the API). ``report`` runs them and shapes the answers.
"""

from __future__ import annotations

__all__ = ["insight_routes"]


def insight_routes(store):  # noqa: ANN001 - Store; imported lazily so the CLI stays light
    """Starlette routes: /api/insight/{growth,cache,headroom} and /overview."""
    from .routes import insight_routes as build

    return build(store)

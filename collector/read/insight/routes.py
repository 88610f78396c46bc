"""HTTP front door of the insight queries: JSON under ``/api/insight/`` and
the HTML overview page. ``collector/app.py`` mounts ``insight_routes(store)``
on the UI server (behind its UI token, when one is set).

Handlers only read query parameters and call ``report``; the store calls
block, so they run in the thread pool.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...store.base import Store
from ..inspector.pages import Pages
from .. import models
from ..models import InsightParameters, parameters
from ..web import json_answer
from . import overview, report
from .report import Filters, Window

# Per-request cache verdicts the overview lists: enough to see the pattern
# (and the inputs) without turning the page into the requests table.
OVERVIEW_VERDICTS = 20


def _parameters(request: Request) -> InsightParameters:
    return parameters(InsightParameters, dict(request.query_params))


def _filters(given: InsightParameters) -> Filters:
    return Filters(service=given.service, model=given.model, process=given.process, conversation=given.conversation)


def _window(given: InsightParameters) -> Window:
    return Window.parse(given.since, given.until)


def _growth_window(given: InsightParameters) -> Window | None:
    """None without since/until: ``report.growth`` then compares the latest part of the stored data."""
    return _window(given) if given.since or given.until else None


def insight_routes(store: Store, pages: Pages | None = None) -> list[Route]:
    pages = pages or Pages()

    def growth_answer(request: Request) -> dict[str, Any]:
        given = _parameters(request)
        return report.growth(store, _growth_window(given), _filters(given), dimension=given.dimension,
                             bucket=given.bucket)

    def cache_answer(request: Request) -> dict[str, Any]:
        given = _parameters(request)
        return report.cache(store, _window(given), _filters(given), limit=given.limit, bucket=given.bucket)

    def headroom_answer(request: Request) -> dict[str, Any]:
        given = _parameters(request)
        return report.headroom(store, _window(given), _filters(given), limit=given.limit, bucket=given.bucket)

    async def growth(request: Request) -> Response:
        return await json_answer(lambda: growth_answer(request), models.Growth)

    async def cache(request: Request) -> Response:
        return await json_answer(lambda: cache_answer(request), models.Cache)

    async def headroom(request: Request) -> Response:
        return await json_answer(lambda: headroom_answer(request), models.Headroom)

    def overview_page(request: Request) -> str:
        given = _parameters(request)
        window, filters = _window(given), _filters(given)
        growth_window = _growth_window(given)
        growth = report.growth(store, growth_window, filters, dimension="name")
        if growth_window is None:  # the by-layer view compares the same periods
            growth_window = Window.parse(growth["window"]["since"], growth["window"]["until"])
        return overview.render(
            growth=growth,
            growth_by_layer=report.growth(store, growth_window, filters, dimension="layer"),
            cache=report.cache(store, window, filters, limit=OVERVIEW_VERDICTS),
            headroom=report.headroom(store, window, filters, limit=20),
            query={key: request.query_params.get(key, "") for key in ("since", "until", "service", "model", "process")},
        )

    async def overview_handler(request: Request) -> Response:
        return await pages.answer(lambda: {"html": overview_page(request)}, "raw.html")

    return [
        Route("/api/insight/growth", growth, methods=["GET"]),
        Route("/api/insight/cache", cache, methods=["GET"]),
        Route("/api/insight/headroom", headroom, methods=["GET"]),
        Route("/overview", overview_handler, methods=["GET"]),
    ]

"""HTTP front door of the insight queries: JSON under ``/api/insight/`` and
the HTML overview page. ``collector/app.py`` mounts ``insight_routes(store)``
on the UI server (behind its UI token, when one is set).

Handlers only read query parameters and call ``report``; the store calls
block, so they run in the thread pool.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from ..._logsafe import describe_store_error
from ...store.base import Store, StoreError, StoreUnavailable
from . import overview, report
from .report import Filters, InsightError, Window

logger = logging.getLogger(__name__)

# Per-request cache verdicts the overview lists: enough to see the pattern
# (and the inputs) without turning the page into the requests table.
OVERVIEW_VERDICTS = 20


def _filters(request: Request) -> Filters:
    query = request.query_params
    return Filters(service=query.get("service", ""), model=query.get("model", ""),
                   process=query.get("process", ""), conversation=query.get("conversation", ""))


def _window(request: Request) -> Window:
    return Window.parse(request.query_params.get("since"), request.query_params.get("until"))


def _growth_window(request: Request) -> Window | None:
    """None without since/until: ``report.growth`` then compares the latest part of the stored data."""
    if request.query_params.get("since") or request.query_params.get("until"):
        return _window(request)
    return None


def _failure(error: Exception, *, html: bool = False) -> Response:
    if isinstance(error, InsightError):
        status, message = 400, str(error)
    elif isinstance(error, StoreUnavailable):
        status, message = 503, f"store unavailable: {error}"
    else:
        logger.error("insight query failed: %s", describe_store_error(error))
        status, message = 500, f"store query failed: {error}"
    headers = {"Retry-After": "5"} if status == 503 else None
    if html:
        from html import escape

        return HTMLResponse(f"<!doctype html><title>promptprism</title><p>{escape(message)}</p>",
                            status_code=status, headers=headers)
    return JSONResponse({"error": message}, status_code=status, headers=headers)


async def _answer(work: Callable[[], Any], *, html: bool = False) -> Response:
    try:
        result = await run_in_threadpool(work)
    except (InsightError, StoreError) as error:
        return _failure(error, html=html)
    return HTMLResponse(result) if html else JSONResponse(result)


def insight_routes(store: Store) -> list[Route]:
    async def growth(request: Request) -> Response:
        return await _answer(lambda: report.growth(
            store, _growth_window(request), _filters(request),
            dimension=request.query_params.get("dimension", "name"),
            bucket=request.query_params.get("bucket")))

    async def cache(request: Request) -> Response:
        return await _answer(lambda: report.cache(
            store, _window(request), _filters(request),
            limit=request.query_params.get("limit"), bucket=request.query_params.get("bucket")))

    async def headroom(request: Request) -> Response:
        return await _answer(lambda: report.headroom(
            store, _window(request), _filters(request),
            limit=request.query_params.get("limit"), bucket=request.query_params.get("bucket")))

    def overview_page(request: Request) -> str:
        window, filters = _window(request), _filters(request)
        growth_window = _growth_window(request)
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
        return await _answer(lambda: overview_page(request), html=True)

    return [
        Route("/api/insight/growth", growth, methods=["GET"]),
        Route("/api/insight/cache", cache, methods=["GET"]),
        Route("/api/insight/headroom", headroom, methods=["GET"]),
        Route("/overview", overview_handler, methods=["GET"]),
    ]

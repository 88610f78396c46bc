"""HTTP front door of the insight queries: JSON under ``/api/insight/`` and
the HTML overview page. ``collector/app.py`` mounts ``insight_routes(store)``
on the UI server (behind its UI token, when one is set).

Handlers only read query parameters and call ``report``; the store calls
block, so they run in the thread pool.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...store.base import Store
from ..inspector.pages import Pages
from .. import lookups, models
from ..errors import BadArgument
from ..times import NANOSECONDS
from ..models import InsightParameters, parameters
from ..web import json_answer
from . import overview, report
from .report import Filters, Window

# Per-request cache verdicts and headroom rows the overview lists: enough to
# see the pattern (and the inputs) without turning the page into the requests table.
OVERVIEW_VERDICTS = 20
OVERVIEW_HEADROOM_ROWS = 20


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

    def overview_page(request: Request) -> dict[str, Any]:
        given = _parameters(request)
        window, filters = _window(given), _filters(given)
        # Every query of the page stays inside the selected window: growth compares the
        # later half of the requests stored in it with the earlier half.
        # What the queries are specialized for (rolled-up hours, prompts from events), read once for
        # the window (the growth comparison reads it again for its periods if they reach past it).
        known = report.snapshot(store, window.since, window.until)
        compared, basis = report.growth_window(store, filters, within=window, known=known)
        # The three answers are independent reads: asked at once, the page waits for the slowest,
        # not the sum (the store already serves concurrent requests of the UI server).
        with ThreadPoolExecutor(max_workers=3, thread_name_prefix="overview") as pool:
            growth_both = pool.submit(report.growth_by_name_and_layer, store, compared, filters,
                                      bucket=given.bucket, known=known)
            cache = pool.submit(report.cache, store, window, filters, limit=OVERVIEW_VERDICTS, bucket=given.bucket,
                                known=known)
            headroom = pool.submit(report.headroom, store, window, filters, limit=OVERVIEW_HEADROOM_ROWS,
                                   bucket=given.bucket, known=known)
            (growth, growth_by_layer), cache, headroom = (
                future.result() for future in (growth_both, cache, headroom))
        return {
            **_form(request, given, window),
            "window": window.as_json(),
            "growth": growth,
            "growth_basis": basis,
            "growth_by_layer": growth_by_layer,
            "cache": cache,
            "verdicts": overview.verdict_rows(cache["requests"]),
            "headroom": headroom,
            "charts": {
                "layers": overview.stacked_bars(growth_by_layer["series"], series_key="series",
                                                value_key="bytes_per_request", unit="B",
                                                bucket_seconds=growth_by_layer["bucket_seconds"]),
                "contributions": overview.contribution_bars(growth["attribution"]),
                "cache": overview.stacked_bars(overview.cache_rows(cache["series"]), series_key="series",
                                               value_key="value", unit="", bucket_seconds=cache["bucket_seconds"],
                                               color=overview.cache_color),
                "headroom": overview.lines(headroom["series"], series_key="model", value_key="max_used_pct", unit="%",
                                           bucket_seconds=headroom["bucket_seconds"]),
            },
        }

    def _form(request: Request, given: InsightParameters | None, window: Window | None) -> dict[str, Any]:
        """The filter form's values and choices (services, models, processes seen in the window)."""
        shown = {name: request.query_params.get(name, "") for name in ("since", "until", "service", "model", "process")}
        links = {name: value for name, value in shown.items() if value}
        if window is None:
            window = Window.parse(None, None)
        choices = lookups.filter_choices(store, window.since * NANOSECONDS, (window.until + 1) * NANOSECONDS)
        return {"filters": shown, "choices": choices, "api_query": ("?" + urlencode(links)) if links else "",
                "error": None}

    def overview_form_with_error(request: Request, error: BadArgument) -> dict[str, Any]:
        return {**_form(request, None, None), "error": str(error), "growth": None, "window": None}

    async def overview_handler(request: Request) -> Response:
        return await pages.answer(lambda: overview_page(request), "overview.html",
                                  on_bad_argument=lambda error: overview_form_with_error(request, error))

    return [
        Route("/api/insight/growth", growth, methods=["GET"]),
        Route("/api/insight/cache", cache, methods=["GET"]),
        Route("/api/insight/headroom", headroom, methods=["GET"]),
        Route("/overview", overview_handler, methods=["GET"]),
    ]

"""The HTML inspector (README "Reading: API, inspector, CLI"): server-rendered pages over the same reads as the API.

Jinja2 with autoescaping renders every page, so captured text (prompts,
tools, messages, responses: all untrusted) reaches the browser as text.
Styles and the one script are served from this package: the inspector works
offline, with no CDN.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ...store.base import Store
from .. import lookups, times
from ..errors import BadArgument
from . import presentation
from .pages import STATIC, STATIC_PREFIX, Pages

# How many requests the front page lists per page (the next page is a link).
INDEX_LIMIT = 100
# The filter menus offer the services, models and processes seen this long
# back (a month covers what the page is used for; anything older can be typed).
INDEX_CHOICES_WINDOW_NS = 30 * 86400 * times.NANOSECONDS
LATEST_NS = times.MAX_MOMENT_NS  # the last moment the keys can prune by (read/times.py)


def search_target(text: str) -> str:
    """Where the search box goes: a 32-hex trace id opens the trace, anything else the request (id or prefix)."""
    value = text.strip()
    if len(value) == lookups.TRACE_ID_LENGTH and all(character in "0123456789abcdefABCDEF" for character in value):
        return f"/trace/{value.lower()}"
    return f"/requests/{quote(value, safe='')}"


def inspector_routes(store: Store, pages: Pages | None = None) -> list:
    pages = pages or Pages()
    render = pages.answer

    def index_form(params: dict[str, str], error: str | None) -> dict[str, Any]:
        since_ns = times.now_ns() - INDEX_CHOICES_WINDOW_NS
        return {"filters": params, "error": error, "choices": lookups.filter_choices(store, since_ns, LATEST_NS)}

    async def index(request: Request) -> Response:
        params = {name: value for name, value in request.query_params.items()
                  if name in lookups.LIST_PARAMETERS and value}
        wanted = request.query_params.get("id", "").strip()
        if wanted:
            return RedirectResponse(search_target(wanted), status_code=303)
        unknown = sorted(set(request.query_params) - set(lookups.LIST_PARAMETERS) - {"id"})

        def work() -> dict[str, Any]:
            if unknown:
                raise BadArgument(f"unknown filter {unknown[0]!r}")
            listing = lookups.list_summaries(store, {"limit": str(INDEX_LIMIT), **params})
            bars = lookups.layer_bars(store, listing["requests"])
            newer = {name: value for name, value in params.items() if name != "cursor"}
            return {**index_form(params, None), **listing, "bars": bars,
                    "next_query": urlencode({**newer, "cursor": listing["next_cursor"]}) if listing["next_cursor"] else "",
                    "first_query": urlencode(newer) if "cursor" in params else None}

        def form_with_error(error: BadArgument) -> dict[str, Any]:
            return {**index_form(params, str(error)), "requests": [], "total": 0, "total_exact": True,
                    "next_cursor": None, "bars": {}, "next_query": "", "first_query": None}

        return await render(work, "index.html", on_bad_argument=form_with_error)

    async def trace(request: Request) -> Response:
        def work() -> dict[str, Any]:
            result = lookups.trace(store, request.path_params["trace_id"])
            return {"trace": result, "rows": presentation.trace_rows(result["requests"]),
                    "legend": presentation.layer_legend(result["requests"])}

        return await render(work, "trace.html")

    async def one_request(request: Request) -> Response:
        def work() -> dict[str, Any]:
            item = lookups.request(store, request.path_params["request_id"])
            return {"request": item, "view": presentation.request_page(item)}

        return await render(work, "request.html")

    async def diff(request: Request) -> Response:
        text_a = request.query_params.get("a", "")
        text_b = request.query_params.get("b", "")

        def work() -> dict[str, Any]:
            return {"diff": lookups.diff(store, text_a, text_b)}

        return await render(work, "diff.html")

    return [
        Route("/", index, methods=["GET"]),
        Route("/requests", index, methods=["GET"]),
        Route("/trace/{trace_id}", trace, methods=["GET"]),
        Route("/requests/{request_id}", one_request, methods=["GET"]),
        Route("/diff", diff, methods=["GET"]),
        Mount(STATIC_PREFIX, app=StaticFiles(directory=STATIC), name="promptprism-static"),
    ]


__all__ = ["inspector_routes", "STATIC_PREFIX"]

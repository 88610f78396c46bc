"""The HTML inspector (README "Reading: API, inspector, CLI"): server-rendered pages over the same reads as the API.

Jinja2 with autoescaping renders every page, so captured text (prompts,
tools, messages, responses: all untrusted) reaches the browser as text.
Styles and the one script are served from this package: the inspector works
offline, with no CDN.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ...store.base import Store
from .. import lookups
from . import presentation
from .pages import STATIC, STATIC_PREFIX, Pages

# How many requests the front page lists before the reader narrows the filters.
INDEX_LIMIT = 100


def inspector_routes(store: Store, pages: Pages | None = None) -> list:
    pages = pages or Pages()
    render = pages.answer

    async def index(request: Request) -> Response:
        params = {name: value for name, value in request.query_params.items()
                  if name in lookups.LIST_PARAMETERS and value}
        if request.query_params.get("id"):
            return RedirectResponse(f"/requests/{request.query_params['id'].strip()}", status_code=303)

        def work() -> dict[str, Any]:
            listing = lookups.list_summaries(store, {"limit": str(INDEX_LIMIT), **params})
            return {"requests": listing["requests"], "filters": params}

        return await render(work, "index.html")

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

"""The HTML inspector of SPEC §5: server-rendered pages over the same reads as the API.

Jinja2 with autoescaping renders every page, so captured text (prompts,
tools, messages, responses: all untrusted) reaches the browser as text.
Styles and the one script are served from this package: the inspector works
offline, with no CDN.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ...store.base import Store, StoreError, StoreUnavailable
from .. import lookups
from . import presentation

_HERE = os.path.dirname(os.path.abspath(__file__))
STATIC_PREFIX = "/static/promptprism"

# How many requests the front page lists before the reader narrows the filters.
INDEX_LIMIT = 100


def _environment() -> Environment:
    environment = Environment(
        loader=FileSystemLoader(os.path.join(_HERE, "templates")),
        autoescape=select_autoescape(["html"], default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(presentation.FILTERS)
    environment.globals.update(presentation.GLOBALS, static=STATIC_PREFIX)
    return environment


_ERROR_TITLES = {400: "Bad request", 404: "Not found", 409: "Ambiguous id", 500: "Store failure",
                 503: "Store unavailable"}


def inspector_routes(store: Store) -> list:
    environment = _environment()

    def page(template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        html = environment.get_template(template).render(**context)
        return HTMLResponse(html, status_code=status_code)

    def error_page(error: Exception) -> HTMLResponse:
        if isinstance(error, lookups.BadArgument):
            status = 400
        elif isinstance(error, lookups.NotFound):
            status = 404
        elif isinstance(error, lookups.Ambiguous):
            status = 409
        elif isinstance(error, StoreUnavailable):
            status = 503
        else:
            status = 500
        return page("error.html", status, status=status, title=_ERROR_TITLES[status], message=str(error),
                    candidates=getattr(error, "candidates", []))

    async def render(work: Callable[[], dict[str, Any]], template: str) -> Response:
        try:
            context = await run_in_threadpool(work)
        except (lookups.BadArgument, lookups.NotFound, lookups.Ambiguous, StoreError) as error:
            return error_page(error)
        return page(template, **context)

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
        Mount(STATIC_PREFIX, app=StaticFiles(directory=os.path.join(_HERE, "static")), name="promptprism-static"),
    ]


__all__ = ["inspector_routes", "STATIC_PREFIX"]

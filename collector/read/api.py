"""The JSON API (README "Reading: API, inspector, CLI"), as Starlette routes the collector's UI server mounts.

Handlers only translate HTTP to ``lookups`` calls and answers back
(``web.json_answer``); every failure is a JSON body ``{"error": "..."}``
with a status that tells the cases apart (``errors``): 400 malformed
argument, 404 nothing matches, 409 ambiguous prefix (with ``candidates``),
503 store unreachable, 500 store failure.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..store.base import Store
from . import lookups, models
from .web import json_answer

# Built once: the models do not change while the collector runs.
SCHEMA = models.json_schema()


def api_routes(store: Store) -> list[Route]:
    async def trace(request: Request) -> Response:
        return await json_answer(lambda: lookups.trace(store, request.path_params["trace_id"]), models.Trace)

    async def one_request(request: Request) -> Response:
        return await json_answer(lambda: lookups.request(store, request.path_params["request_id"]), models.Request)

    async def list_requests(request: Request) -> Response:
        params = dict(request.query_params)
        return await json_answer(lambda: lookups.list_summaries(store, params), models.RequestList)

    async def diff(request: Request) -> Response:
        params = request.query_params

        def work():
            given = models.parameters(models.DiffParameters, dict(params))
            return lookups.diff(store, given.a, given.b)

        return await json_answer(work, models.Diff)

    async def schema(request: Request) -> Response:
        return JSONResponse(SCHEMA)

    return [
        Route("/api/traces/{trace_id}", trace, methods=["GET"]),
        Route("/api/requests", list_requests, methods=["GET"]),
        Route("/api/requests/{request_id}", one_request, methods=["GET"]),
        Route("/api/diff", diff, methods=["GET"]),
        Route(models.SCHEMA_PATH, schema, methods=["GET"]),
    ]

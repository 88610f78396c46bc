"""The JSON API of SPEC §5, as Starlette routes the collector's UI server mounts.

Handlers only translate HTTP to ``lookups`` calls and answers back; every
failure is a JSON body ``{"error": "..."}`` with a status that tells the
cases apart: 400 malformed argument, 404 nothing matches, 409 ambiguous
prefix (with ``candidates``), 503 store unreachable, 500 store failure.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from .._logsafe import describe_store_error
from ..store.base import Store, StoreError, StoreUnavailable
from . import lookups

logger = logging.getLogger(__name__)


def error_response(error: Exception) -> JSONResponse:
    """The status and body for a failure raised by ``lookups`` or the store."""
    if isinstance(error, lookups.BadArgument):
        return JSONResponse({"error": str(error)}, status_code=400)
    if isinstance(error, lookups.NotFound):
        return JSONResponse({"error": str(error)}, status_code=404)
    if isinstance(error, lookups.Ambiguous):
        return JSONResponse(
            {"error": str(error), "candidates": error.candidates, "more_candidates": error.more},
            status_code=409,
        )
    if isinstance(error, StoreUnavailable):
        return JSONResponse({"error": f"store unavailable: {error}"}, status_code=503,
                            headers={"Retry-After": "5"})
    logger.error("read failed: %s", describe_store_error(error))
    return JSONResponse({"error": f"store query failed: {error}"}, status_code=500)


# Failures that become an answer; anything else is a bug and should surface.
ANSWERED_ERRORS = (lookups.BadArgument, lookups.NotFound, lookups.Ambiguous, StoreError)


async def answer(work: Callable[[], Any]) -> Any:
    """Run a blocking read in the thread pool (store calls block) and map its failures."""
    try:
        return await run_in_threadpool(work)
    except ANSWERED_ERRORS as error:
        return error_response(error)


def api_routes(store: Store) -> list[Route]:
    async def trace(request: Request) -> JSONResponse:
        result = await answer(lambda: lookups.trace(store, request.path_params["trace_id"]))
        return result if isinstance(result, JSONResponse) else JSONResponse(result)

    async def one_request(request: Request) -> JSONResponse:
        result = await answer(lambda: lookups.request(store, request.path_params["request_id"]))
        return result if isinstance(result, JSONResponse) else JSONResponse(result)

    async def list_requests(request: Request) -> JSONResponse:
        params = dict(request.query_params)
        result = await answer(lambda: lookups.list_summaries(store, params))
        return result if isinstance(result, JSONResponse) else JSONResponse(result)

    async def diff(request: Request) -> JSONResponse:
        params = request.query_params
        result = await answer(lambda: lookups.diff(store, params.get("a", ""), params.get("b", "")))
        return result if isinstance(result, JSONResponse) else JSONResponse(result)

    return [
        Route("/api/traces/{trace_id}", trace, methods=["GET"]),
        Route("/api/requests", list_requests, methods=["GET"]),
        Route("/api/requests/{request_id}", one_request, methods=["GET"]),
        Route("/api/diff", diff, methods=["GET"]),
    ]

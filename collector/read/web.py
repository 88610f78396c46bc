"""The read side's HTTP answers, one way: JSON for ``/api/*``, the inspector's pages for the rest.

Every route (the JSON API, the inspector, the insight routes and overview)
runs its blocking store work through ``json_answer`` or ``Pages.answer``
(``inspector.pages``), and every failure goes through ``errors``' one status
table: the API answers ``{"error": …}``, a page the styled error page.
Unknown paths get the same treatment (``not_found``), so ``/api/nope`` is
JSON and ``/nope`` a page.
"""

from __future__ import annotations

from typing import Any, Callable

from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from . import errors
from .inspector.pages import Pages

API_PREFIX = "/api/"


def json_error(error: Exception) -> JSONResponse:
    return JSONResponse(errors.body_of(error), status_code=errors.status_of(error), headers=errors.headers_of(error))


async def json_answer(work: Callable[[], Any], model: type[BaseModel] | None = None) -> Response:
    """Run a blocking read in the thread pool (store calls block); its answer as JSON, shaped by ``model``."""
    try:
        result = await run_in_threadpool(work)
    except errors.ANSWERED_ERRORS as error:
        return json_error(error)
    if model is not None:
        # The answer goes out as the schema (GET /api/schema) describes it, or not at all.
        result = model.model_validate(result).model_dump(mode="json")
    return JSONResponse(result)


def not_found(pages: Pages) -> Callable:
    """Starlette's handler for paths and methods no route takes: JSON under /api/, else the error page."""

    async def handle(request: Request, exception: HTTPException) -> Response:
        status = exception.status_code
        if status == 404:
            message = f"no such page: {request.url.path}"
        elif status == 405:
            message = f"{request.method} is not allowed on {request.url.path}"
        else:
            message = exception.detail
        if request.url.path.startswith(API_PREFIX) or request.url.path == API_PREFIX.rstrip("/"):
            return JSONResponse({"error": message}, status_code=status, headers=exception.headers)
        return pages.error_page(status, message, headers=exception.headers)

    return handle


__all__ = ["API_PREFIX", "json_answer", "json_error", "not_found"]

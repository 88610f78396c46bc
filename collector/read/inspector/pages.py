"""The inspector's pages: Jinja2 templates with autoescaping, and the one error page.

Captured text (prompts, tools, messages, responses: all untrusted) reaches
the browser as text. Every page route answers through ``Pages.answer``, so a
failure is the styled error page with the status ``errors`` gives it.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.responses import HTMLResponse, Response

from .. import errors
from . import presentation

_HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATES = os.path.join(_HERE, "templates")
STATIC = os.path.join(_HERE, "static")
STATIC_PREFIX = "/static/promptprism"


class Pages:
    """The inspector's templates, and the error page every page route answers with."""

    def __init__(self) -> None:
        self.environment = Environment(
            loader=FileSystemLoader(TEMPLATES),
            autoescape=select_autoescape(["html"], default=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.environment.filters.update(presentation.FILTERS)
        self.environment.globals.update(presentation.GLOBALS, static=STATIC_PREFIX)

    def page(self, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(self.environment.get_template(template).render(**context), status_code=status_code)

    def error_page(self, status: int, message: str, *, candidates: list[str] = (), headers=None) -> HTMLResponse:
        response = self.page("error.html", status, status=status, title=errors.TITLES.get(status, "Error"),
                             message=message, candidates=list(candidates))
        if headers:
            response.headers.update(headers)
        return response

    def failure(self, error: Exception) -> HTMLResponse:
        return self.error_page(errors.status_of(error), errors.message_of(error),
                               candidates=getattr(error, "candidates", []), headers=errors.headers_of(error))

    async def answer(self, work: Callable[[], dict[str, Any]], template: str,
                     on_bad_argument: Callable[[errors.BadArgument], dict[str, Any]] | None = None) -> Response:
        """Render ``template`` with the context ``work`` builds in the thread pool; a failure as the error page.

        ``on_bad_argument``: a page with a form answers a bad filter with the
        form and the error (status 400), not with the bare error page.
        """
        try:
            context = await run_in_threadpool(work)
        except errors.BadArgument as error:
            if on_bad_argument is None:
                return self.failure(error)
            try:
                context = await run_in_threadpool(on_bad_argument, error)
            except errors.ANSWERED_ERRORS as second:
                return self.failure(second)
            return self.page(template, 400, **context)
        except errors.ANSWERED_ERRORS as error:
            return self.failure(error)
        return self.page(template, **context)


__all__ = ["Pages", "STATIC", "STATIC_PREFIX", "TEMPLATES"]

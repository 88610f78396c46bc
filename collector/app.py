"""The collector process: config → store → sink → receivers + the UI server.

``Collector.start`` brings the parts up in dependency order and
``Collector.stop`` takes them down in reverse, flushing the sink so that
everything acknowledged is written. The UI server answers ``GET /healthz``
(200 once the receivers listen), ``GET /metrics`` (Prometheus or OpenMetrics
text, as the scraper asks) and
mounts the read side's routes (JSON API, inspector, insight).

When ``PROMPTPRISM_UI_TOKEN`` is set every UI route needs it, except
``/healthz`` (load balancers probe it) and ``/metrics`` (counts only, never
content; scrapers rarely carry tokens). A browser may pass ``?token=`` once:
it becomes an HttpOnly cookie and the URL is cleaned.
"""

from __future__ import annotations

import gc
import logging
import socket
import threading
from urllib.parse import parse_qsl, urlencode

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from .config import LOOPBACK_NAMES, PROMPTPRISM_UI_ALLOWED_HOSTS, WILDCARD_HOSTS, CollectorConfig, is_loopback
from .metrics import Metrics
from .read.api import api_routes
from .read_limits import INGEST_ACTIVE_SECONDS, ReadGate, ReadStore
from .read.insight.rollups import RollupJob
from .read.insight.routes import insight_routes
from .read.inspector import inspector_routes
from .read.inspector.pages import Pages
from .read.web import not_found
from .receive import GrpcReceiver, traces_app
from .receive.auth import authorized
from .store import open_store
from .write.ingest import Ingest
from .write.workers import keep_collector_memory

logger = logging.getLogger(__name__)

OPEN_PATHS = frozenset({"/healthz", "/metrics"})
TOKEN_COOKIE = "promptprism_ui_token"
TOKEN_QUERY = "token"
# Waiting for a listener to come up; a healthy one takes milliseconds.
SERVER_START_TIMEOUT_SECONDS = 30.0
# In-flight OTLP/HTTP exports get this long to finish on shutdown.
HTTP_GRACEFUL_SHUTDOWN_SECONDS = 10
# The receive path allocates a dict per span event (tens of thousands per
# export); CPython's default generation-0 threshold (700) would run the
# collector every few events and rescan the live batches. A higher threshold
# keeps collections, and memory, bounded while removing most of that work.
GC_GENERATION0_THRESHOLD = 50_000


def tune_process() -> None:
    """For the collector process (the CLI calls this; a library user decides for themselves):
    the cyclic GC's thresholds, and freed memory kept for the next export."""
    gc.freeze()  # everything imported so far is permanent: never rescan it
    _, generation1, generation2 = gc.get_threshold()
    gc.set_threshold(GC_GENERATION0_THRESHOLD, generation1, generation2)
    keep_collector_memory()


class ServerThread:
    """A uvicorn server on its own thread and event loop, on a socket we bind
    ourselves (so a taken port is an error here, and port 0 works)."""

    def __init__(self, app, host: str, port: int, *, name: str, ssl_certfile: str | None = None,
                 ssl_keyfile: str | None = None):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.socket.bind((host, port))
        except OSError as error:
            self.socket.close()
            raise OSError(f"cannot listen for {name} on {host}:{port}: {error.strerror or error}") from None
        self.host, self.port = host, self.socket.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile,
                                timeout_graceful_shutdown=HTTP_GRACEFUL_SHUTDOWN_SECONDS)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]},
                                       name=f"promptprism-{name}", daemon=True)

    def start(self) -> None:
        self.thread.start()
        deadline = threading.Event()
        for _ in range(int(SERVER_START_TIMEOUT_SECONDS / 0.01)):
            if self.server.started or not self.thread.is_alive():
                break
            deadline.wait(0.01)
        if not self.server.started:
            raise OSError(f"server on {self.host}:{self.port} did not start")

    def stop(self) -> None:
        self.server.should_exit = True
        if self.thread.ident is not None:  # a start that failed later may stop one never started
            self.thread.join()
        self.socket.close()


def read_side_routes(store, pages: Pages) -> list:
    """The JSON API, insight and inspector routes."""
    return [*api_routes(store), *insight_routes(store, pages), *inspector_routes(store, pages)]


class UiTokenGuard:
    """ASGI middleware: every path outside OPEN_PATHS needs the UI token."""

    def __init__(self, app, token: str):
        self.app, self.token = app, token

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            return await self.app(scope, receive, send)
        request = Request(scope)
        if authorized(self.token, request.headers.get("authorization")) or \
                authorized(self.token, f"Bearer {request.cookies.get(TOKEN_COOKIE, '')}"):
            return await self.app(scope, receive, send)
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        presented = next((value for key, value in query if key == TOKEN_QUERY), None)
        if presented is not None and authorized(self.token, f"Bearer {presented}"):
            rest = urlencode([(key, value) for key, value in query if key != TOKEN_QUERY])
            # Only ever to a path of this server: "//evil.example/" would be another site to the browser.
            local_path = "/" + scope["path"].lstrip("/\\")
            response: Response = RedirectResponse(local_path + (f"?{rest}" if rest else ""), status_code=303)
            response.set_cookie(TOKEN_COOKIE, presented, httponly=True, samesite="strict")
        else:
            response = JSONResponse({"error": "missing or wrong UI token (Authorization: Bearer …)"},
                                    status_code=401, headers={"WWW-Authenticate": "Bearer"})
        await response(scope, receive, send)


class HostGuard:
    """ASGI middleware: answer only requests whose Host names this server (DNS rebinding).

    A page on another site can make a browser resolve its own name to
    127.0.0.1 and read the UI as same-origin; the Host header still carries
    that name, so a request naming a host outside ``allowed`` is refused.
    Probes and scrapes (OPEN_PATHS) carry no content and are not checked.
    """

    def __init__(self, app, allowed: frozenset[str]):
        self.app, self.allowed = app, allowed

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            return await self.app(scope, receive, send)
        host = Request(scope).headers.get("host")
        if host is None or host_name(host) in self.allowed:
            return await self.app(scope, receive, send)
        response = JSONResponse({"error": f"this server does not answer for that Host; list it in "
                                          f"{PROMPTPRISM_UI_ALLOWED_HOSTS}"}, status_code=421)
        await response(scope, receive, send)


def host_name(header: str) -> str:
    """``example.org:4380`` → ``example.org``; ``[::1]:4380`` → ``::1``; lowercase."""
    text = header.strip().lower()
    if text.startswith("["):
        return text[1:text.find("]")] if "]" in text else text
    return text.rsplit(":", 1)[0] if text.count(":") == 1 else text


def ui_allowed_hosts(config: CollectorConfig) -> frozenset[str] | None:
    """The Host names the UI answers: the configured list, else the bound address and, bound to a
    loopback address, the loopback names; None (any) when bound to every address without a list."""
    if config.ui_allowed_hosts:
        return frozenset(config.ui_allowed_hosts)
    host = config.ui_address[0].lower()
    if host in WILDCARD_HOSTS:
        return None
    return frozenset({host, *LOOPBACK_NAMES}) if is_loopback(host) else frozenset({host})


def ui_app(store, *, metrics: Metrics, token: str | None, ready: threading.Event):
    async def healthz(request: Request) -> JSONResponse:
        if not ready.is_set():
            return JSONResponse({"status": "starting"}, status_code=503)
        return JSONResponse({"status": "ok"})

    async def metrics_text(request: Request) -> Response:
        body, content_type = metrics.render(request.headers.get("accept"))
        return Response(body, headers={"Content-Type": content_type})

    routes = [Route("/healthz", healthz), Route("/metrics", metrics_text)]
    pages = Pages()
    # A path or method no route takes: JSON under /api/, the styled error page elsewhere.
    handler = not_found(pages)
    # Readers must not starve ingest: bounded read requests, bounded read queries (read_limits).
    ingest_active = None if metrics is None else (lambda: metrics.ingest_active(INGEST_ACTIVE_SECONDS))
    app = ReadGate(Starlette(routes=routes + read_side_routes(ReadStore(store), pages),
                             exception_handlers={404: handler, 405: handler}), ingest_active=ingest_active)
    return UiTokenGuard(app, token) if token else app


class Collector:
    def __init__(self, config: CollectorConfig, *, store=None):
        """``store``: an open, migrated store to use (tests); else the configured one is opened."""
        self.config = config
        self.store = store
        self._owns_store = store is None
        self.metrics = Metrics(sink_stats=self._sink_stats)
        self.ready = threading.Event()
        self.sink = None
        self.grpc: GrpcReceiver | None = None
        self.http: ServerThread | None = None
        self.ui: ServerThread | None = None
        self.rollups = None

    def start(self) -> "Collector":
        from .write.sink import open_sink

        config = self.config
        tls = {"ssl_certfile": config.tls_cert_file, "ssl_keyfile": config.tls_key_file}
        try:
            if self.store is None:
                self.store = open_store(config)
            self.sink = open_sink(self.metrics.timed(self.store), data_dir=config.data_dir,
                                  spool_max_bytes=config.spool_max_bytes)
            for exposure in config.unauthenticated_exposure():  # allowed by --allow-unauthenticated
                logger.warning("UNAUTHENTICATED: %s; anyone who can reach it can send data or read every prompt",
                               exposure)
            app = ui_app(self.store, metrics=self.metrics, token=config.ui_token, ready=self.ready)
            allowed = ui_allowed_hosts(config)
            if allowed is not None:
                app = HostGuard(app, allowed)
            self.ui = ServerThread(app, *config.ui_address, name="ui", **tls)
            self.ui.start()
            ingest = Ingest(self.sink, self.metrics, self._conversion_pool(), retention_days=config.retention_days)
            scheme = "https" if config.tls else "http"
            inspector_url = f"{scheme}://{_host(self.ui.host)}:{self.ui.port}"
            self.http = ServerThread(traces_app(ingest, token=config.ingest_token,
                                                receive_limit_bytes=config.receive_limit_bytes,
                                                inspector_url=inspector_url),
                                     *config.otlp_http_address, name="otlp-http", **tls)
            self.grpc = GrpcReceiver(ingest, host=config.otlp_grpc_address[0], port=config.otlp_grpc_address[1],
                                     token=config.ingest_token, receive_limit_bytes=config.receive_limit_bytes,
                                     tls_cert_file=config.tls_cert_file, tls_key_file=config.tls_key_file)
            self.http.start()
            self.grpc.start()
            # the panels' hourly rollups, recomputed from the stored rows (read.insight.rollups)
            self.rollups = RollupJob(self.store).start()
        except BaseException:
            self.stop()
            raise
        self.ready.set()
        return self

    def _sink_stats(self) -> dict:
        sink = self.sink
        return sink.stats() if sink is not None else {}

    def _conversion_pool(self):
        """The process-wide pool of ``ingest_workers`` processes, started now; None for in-process conversion."""
        if not self.config.ingest_workers:
            return None
        from .write.workers import shared_pool

        pool = shared_pool(self.config.ingest_workers)
        pool.start()
        return pool

    def stop(self) -> None:
        """Stop taking exports, flush what was acknowledged, then close the rest."""
        self.ready.clear()
        if self.rollups is not None:
            self.rollups.stop()
            self.rollups = None
        if self.grpc is not None:
            self.grpc.stop()
            self.grpc = None
        if self.http is not None:
            self.http.stop()
            self.http = None
        if self.sink is not None:
            self.sink.close()
            self.sink = None
        if self.ui is not None:
            self.ui.stop()
            self.ui = None
        if self._owns_store and self.store is not None:
            self.store.close()
            self.store = None

    def __enter__(self) -> "Collector":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def endpoints(self) -> dict[str, str]:
        scheme = "https" if self.config.tls else "http"
        return {
            "otlp_grpc": f"{scheme}://{_host(self.grpc.host)}:{self.grpc.port}",
            "otlp_http": f"{scheme}://{_host(self.http.host)}:{self.http.port}",
            "ui": f"{scheme}://{_host(self.ui.host)}:{self.ui.port}",
        }


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host

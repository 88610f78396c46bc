"""Collector configuration: every variable named once, with its default.

Resolution order: command-line flag → environment variable → default
(as in opentelemetry-python's ``sdk/environment_variables``). Validated
strictly at start-up: a bad value is a clear error before anything listens.
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass, fields
from typing import Any, Mapping

from ..wire.errors import ConfigurationError

# The settings of README "The collector" (the table there lists each one) ---
PROMPTPRISM_STORE = "PROMPTPRISM_STORE"
PROMPTPRISM_DATA_DIR = "PROMPTPRISM_DATA_DIR"
PROMPTPRISM_RETENTION_DAYS = "PROMPTPRISM_RETENTION_DAYS"
PROMPTPRISM_OTLP_GRPC_ADDRESS = "PROMPTPRISM_OTLP_GRPC_ADDRESS"
PROMPTPRISM_OTLP_HTTP_ADDRESS = "PROMPTPRISM_OTLP_HTTP_ADDRESS"
PROMPTPRISM_UI_ADDRESS = "PROMPTPRISM_UI_ADDRESS"
PROMPTPRISM_INGEST_TOKEN = "PROMPTPRISM_INGEST_TOKEN"
PROMPTPRISM_UI_TOKEN = "PROMPTPRISM_UI_TOKEN"
# Limits, TLS, spool and workers (same table), each also a flag.
PROMPTPRISM_RECEIVE_LIMIT_BYTES = "PROMPTPRISM_RECEIVE_LIMIT_BYTES"
PROMPTPRISM_TLS_CERT_FILE = "PROMPTPRISM_TLS_CERT_FILE"
PROMPTPRISM_TLS_KEY_FILE = "PROMPTPRISM_TLS_KEY_FILE"
PROMPTPRISM_SPOOL_MAX_BYTES = "PROMPTPRISM_SPOOL_MAX_BYTES"
PROMPTPRISM_INGEST_WORKERS = "PROMPTPRISM_INGEST_WORKERS"
# Exposure (issue 14): a listener on a non-loopback address needs its token
# unless this says otherwise; the UI answers only the Host names listed here
# (default: the names of the address it is bound to).
PROMPTPRISM_ALLOW_UNAUTHENTICATED = "PROMPTPRISM_ALLOW_UNAUTHENTICATED"
PROMPTPRISM_UI_ALLOWED_HOSTS = "PROMPTPRISM_UI_ALLOWED_HOSTS"
# README "Deploying": a ClickHouse cluster name selects ON CLUSTER DDL
# (Replicated local tables + Distributed tables under the usual names);
# server store only.
PROMPTPRISM_CLICKHOUSE_CLUSTER = "PROMPTPRISM_CLICKHOUSE_CLUSTER"
# Where the CLI's read commands find the collector's API.
PROMPTPRISM_URL = "PROMPTPRISM_URL"

DEFAULT_URL = "http://127.0.0.1:4380"
# One OTLP export may hold hundreds of prompt spans (a 512-span batch is
# ~15–21 MB; README "The collector") and one prompt may be 10 MiB; gRPC's own
# 4 MiB default would refuse both. 64 MiB still bounds what one request can make us hold.
DEFAULT_RECEIVE_LIMIT_BYTES = 64 * 1024 * 1024
# Matches sink.DEFAULT_SPOOL_MAX_BYTES (not imported: config stays light):
# a day of moderate traffic while ClickHouse is down, without filling a small disk.
DEFAULT_SPOOL_MAX_BYTES = 2 * 1024 * 1024 * 1024
# Default number of ingest worker processes: one per CPU, at most this many.
# Past it the collector process (gRPC, chdb inserts) is the bottleneck, and
# each worker holds an export or two (up to the receive limit each) in memory.
MAX_DEFAULT_INGEST_WORKERS = 8


def default_ingest_workers() -> int:
    return max(1, min(os.cpu_count() or 1, MAX_DEFAULT_INGEST_WORKERS))


@dataclass(frozen=True)
class Setting:
    env: str
    default: Any
    help: str


# The collector's settings, in the order the README lists them. Each is also a
# flag of `promptprism collector` (--store, --data-dir, …).
SETTINGS: dict[str, Setting] = {
    "store": Setting(PROMPTPRISM_STORE, "embedded", "`embedded` (chdb) or a ClickHouse server URL"),
    "data_dir": Setting(PROMPTPRISM_DATA_DIR, "./promptprism-data", "embedded store and the ingest spool"),
    "retention_days": Setting(PROMPTPRISM_RETENTION_DAYS, 30, "the tables' TTL, in days"),
    "otlp_grpc_address": Setting(PROMPTPRISM_OTLP_GRPC_ADDRESS, "127.0.0.1:4317", "OTLP/gRPC listener"),
    "otlp_http_address": Setting(PROMPTPRISM_OTLP_HTTP_ADDRESS, "127.0.0.1:4318", "OTLP/HTTP listener"),
    "ui_address": Setting(PROMPTPRISM_UI_ADDRESS, "127.0.0.1:4380", "inspector, JSON API, /healthz, /metrics"),
    "ingest_token": Setting(PROMPTPRISM_INGEST_TOKEN, None, "bearer token required on OTLP requests"),
    "ui_token": Setting(PROMPTPRISM_UI_TOKEN, None, "bearer token required by the inspector and API"),
    "receive_limit_bytes": Setting(PROMPTPRISM_RECEIVE_LIMIT_BYTES, DEFAULT_RECEIVE_LIMIT_BYTES,
                                   "largest OTLP request accepted, in bytes after decompression"),
    "tls_cert_file": Setting(PROMPTPRISM_TLS_CERT_FILE, None, "PEM certificate: serve every listener over TLS"),
    "tls_key_file": Setting(PROMPTPRISM_TLS_KEY_FILE, None, "PEM private key for the certificate"),
    "spool_max_bytes": Setting(PROMPTPRISM_SPOOL_MAX_BYTES, DEFAULT_SPOOL_MAX_BYTES,
                               "on-disk spool bound while the store is down; past it, clients are told to retry"),
    "ingest_workers": Setting(PROMPTPRISM_INGEST_WORKERS, None,
                              "processes converting exports (default: one per CPU, at most "
                              f"{MAX_DEFAULT_INGEST_WORKERS}); 0 converts in the collector process"),
    "clickhouse_cluster": Setting(PROMPTPRISM_CLICKHOUSE_CLUSTER, None,
                                  "ClickHouse cluster name: ON CLUSTER DDL, Replicated + Distributed tables"),
    "allow_unauthenticated": Setting(PROMPTPRISM_ALLOW_UNAUTHENTICATED, False,
                                     "serve a non-loopback address without its token (a switch; warned loudly)"),
    "ui_allowed_hosts": Setting(PROMPTPRISM_UI_ALLOWED_HOSTS, None,
                                "comma-separated Host names the UI and API answer (default: the bound address's)"),
}
# Names that always mean this machine (a Host header's hostname, lowercase).
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARD_HOSTS = ("0.0.0.0", "::", "")


def is_loopback(host: str) -> bool:
    """True for localhost and loopback IP addresses: only this machine can connect."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve anywhere


def parse_switch(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ConfigurationError(f"{SETTINGS[name].env}={value!r}: expected true or false")


def resolve(name: str, flags: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> Any:
    """flag → environment → default, for one named setting (raw, unvalidated)."""
    setting = SETTINGS[name]
    if flags and flags.get(name) is not None:
        return flags[name]
    environ = os.environ if environ is None else environ
    value = environ.get(setting.env)
    if value is not None and value != "":
        return value
    return setting.default


def given_as(name: str, flags: Mapping[str, Any] | None = None) -> str:
    """How the user gave a setting, for an error to name it: the flag (``--ui-address``) when it was used."""
    if flags and flags.get(name) is not None:
        return "--" + name.replace("_", "-")
    return SETTINGS[name].env


def parse_address(name: str, value: str, label: str = "") -> tuple[str, int]:
    """``host:port`` (``[::1]:4317`` for IPv6) → (host, port), or a ConfigurationError naming the setting."""
    label = label or SETTINGS[name].env
    text = str(value).strip()
    if "://" in text:
        raise ConfigurationError(f"{label}={value!r}: expected host:port without a scheme, e.g. 127.0.0.1:4317")
    host, separator, port_text = text.rpartition(":")
    if not separator or not host:
        raise ConfigurationError(f"{label}={value!r}: expected host:port, e.g. 127.0.0.1:4317")
    host = host.strip("[]")
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigurationError(f"{label}={value!r}: port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise ConfigurationError(f"{label}={value!r}: port must be 0-65535")
    return host, port


def parse_whole_number(name: str, value: Any, *, minimum: int = 1, meaning: str = "", label: str = "") -> int:
    """A setting's whole number of at least ``minimum``, or a ConfigurationError naming the setting (``label``)."""
    label = label or SETTINGS[name].env
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ConfigurationError(f"{label}={value!r}: expected a whole number") from None
    if number < minimum:
        raise ConfigurationError(f"{label}={value!r}: must be at least {minimum}{meaning}")
    return number


def parse_positive_int(name: str, value: Any, label: str = "") -> int:
    return parse_whole_number(name, value, label=label)


def parse_ingest_workers(value: Any) -> int:
    if value is None:
        return default_ingest_workers()
    return parse_whole_number("ingest_workers", value, minimum=0, meaning=" (0: no workers)")


def _check_fields_match() -> None:  # keeps CollectorConfig and SETTINGS in step
    missing = set(SETTINGS) - {f.name for f in fields(CollectorConfig)}
    assert not missing, missing


@dataclass(frozen=True)
class CollectorConfig:
    store: str
    data_dir: str
    retention_days: int
    otlp_grpc_address: tuple[str, int]
    otlp_http_address: tuple[str, int]
    ui_address: tuple[str, int]
    ingest_token: str | None
    ui_token: str | None
    receive_limit_bytes: int = DEFAULT_RECEIVE_LIMIT_BYTES
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    spool_max_bytes: int = DEFAULT_SPOOL_MAX_BYTES
    clickhouse_cluster: str | None = None
    ingest_workers: int = 0
    allow_unauthenticated: bool = False
    ui_allowed_hosts: tuple[str, ...] | None = None

    @property
    def tls(self) -> bool:
        return self.tls_cert_file is not None

    @classmethod
    def load(cls, flags: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> "CollectorConfig":
        raw = {name: resolve(name, flags, environ) for name in SETTINGS}
        store = str(raw["store"]).strip()
        if store != "embedded" and not store.startswith(("http://", "https://")):
            raise ConfigurationError(
                f"{given_as('store', flags)}={store!r}: expected `embedded` or a ClickHouse URL "
                "like http://user:password@host:8123/database"
            )
        cluster = str(raw["clickhouse_cluster"]).strip() if raw["clickhouse_cluster"] else None
        if cluster is not None:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", cluster):
                raise ConfigurationError(f"{PROMPTPRISM_CLICKHOUSE_CLUSTER}={cluster!r}: a cluster name is an identifier")
            if store == "embedded":
                raise ConfigurationError(f"{PROMPTPRISM_CLICKHOUSE_CLUSTER} needs a ClickHouse server URL in "
                                  f"{PROMPTPRISM_STORE}; the embedded store is one process")
        cert, key = raw["tls_cert_file"] or None, raw["tls_key_file"] or None
        if (cert is None) != (key is None):
            raise ConfigurationError(f"{PROMPTPRISM_TLS_CERT_FILE} and {PROMPTPRISM_TLS_KEY_FILE} go together: set both or neither")
        for name, path in (("tls_cert_file", cert), ("tls_key_file", key)):
            if path is not None and not os.path.isfile(path):
                raise ConfigurationError(f"{given_as(name, flags)}={path!r}: no such file")

        def given(name: str) -> str:
            return given_as(name, flags)

        config = cls(
            store=store,
            data_dir=str(raw["data_dir"]),
            retention_days=parse_positive_int("retention_days", raw["retention_days"], given("retention_days")),
            otlp_grpc_address=parse_address("otlp_grpc_address", raw["otlp_grpc_address"], given("otlp_grpc_address")),
            otlp_http_address=parse_address("otlp_http_address", raw["otlp_http_address"], given("otlp_http_address")),
            ui_address=parse_address("ui_address", raw["ui_address"], given("ui_address")),
            ingest_token=raw["ingest_token"] or None,
            ui_token=raw["ui_token"] or None,
            receive_limit_bytes=parse_positive_int("receive_limit_bytes", raw["receive_limit_bytes"], given("receive_limit_bytes")),
            tls_cert_file=None if cert is None else str(cert),
            tls_key_file=None if key is None else str(key),
            spool_max_bytes=parse_positive_int("spool_max_bytes", raw["spool_max_bytes"], given("spool_max_bytes")),
            clickhouse_cluster=cluster,
            ingest_workers=parse_ingest_workers(raw["ingest_workers"]),
            allow_unauthenticated=parse_switch("allow_unauthenticated", raw["allow_unauthenticated"]),
            ui_allowed_hosts=tuple(name.strip().lower().strip("[]") for name in str(raw["ui_allowed_hosts"]).split(",")
                                   if name.strip()) or None if raw["ui_allowed_hosts"] else None,
        )
        exposed = config.unauthenticated_exposure()
        if exposed and not config.allow_unauthenticated:
            raise ConfigurationError(
                f"{'; '.join(exposed)}: anyone who can reach it could send data or read every prompt. "
                f"Set the token, bind 127.0.0.1, or pass --allow-unauthenticated "
                f"({PROMPTPRISM_ALLOW_UNAUTHENTICATED}=true) if the network in front is trusted")
        return config

    def unauthenticated_exposure(self) -> list[str]:
        """Each listener on a non-loopback address that has no token, described."""
        found = []
        for name, (host, _), token, token_env in (
                ("otlp_grpc_address", self.otlp_grpc_address, self.ingest_token, PROMPTPRISM_INGEST_TOKEN),
                ("otlp_http_address", self.otlp_http_address, self.ingest_token, PROMPTPRISM_INGEST_TOKEN),
                ("ui_address", self.ui_address, self.ui_token, PROMPTPRISM_UI_TOKEN)):
            if not token and not is_loopback(host):
                found.append(f"{SETTINGS[name].env} binds {host or '*'} (not loopback) without {token_env}")
        return found


_check_fields_match()

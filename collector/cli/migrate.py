"""``promptprism migrate --store URL``: apply the schema to a ClickHouse server.

The collector migrates its own store on start-up; this verb is for
operators who create the schema ahead of time (or with other credentials).
``--print`` shows the DDL, placeholders filled, without connecting.
"""

from __future__ import annotations

import argparse
import logging
import os

from ...wire.errors import ConfigurationError
from ..config import (PROMPTPRISM_CLICKHOUSE_CLUSTER, PROMPTPRISM_RETENTION_DAYS, PROMPTPRISM_STORE, SETTINGS,
                      parse_positive_int)
from . import CommandError
from ._progress import waiting


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "migrate",
        help="apply the ClickHouse schema to a server",
        description="Create or upgrade promptprism's tables on a ClickHouse server "
                    "(versioned migrations, each applied once).",
    )
    parser.add_argument("--store", default=None, metavar="URL",
                        help=f"http(s)://user:password@host:8123/database (default: ${PROMPTPRISM_STORE})")
    parser.add_argument("--retention-days", default=None, metavar="N",
                        help=f"the tables' TTL (default: ${PROMPTPRISM_RETENTION_DAYS} or "
                             f"{SETTINGS['retention_days'].default})")
    parser.add_argument("--cluster", default=None, metavar="NAME",
                        help=f"ClickHouse cluster: ON CLUSTER DDL with Replicated + Distributed tables "
                             f"(default: ${PROMPTPRISM_CLICKHOUSE_CLUSTER})")
    parser.add_argument("--print", dest="print_only", action="store_true",
                        help="print the DDL instead of applying it")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    retention = args.retention_days or os.environ.get(PROMPTPRISM_RETENTION_DAYS) or SETTINGS["retention_days"].default
    try:
        retention_days = parse_positive_int("retention_days", retention)
    except ConfigurationError as error:
        raise CommandError(str(error)) from None
    url = args.store or os.environ.get(PROMPTPRISM_STORE) or ""
    from ..store.migrations import load_migrations
    from ..store.server import DEFAULT_DATABASE, parse_url

    database = DEFAULT_DATABASE
    if url.startswith(("http://", "https://")):
        try:
            database = parse_url(url)["database"]
        except ValueError as error:
            raise CommandError(str(error)) from None
    elif not args.print_only:
        raise CommandError(f"--store needs a ClickHouse URL (http(s)://user:password@host:8123/database), got {url!r}; "
                           "the embedded store migrates itself when the collector starts")
    from ..store.cluster import ClusterDDLError, cluster_name, script

    try:
        cluster = args.cluster or cluster_name()
        if cluster and args.print_only:
            print(script(database=database, retention_days=retention_days, cluster=cluster), end="")
            return 0
    except ClusterDDLError as error:
        raise CommandError(str(error)) from None
    if args.print_only:
        print(f"CREATE DATABASE IF NOT EXISTS {database};\n")
        for migration in load_migrations(database=database, retention_days=retention_days):
            print(f"-- {migration.name}")
            for statement in migration.statements:
                print(statement + ";\n")
        return 0

    from ..store.base import StoreError
    from ..store.server import ServerStore

    # clickhouse-connect logs a failed request itself ("Unexpected Http Driver
    # Exception") before raising it; the one-line error below says it all.
    logging.getLogger("clickhouse_connect").addHandler(logging.NullHandler())

    store = ServerStore(url, retention_days=retention_days, cluster=cluster)
    try:
        with waiting(f"migrating {database}"):
            applied = store.migrate()
    except StoreError as error:
        raise CommandError(f"cannot migrate {database}: {error}") from None
    finally:
        store.close()
    print(f"{database}: applied {', '.join(applied)}" if applied else f"{database}: schema up to date")
    return 0

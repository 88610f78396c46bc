"""Opening the store the configuration names: ``embedded`` (chdb) or a server URL.

Both come back migrated. A server that is down at start-up is migrated on
the first successful connection instead, so the collector starts anyway and
spools until ClickHouse is back.
"""

from __future__ import annotations

import os
from typing import Any

from .base import Store, StoreError, StoreUnavailable

__all__ = ["open_store", "Store", "StoreError", "StoreUnavailable",
           "base", "cluster", "declared", "embedded", "migrations", "server"]


def open_store(config_or_url: Any, data_dir: str | None = None, retention_days: int | None = None) -> Store:
    """A ready store from a ``CollectorConfig`` or from a store setting (``embedded`` / URL).

    ``data_dir`` and ``retention_days`` override the config's values (or are
    required with a bare store setting).
    """
    if isinstance(config_or_url, str):
        store_setting = config_or_url
    else:
        store_setting = config_or_url.store
        data_dir = data_dir if data_dir is not None else config_or_url.data_dir
        retention_days = retention_days if retention_days is not None else config_or_url.retention_days
    retention_days = 30 if retention_days is None else int(retention_days)
    if store_setting == "embedded":
        from .embedded import EmbeddedStore
        from .migrations import migrate

        store = EmbeddedStore(os.path.abspath(data_dir or "./promptprism-data"), retention_days=retention_days)
        migrate(store)
        return store
    from .server import ServerStore

    cluster = None if isinstance(config_or_url, str) else getattr(config_or_url, "clickhouse_cluster", None)
    return ServerStore(store_setting, retention_days=retention_days, auto_migrate=True, cluster=cluster)

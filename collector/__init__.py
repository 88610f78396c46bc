"""promptprism collector: OTLP receiver, ClickHouse store, JSON API, inspector and CLI.

Heavy dependencies (grpcio, chdb, clickhouse-connect, starlette) are imported
only by the submodules that need them, never here.
"""

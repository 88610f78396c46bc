"""PROMPTPRISM_CLICKHOUSE_CLUSTER selects ON CLUSTER DDL end to end: config,
the server store's start-up migration and `promptprism migrate`."""

from __future__ import annotations

import pytest

from chdb_http_fixture import ChdbHttpProcess  # tests/ is on sys.path (rootdir conftest)
from promptprism.collector.cli import main as cli_main
from promptprism.collector.config import CollectorConfig, ConfigurationError
from promptprism.collector.store import open_store
from promptprism.collector.store.base import StoreError

SERVER = "http://default:@127.0.0.1:8123/promptprism"


def test_config_reads_the_cluster_for_a_server_store():
    config = CollectorConfig.load(environ={"PROMPTPRISM_STORE": SERVER, "PROMPTPRISM_CLICKHOUSE_CLUSTER": "prism"})
    assert config.clickhouse_cluster == "prism"
    assert CollectorConfig.load(environ={"PROMPTPRISM_STORE": SERVER}).clickhouse_cluster is None


@pytest.mark.parametrize("environ, message", [
    ({"PROMPTPRISM_CLICKHOUSE_CLUSTER": "prism"}, "needs a ClickHouse server URL"),
    ({"PROMPTPRISM_STORE": SERVER, "PROMPTPRISM_CLICKHOUSE_CLUSTER": "x; DROP"}, "identifier"),
])
def test_bad_cluster_settings_fail_at_start(environ, message):
    with pytest.raises(ConfigurationError, match=message):
        CollectorConfig.load(environ=environ)


def test_migrate_print_with_a_cluster_prints_on_cluster_ddl(capsys):
    assert cli_main(["migrate", "--store", SERVER, "--cluster", "prism", "--print"]) == 0
    text = capsys.readouterr().out
    assert "CREATE TABLE IF NOT EXISTS promptprism.requests_local ON CLUSTER prism" in text
    assert "ENGINE = Distributed(prism, promptprism, requests_local" in text


def test_server_store_with_a_cluster_migrates_on_cluster(tmp_path):
    """chdb has no clusters: the ON CLUSTER statement reaching it (and being
    refused for the unknown cluster) proves the cluster path was taken, while
    the same store without a cluster migrates fine."""
    server = ChdbHttpProcess(str(tmp_path / "clickhouse"), database="cluster_test").start()
    try:
        config = CollectorConfig.load(environ={"PROMPTPRISM_STORE": server.url,
                                               "PROMPTPRISM_CLICKHOUSE_CLUSTER": "prism"})
        clustered = open_store(config)
        with pytest.raises(StoreError, match="prism"):
            clustered.query("SELECT 1 AS one")
        clustered.close()
        plain = open_store(CollectorConfig.load(environ={"PROMPTPRISM_STORE": server.url}))
        assert plain.query("SELECT 1 AS one") == [{"one": 1}]
        tables = {row["name"] for row in plain.query("SHOW TABLES FROM cluster_test")}
        assert "requests" in tables and "requests_local" not in tables
        plain.close()
    finally:
        server.stop()

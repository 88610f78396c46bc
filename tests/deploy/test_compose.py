"""deploy/: what compose, the Dockerfile and the OTel Collector configure,
checked by parsing (no Docker here)."""

from __future__ import annotations

import ast
import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
import yaml

from promptprism.collector.config import DEFAULT_RECEIVE_LIMIT_BYTES, CollectorConfig
from promptprism.wire.errors import ConfigurationError

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


def _defaults(value):
    """Resolve compose's ${VAR:-default} interpolation to the defaults."""
    if isinstance(value, str):
        return re.sub(r"\$\{(\w+):-([^}]*)\}", lambda match: match.group(2), value)
    if isinstance(value, dict):
        return {key: _defaults(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_defaults(item) for item in value]
    return value


@pytest.fixture(scope="module")
def compose():
    return _defaults(yaml.safe_load((DEPLOY / "compose.yaml").read_text()))


def _published(service) -> dict[int, int]:
    ports = {}
    for entry in service.get("ports", []):
        host, container = entry.rsplit(":", 2)[-2:]
        ports[int(container)] = int(host)
    return ports


def test_services_and_default_profile(compose):
    services = compose["services"]
    default = {name for name, service in services.items() if not service.get("profiles")}
    assert default == {"clickhouse", "collector", "grafana"}
    scale_out = {name for name, service in services.items() if "scale-out" in service.get("profiles", [])}
    assert scale_out == {"otelcol", "collector-b", "collector-c"}
    for service in services.values():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).resolve().exists(), volume
            else:
                assert source in compose["volumes"], volume


def test_collector_points_at_clickhouse_and_its_config_loads(compose):
    services = compose["services"]
    for name in ("collector", "collector-b", "collector-c"):
        environment = services[name]["environment"]
        store = environment["PROMPTPRISM_STORE"]
        assert re.fullmatch(r"http://promptprism:[^@]+@clickhouse:8123/promptprism", store)
        environ = {key: str(value) for key, value in environment.items()}
        with pytest.raises(ConfigurationError):  # 0.0.0.0 in the container: no start without the tokens
            CollectorConfig.load(environ=environ)
        config = CollectorConfig.load(environ={**environ, "PROMPTPRISM_INGEST_TOKEN": "i", "PROMPTPRISM_UI_TOKEN": "u"})
        assert CollectorConfig.load(environ={**environ, "PROMPTPRISM_ALLOW_UNAUTHENTICATED": "true"})
        assert config.store == store
        assert config.otlp_grpc_address == ("0.0.0.0", 4317) and config.ui_address == ("0.0.0.0", 4380)
        assert services[name]["build"]["dockerfile"] == "deploy/Dockerfile"
    assert services["clickhouse"]["environment"]["CLICKHOUSE_DB"] == "promptprism"
    assert _published(services["clickhouse"])[8123] == 8123
    assert _published(services["collector"]) == {4317: 4317, 4318: 4318, 4380: 4380}
    assert services["collector"]["depends_on"]["clickhouse"]["condition"] == "service_healthy"


def test_dockerfile_exposes_what_compose_publishes(compose):
    text = (DEPLOY / "Dockerfile").read_text()
    exposed = {int(port) for port in re.search(r"^EXPOSE (.+)$", text, re.M).group(1).split()}
    assert set(_published(compose["services"]["collector"])) == exposed
    assert "'.[collector]'" in text and 'CMD ["collector"]' in text
    copied = [path for path in re.findall(r"^COPY (\S+)", text, re.M) if not path.startswith("--from=")]
    for path in copied:
        assert (ROOT / path).exists(), path
    # Every package folder setup.py maps is in the image, or `pip install .` leaves it out.
    top_level = ast.literal_eval(re.search(r"^TOP_LEVEL = (.+)$", (ROOT / "setup.py").read_text(), re.M).group(1))
    assert set(top_level) <= set(copied), set(top_level) - set(copied)


def test_the_image_builds_and_checks_every_compiled_module():
    """The build stage has a C compiler (python:3.11-slim has none: the install would quietly leave
    the compiled ingest paths out), and the image's build fails unless each module setup.py compiles
    imports."""
    text = (DEPLOY / "Dockerfile").read_text()
    _, build, final = text.split("\nFROM ")  # the comments, then the two stages
    assert re.search(r"apt-get install .*\bgcc\b", build) and "pip wheel" in build
    setup = (ROOT / "setup.py").read_text()
    modules = dict(re.findall(r'^([A-Z]+) = "(promptprism\.[\w.]+)"', setup, re.M))
    compiled = re.findall(r"Extension\(([A-Z]+),", setup)
    assert len(compiled) >= 5 and set(compiled) <= set(modules)
    [check] = re.findall(r'python -c "import (promptprism[^"]+)"', final)
    assert {name.strip() for name in check.split(",")} == {modules[name] for name in compiled}
    assert "PROMPTPRISM_BUILD_EXTENSIONS" not in text


def test_grafana_installs_the_plugin_and_mounts_provisioning(compose):
    grafana = compose["services"]["grafana"]
    assert "grafana-clickhouse-datasource" in grafana["environment"]["GF_INSTALL_PLUGINS"].split(",")
    mounts = {volume.split(":")[1]: volume.split(":")[0] for volume in grafana["volumes"]}
    assert (DEPLOY / mounts["/etc/grafana/provisioning"]).resolve() == ROOT / "grafana" / "provisioning"
    dashboards_path = yaml.safe_load((ROOT / "grafana/provisioning/dashboards/promptprism.yaml").read_text())[
        "providers"][0]["options"]["path"]
    assert (DEPLOY / mounts[dashboards_path]).resolve() == ROOT / "grafana" / "dashboards"
    assert grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"].startswith(dashboards_path)
    # Every ${VAR} the datasource provisioning reads is set for the container.
    datasource_text = (ROOT / "grafana/provisioning/datasources/clickhouse.yaml").read_text()
    for variable in set(re.findall(r"\$\{(\w+)\}", datasource_text)):
        assert variable in grafana["environment"], variable
    assert grafana["environment"]["PROMPTPRISM_CLICKHOUSE_HOST"] == "clickhouse"
    assert grafana["environment"]["PROMPTPRISM_CLICKHOUSE_PASSWORD"] == \
        compose["services"]["clickhouse"]["environment"]["CLICKHOUSE_PASSWORD"]


def test_otel_collector_load_balances_by_trace_id_over_the_collectors(compose):
    config = yaml.safe_load((DEPLOY / "otelcol" / "config.yaml").read_text())
    exporter = config["exporters"]["loadbalancing"]
    assert exporter["routing_key"] == "traceID"
    assert exporter["protocol"]["otlp"]["tls"]["insecure"] is True
    backends = exporter["resolver"]["static"]["hostnames"]
    collectors = {name for name, service in compose["services"].items() if name.startswith("collector")}
    assert {backend.split(":")[0] for backend in backends} == collectors
    assert {int(backend.split(":")[1]) for backend in backends} == {4317}
    pipeline = config["service"]["pipelines"]["traces"]
    for kind in ("receivers", "processors", "exporters"):
        for component in pipeline[kind]:
            assert component in config[kind], component
    # The front accepts batches as large as the collectors do, and sends smaller ones.
    assert config["receivers"]["otlp"]["protocols"]["grpc"]["max_recv_msg_size_mib"] * 2**20 <= DEFAULT_RECEIVE_LIMIT_BYTES
    assert config["processors"]["batch"]["send_batch_max_size"] * 32 * 1024 < DEFAULT_RECEIVE_LIMIT_BYTES
    otelcol = compose["services"]["otelcol"]
    assert "./otelcol/config.yaml:/etc/otelcol-contrib/config.yaml:ro" in otelcol["volumes"]
    assert set(otelcol["depends_on"]) == collectors


def test_cluster_example_config_parses():
    root = ElementTree.parse(DEPLOY / "clickhouse" / "cluster.example.xml").getroot()
    shards = root.findall("./remote_servers/promptprism/shard")
    assert len(shards) == 2 and all(shard.find("internal_replication").text == "true" for shard in shards)
    assert root.find("./macros/shard") is not None and root.find("./macros/replica") is not None
    assert root.find("./profiles/default/distributed_foreground_insert").text == "1"

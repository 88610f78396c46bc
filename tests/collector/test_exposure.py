"""Exposure defaults (issue 14, must fix 6): no unauthenticated listener beyond loopback unless asked,
and the UI answers only Host names that are its own (DNS rebinding)."""

from __future__ import annotations

import socket
import subprocess

import grpc
import httpx
import pytest

from promptprism.collector.app import host_name, ui_allowed_hosts
from promptprism.collector.config import CollectorConfig
from promptprism.wire.errors import ConfigurationError

from support import free_port

from .collector_harness import PROMPTPRISM, running_collector


@pytest.mark.parametrize("setting, token", [
    ("otlp_grpc_address", "ingest_token"), ("otlp_http_address", "ingest_token"), ("ui_address", "ui_token")])
def test_a_non_loopback_listener_without_its_token_is_refused(setting, token):
    with pytest.raises(ConfigurationError) as refused:
        CollectorConfig.load({setting: "0.0.0.0:4000"}, environ={})
    assert "--allow-unauthenticated" in str(refused.value)
    CollectorConfig.load({setting: "0.0.0.0:4000", token: "t"}, environ={})  # with the token: fine
    allowed = CollectorConfig.load({setting: "192.0.2.7:4000", "allow_unauthenticated": "true"}, environ={})
    assert len(allowed.unauthenticated_exposure()) == 1  # still reported, to be warned about


@pytest.mark.parametrize("address", ["127.0.0.1:4000", "[::1]:4000", "localhost:4000", "127.0.0.2:4000"])
def test_loopback_needs_no_token(address):
    config = CollectorConfig.load({"ui_address": address, "otlp_grpc_address": address}, environ={})
    assert config.unauthenticated_exposure() == []


def test_the_command_refuses_and_the_switch_takes_no_value(tmp_path):
    refused = subprocess.run([*PROMPTPRISM, "collector", "--data-dir", str(tmp_path), "--ui-address", "0.0.0.0:0"],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "PROMPTPRISM_UI_TOKEN" in refused.stderr
    # The switch parses alone (the run then stops at the next bad setting, before starting anything).
    switched = subprocess.run([*PROMPTPRISM, "collector", "--allow-unauthenticated", "--ui-address", "0.0.0.0:0",
                               "--retention-days", "nope"], capture_output=True, text=True, timeout=120)
    assert switched.returncode == 2 and "--retention-days=" in switched.stderr


def test_host_names():
    assert host_name("Example.org:4380") == "example.org"
    assert host_name("[::1]:4380") == "::1"
    assert host_name("localhost") == "localhost"


def test_allowed_hosts_follow_the_bound_address():
    def allowed(**flags):
        return ui_allowed_hosts(CollectorConfig.load({"allow_unauthenticated": "true", **flags}, environ={}))

    assert allowed(ui_address="127.0.0.1:1") == {"127.0.0.1", "localhost", "::1"}
    assert allowed(ui_address="192.0.2.7:1") == {"192.0.2.7"}
    assert allowed(ui_address="0.0.0.0:1") is None
    assert allowed(ui_address="0.0.0.0:1", ui_allowed_hosts="prompts.internal,10.0.0.5") == {
        "prompts.internal", "10.0.0.5"}


def test_the_ui_refuses_a_rebound_host_name(store, tmp_path):
    with running_collector(store, tmp_path) as collector:
        ui = collector.endpoints()["ui"]
        port = collector.ui.port
        assert httpx.get(f"{ui}/api/requests", headers={"Host": f"attacker.example:{port}"}).status_code == 421
        assert httpx.get(f"{ui}/", headers={"Host": "attacker.example"}).status_code == 421
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}"):
            assert httpx.get(f"{ui}/api/requests", headers={"Host": host}).status_code == 200, host
        assert httpx.get(f"{ui}/healthz", headers={"Host": "attacker.example"}).status_code == 200


def test_a_configured_host_list_replaces_the_default(store, tmp_path):
    with running_collector(store, tmp_path, ui_allowed_hosts="prompts.internal") as collector:
        ui = collector.endpoints()["ui"]
        assert httpx.get(f"{ui}/api/requests", headers={"Host": "prompts.internal:4380"}).status_code == 200
        assert httpx.get(f"{ui}/api/requests", headers={"Host": f"127.0.0.1:{collector.ui.port}"}).status_code == 421


def test_the_token_redirect_stays_on_this_server(store, tmp_path):
    with running_collector(store, tmp_path, ui_token="t0k") as collector:
        ui = collector.endpoints()["ui"]
        for path in ("//evil.example/", "/\\evil.example/", "///evil.example/x"):
            answer = httpx.get(f"{ui}{path}?token=t0k&a=1", follow_redirects=False)
            assert answer.status_code == 303, path
            location = answer.headers["location"]
            assert location.startswith("/") and not location.startswith(("//", "/\\")), location


def _ipv6_loopback_available() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


def _listening_ports(table: str) -> set[int]:
    """Ports in LISTEN state in /proc/net/tcp or tcp6 (state 0A)."""
    with open(f"/proc/net/{table}") as handle:
        rows = [line.split() for line in handle.readlines()[1:]]
    return {int(row[1].rsplit(":", 1)[1], 16) for row in rows if row[3] == "0A"}


@pytest.mark.skipif(not _ipv6_loopback_available(), reason="this host has no IPv6 loopback to connect to")
@pytest.mark.parametrize("port", ["0", "free"])
def test_grpc_given_0000_listens_on_ipv4_only(store, tmp_path, port):
    """grpcio alone binds 0.0.0.0 as [::] dual-stack; the receiver binds exactly what was asked."""
    wanted = free_port() if port == "free" else 0
    with running_collector(store, tmp_path, otlp_grpc_address=f"0.0.0.0:{wanted}", ingest_token="t") as collector:
        bound = collector.grpc.port
        assert bound and (wanted == 0 or bound == wanted)
        with socket.create_connection(("127.0.0.1", bound), timeout=5):
            pass  # IPv4 answers
        ipv6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        ipv6.settimeout(5)
        with ipv6, pytest.raises(ConnectionRefusedError):
            ipv6.connect(("::1", bound))
        assert bound in _listening_ports("tcp") and bound not in _listening_ports("tcp6")
        # gRPC itself answers on IPv4.
        with grpc.insecure_channel(f"127.0.0.1:{bound}") as channel:
            grpc.channel_ready_future(channel).result(timeout=30)

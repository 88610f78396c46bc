"""The collector process: health, metrics, the UI token, the CLI verb."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys

import httpx
import pytest

from promptprism.collector.app import Collector
from promptprism.collector.receive.auth import authorized, bearer_token
from promptprism.collector.metrics import Metrics

from support import free_port, metric_value

from .collector_harness import PARTS, collector_config, emit_prompt, exporter, running_collector, tracer_for

CLI = [sys.executable, "-c", "import sys; from promptprism.collector.cli import main; sys.exit(main())", "collector"]


def test_healthz_metrics_and_read_side_routes(store, tmp_path):
    with running_collector(store, tmp_path) as collector:
        ui = collector.endpoints()["ui"]
        assert httpx.get(ui + "/healthz").json() == {"status": "ok"}
        provider, tracer = tracer_for(exporter(collector, "grpc"))
        trace_id, request_id = emit_prompt(tracer, PARTS)
        provider.shutdown()
        metrics = httpx.get(ui + "/metrics")
        assert metrics.headers["content-type"].startswith("text/plain")
        text = metrics.text
        for name, labels, value in (("promptprism_collector_spans_received_total", {}, 1),
                                    ("promptprism_collector_requests_received_total", {}, 1),
                                    ("promptprism_collector_blocks_received_total", {}, 3),
                                    ("promptprism_collector_exports_total", {"transport": "grpc", "outcome": "ok"}, 1),
                                    ("promptprism_collector_sink_requests_stored_total", {}, 1),
                                    ("promptprism_collector_sink_spool_batches", {}, 0)):
            assert metric_value(text, name, **labels) == value, (name, labels)
        # One insert per non-empty table (requests, request_docs, contents, otel_traces, …), each observed.
        inserts = metric_value(text, "promptprism_collector_sink_insert_seconds_count", table="requests")
        assert inserts == 1
        assert metric_value(text, "promptprism_collector_sink_insert_seconds_count", table="request_docs") == 1
        assert metric_value(text, "promptprism_collector_sink_insert_seconds_bucket", table="requests", le="+Inf") == 1
        assert metric_value(text, "promptprism_collector_sink_insert_seconds_sum", table="requests") > 0
        openmetrics = httpx.get(ui + "/metrics", headers={"Accept": "application/openmetrics-text"})
        assert openmetrics.headers["content-type"].startswith("application/openmetrics-text")
        assert openmetrics.text.endswith("# EOF\n")
        assert "Émile" not in text  # counts only, never content
        # The read side's API is mounted on the same server.
        answer = httpx.get(f"{ui}/api/traces/{trace_id}")
        assert answer.status_code == 200 and answer.json()["requests"][0]["request_id"] == request_id
    assert not collector.ready.is_set()


def test_healthz_is_not_ready_before_start(store, tmp_path):
    collector = Collector(collector_config(tmp_path), store=store)
    assert not collector.ready.is_set()
    with collector:
        assert collector.ready.is_set()


def test_ui_token_guards_everything_but_health_and_metrics(store, tmp_path):
    with running_collector(store, tmp_path, ui_token="ui-secret") as collector:
        ui = collector.endpoints()["ui"]
        assert httpx.get(ui + "/healthz").status_code == 200
        assert httpx.get(ui + "/metrics").status_code == 200
        assert httpx.get(ui + "/api/requests").status_code == 401
        assert httpx.get(ui + "/api/requests", headers={"Authorization": "Bearer nope"}).status_code == 401
        assert httpx.get(ui + "/api/requests", headers={"Authorization": "Bearer ui-secret"}).status_code == 200
        # A browser: ?token= once becomes a cookie, and the URL loses the token.
        with httpx.Client(base_url=ui) as browser:
            first = browser.get("/api/requests?limit=5&token=ui-secret")
            assert first.status_code == 303 and first.headers["location"] == "/api/requests?limit=5"
            assert browser.get("/api/requests?limit=5").status_code == 200
        assert httpx.get(ui + "/api/requests?token=wrong").status_code == 401


def test_bearer_parsing():
    assert bearer_token("Bearer abc") == "abc" and bearer_token("bearer  abc ") == "abc"
    assert bearer_token("Basic abc") is None and bearer_token(None) is None and bearer_token("Bearer ") is None
    assert authorized(None, None) and authorized("t", b"Bearer t") and not authorized("t", "Bearer tt")


def test_metrics_escape_labels_and_publish_the_sink_stats():
    metrics = Metrics(sink_stats=lambda: {"spool_batches": 4, "spans_stored": 7, "inserts": 3})
    metrics.batch_accepted(3, 1, 2, 10, {'weird"reason\n': 1})
    body, content_type = metrics.render()
    text = body.decode()
    assert content_type.startswith("text/plain")
    assert 'promptprism_collector_unmapped_total{reason="weird\\"reason\\n"} 1.0' in text
    assert metric_value(text, "promptprism_collector_unmapped_total", reason='weird"reason\n') == 1
    assert "# TYPE promptprism_collector_sink_spool_batches gauge" in text
    assert metric_value(text, "promptprism_collector_sink_spool_batches") == 4
    assert "# TYPE promptprism_collector_sink_spans_stored_total counter" in text
    assert metric_value(text, "promptprism_collector_sink_spans_stored_total") == 7
    assert "promptprism_collector_sink_inserts" not in text  # the histogram counts inserts


def test_each_collector_has_its_own_registry():
    first, second = Metrics(), Metrics()
    first.export_finished("grpc", "ok", 10)
    assert metric_value(first.render()[0].decode(), "promptprism_collector_exports_total",
                        transport="grpc", outcome="ok") == 1
    assert metric_value(second.render()[0].decode(), "promptprism_collector_exports_total",
                        transport="grpc", outcome="ok") is None


def test_insert_latency_is_observed_per_table_and_failures_are_not(store):
    metrics = Metrics()
    timed = metrics.timed(store)
    assert timed.database == store.database  # everything but insert is the store's own
    import pyarrow

    with pytest.raises(Exception):
        timed.insert("no_such_table", pyarrow.table({"a": [1]}))
    text = metrics.render()[0].decode()
    assert metric_value(text, "promptprism_collector_sink_insert_seconds_count", table="no_such_table") is None


# A setting given as a flag is named as the flag (a variable, as the variable: test_cli_edges.py).
@pytest.mark.parametrize("arguments, message", [
    (["--retention-days", "0"], "--retention-days='0'"),
    (["--otlp-grpc-address", "nohost"], "--otlp-grpc-address='nohost'"),
    (["--store", "mysql://x"], "--store='mysql://x'"),
    (["--tls-cert-file", "/nonexistent.pem", "--tls-key-file", "/nonexistent.key"], "no such file"),
    (["--receive-limit-bytes", "lots"], "--receive-limit-bytes='lots'"),
])
def test_bad_config_is_one_line_and_exit_2(arguments, message, tmp_path):
    result = subprocess.run(CLI + arguments, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PROMPTPRISM_DATA_DIR": str(tmp_path)})
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("promptprism collector: ") and message in lines[0]


def test_cli_flags_announce_and_sigint_flushes(tmp_path):
    grpc_port, http_port, ui_port = free_port(), free_port(), free_port()
    process = subprocess.Popen(CLI + ["--data-dir", str(tmp_path), "--otlp-grpc-address", f"127.0.0.1:{grpc_port}",
                                      "--otlp-http-address", f"127.0.0.1:{http_port}",
                                      "--ui-address", f"127.0.0.1:{ui_port}", "--ingest-token", "tok"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        banner = [process.stdout.readline() for _ in range(7)]
        text = "".join(banner)
        assert f"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:{grpc_port}" in text
        assert f"http://127.0.0.1:{http_port}/v1/traces" in text and f"http://127.0.0.1:{ui_port}" in text
        assert httpx.get(f"http://127.0.0.1:{ui_port}/healthz").status_code == 200

        class Target:
            @staticmethod
            def endpoints():
                return {"otlp_grpc": f"http://127.0.0.1:{grpc_port}"}

        provider, tracer = tracer_for(exporter(Target, "grpc", headers={"authorization": "Bearer tok"}))
        trace_id, _ = emit_prompt(tracer, PARTS)
        provider.shutdown()
        assert httpx.get(f"http://127.0.0.1:{ui_port}/api/traces/{trace_id}").status_code == 200
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
        assert "stopped" in process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.fixture
def certificate(tmp_path):
    """A test CA and a certificate it signed for 127.0.0.1 (openssl CLI): (ca, cert, key)."""
    import shutil

    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    ca, ca_key = tmp_path / "ca.pem", tmp_path / "ca.key"
    cert, key, request = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "cert.csr"
    extensions = tmp_path / "san.ext"
    extensions.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
                          "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n")
    for command in (
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=promptprism test CA",
         "-keyout", ca_key, "-out", ca],
        ["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", key, "-out", request],
        ["x509", "-req", "-in", request, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-days", "1",
         "-extfile", extensions, "-out", cert],
    ):
        subprocess.run(["openssl", *map(str, command)], check=True, capture_output=True, timeout=60)
    return str(ca), str(cert), str(key)


def test_tls_on_every_listener(store, tmp_path, certificate, monkeypatch):
    # requests lets these override the exporter's certificate_file (requests#3829).
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    import grpc
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

    ca, cert, key = certificate
    with running_collector(store, tmp_path, tls_cert_file=cert, tls_key_file=key) as collector:
        endpoints = collector.endpoints()
        assert all(url.startswith("https://") for url in endpoints.values())
        with open(ca, "rb") as handle:
            credentials = grpc.ssl_channel_credentials(handle.read())
        sent = []
        for span_exporter in (GrpcExporter(endpoint=endpoints["otlp_grpc"], credentials=credentials),
                              HttpExporter(endpoint=endpoints["otlp_http"] + "/v1/traces", certificate_file=ca)):
            provider, tracer = tracer_for(span_exporter)
            sent.append(emit_prompt(tracer, PARTS)[0])
            provider.shutdown()
        for trace_id in sent:
            assert httpx.get(f"{endpoints['ui']}/api/traces/{trace_id}", verify=ssl.create_default_context(cafile=ca)).status_code == 200
        with pytest.raises(httpx.HTTPError):  # plain HTTP is not served
            httpx.get(endpoints["ui"].replace("https://", "http://") + "/healthz")


def test_a_taken_grpc_port_fails_start_cleanly_and_releases_what_started(store, tmp_path):
    import socket
    import threading

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        config = collector_config(tmp_path, otlp_grpc_address=f"127.0.0.1:{taken.getsockname()[1]}")
        before = set(threading.enumerate())
        collector = Collector(config, store=store)
        with pytest.raises(OSError, match="OTLP/gRPC"):
            collector.start()
    assert not [thread for thread in set(threading.enumerate()) - before if thread.name.startswith("promptprism-")]
    for host, port in (config.ui_address, config.otlp_http_address):  # both listeners were closed
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((host, port))


def test_stop_leaves_no_receiver_threads(store, tmp_path):
    import threading

    before = set(threading.enumerate())
    with running_collector(store, tmp_path) as collector:
        provider, tracer = tracer_for(exporter(collector, "grpc"))
        emit_prompt(tracer, PARTS)
        provider.shutdown()
    left = [thread.name for thread in set(threading.enumerate()) - before if thread.name.startswith("promptprism-")]
    assert left == []

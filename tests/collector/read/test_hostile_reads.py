"""Read routes under hostile arguments (issue 14, should fix): every byte of a filter means itself,
out-of-range times are 400, and no store error text ever reaches the client."""

from __future__ import annotations

import httpx
import pytest

from ..collector_harness import emit_prompt, exporter, running_collector, tracer_for

SERVICES = ["tab\there", "O'Brien \\back\\slash", "plain"]
# On ClickHouse 26.x only: the filters' SQL is test_api's (marked `clickhouse`), and the binding of
# such values on 24.8 (bound into the text, store/inline.py) is tested value by value in
# tests/collector/store/test_inline.py and through the panels in tests/grafana/test_dashboards.py.


@pytest.fixture(scope="module")
def collector_with_odd_services(migrated_database, tmp_path_factory):
    with migrated_database() as store, running_collector(store, tmp_path_factory.mktemp("odd")) as collector:
        for service in SERVICES:
            provider, tracer = tracer_for(exporter(collector, "http"), service=service)
            emit_prompt(tracer, [("q", "template", "turn", "Hello.")])
            provider.shutdown()
        yield collector


@pytest.mark.parametrize("service", SERVICES + ["tab\\there", "back\\", "'", "%", "\\'"])
def test_a_filter_value_means_exactly_its_bytes(collector_with_odd_services, service):
    ui = collector_with_odd_services.endpoints()["ui"]
    answer = httpx.get(f"{ui}/api/requests", params={"service": service, "since": "30d"})
    assert answer.status_code == 200, answer.text
    assert "DB::Exception" not in answer.text
    found = {request["service"] for request in answer.json()["requests"]}
    assert found == ({service} if service in SERVICES else set())


@pytest.mark.parametrize("path, params", [
    ("/api/requests", {"since": "99999999999d"}),
    ("/api/requests", {"until": "9" * 30}),
    ("/api/insight/cache", {"until": "9" * 30}),
    ("/api/insight/growth", {"since": "99999999999d"}),
])
def test_times_out_of_range_are_bad_requests(collector_with_odd_services, path, params):
    ui = collector_with_odd_services.endpoints()["ui"]
    answer = httpx.get(f"{ui}{path}", params=params)
    assert answer.status_code == 400, answer.text
    assert "DB::Exception" not in answer.text

"""gen_ai.request.temperature end to end: span attribute → requests column → API → inspector page.

The field is declared once (record.py), its column added by a migration
(007) and shown by the request page; nothing else names it.
"""

from __future__ import annotations

import httpx

from promptprism.wire import names

from .collector_harness import PARTS, emit_prompt, exporter, running_collector, stored_request, tracer_for


def test_a_requests_temperature_is_stored_served_and_shown(store, tmp_path):
    with running_collector(store, tmp_path) as collector:
        provider, tracer = tracer_for(exporter(collector))
        _, with_temperature = emit_prompt(tracer, PARTS, extra={names.GEN_AI_REQUEST_TEMPERATURE: 0.2})
        _, without = emit_prompt(tracer, PARTS)
        _, as_text = emit_prompt(tracer, PARTS, extra={names.GEN_AI_REQUEST_TEMPERATURE: "1"})
        provider.shutdown()

        assert stored_request(store, with_temperature)["temperature"] == 0.2
        assert stored_request(store, without)["temperature"] is None
        assert stored_request(store, as_text)["temperature"] == 1.0
        ui = collector.endpoints()["ui"]
        with httpx.Client(base_url=ui, timeout=30) as client:
            assert client.get(f"/api/requests/{with_temperature}").json()["parameters"] == {"temperature": 0.2}
            assert client.get(f"/api/requests/{without}").json()["parameters"] == {"temperature": None}
            shown = client.get(f"/requests/{with_temperature}").text
            assert "<tr><th>temperature</th><td>0.2</td></tr>" in shown
            assert "<th>temperature</th>" not in client.get(f"/requests/{without}").text

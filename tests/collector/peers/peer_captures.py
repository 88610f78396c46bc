"""Captured OTLP exports of other GenAI instrumentations, replayed as they travelled, and what they must become.

``captures/<peer>-<version>/<scenario>/`` holds the payloads exactly as the
real packages exported them (``capture/`` has the scripts that made them),
``capture.json`` how each one travelled (gRPC or HTTP, content type and
encoding) and ``provider-requests.json`` what the provider received. The
provider was promptprism's fake provider, which answers deterministically:
running its answer builders over the same requests, in the same order, gives
the answer text and the usage (prompt cache included) the peer saw — the
ground truth a stored record is compared with.
"""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from promptprism.collector.demo import fake_answers

CAPTURES = Path(__file__).parent / "captures"
GRPC_PATHS = {
    "traces": "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    "logs": "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
    "metrics": "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
}
BUILDERS = {"/v1/chat/completions": fake_answers.chat_completions, "/v1/responses": fake_answers.responses,
            "/v1/messages": fake_answers.messages}
FAILING_MODEL = "fail-500"


@dataclass
class Export:
    signal: str
    transport: str
    path: str
    content_type: str
    content_encoding: str
    payload: bytes  # as it travelled (gzip when content_encoding says so)


@dataclass
class Call:
    """One provider call as the provider received it, and what the fake provider answered."""

    path: str
    body: dict
    failed: bool
    answer_text: str | None = None
    tool_call: bool = False
    usage: dict[str, int | None] = field(default_factory=dict)  # input (whole prompt), output, cache read/write

    @property
    def provider(self) -> str:
        return "anthropic" if self.path == "/v1/messages" else "openai"

    @property
    def model(self) -> str:
        return self.body["model"]

    @property
    def system_text(self) -> str | None:
        body = self.body
        if self.path == "/v1/messages":
            system = body.get("system")
            if isinstance(system, list):
                return "".join(block.get("text", "") for block in system)
            return system
        items = body.get("messages") if self.path == "/v1/chat/completions" else body.get("input")
        texts = [body["instructions"]] if body.get("instructions") else []
        texts += [item["content"] for item in items if isinstance(item, dict)
                  and item.get("role") in ("system", "developer") and isinstance(item.get("content"), str)]
        return "\n\n".join(texts) if texts else None

    @property
    def conversation_messages(self) -> int:
        """Messages besides the system prompt."""
        items = self.body.get("messages") if self.path != "/v1/responses" else self.body.get("input")
        if isinstance(items, str):
            return 1
        return len([item for item in items if isinstance(item, dict) and item.get("role") not in ("system", "developer")])

    @property
    def tool_names(self) -> list[str]:
        return [tool["function"]["name"] if "function" in tool else tool["name"] for tool in self.body.get("tools", [])]


@dataclass
class Scenario:
    peer: str
    name: str
    directory: Path
    exports: list[Export]
    calls: list[Call]

    @property
    def key(self) -> str:
        return f"{self.peer}/{self.name}"

    def trace_ids(self) -> set[str]:
        ids = set()
        for export in self.exports:
            if export.signal != "traces":
                continue
            request = ExportTraceServiceRequest()
            if export.content_type == "application/json":
                document = json.loads(export.payload)
                ids |= {span["traceId"].lower() for resource in document["resourceSpans"]
                        for scope in resource["scopeSpans"] for span in scope["spans"]}
                continue
            request.ParseFromString(_decoded(export))
            ids |= {span.trace_id.hex() for resource in request.resource_spans
                    for scope in resource.scope_spans for span in scope.spans}
        return ids

    def log_records(self) -> int:
        total = 0
        for export in self.exports:
            if export.signal == "logs":
                request = ExportLogsServiceRequest()
                request.ParseFromString(_decoded(export))
                total += sum(len(scope.log_records) for resource in request.resource_logs
                             for scope in resource.scope_logs)
        return total


def _decoded(export: Export) -> bytes:
    if export.content_encoding == "gzip":
        import gzip

        return gzip.decompress(export.payload)
    return export.payload


def scenarios(peer: str | None = None) -> list[Scenario]:
    found = []
    for directory in sorted(CAPTURES.glob("*/*")):
        if peer is not None and directory.parent.name != peer:
            continue
        manifest = json.loads((directory / "capture.json").read_text())
        exports = [Export(item["signal"], item["transport"], item["path"], item["content_type"],
                          item["content_encoding"], (directory / item["raw_file"]).read_bytes())
                   for item in manifest["exports"]]
        requests = json.loads((directory / "provider-requests.json").read_text())
        found.append(Scenario(manifest["peer"], manifest["scenario"], directory, exports, expected_calls(requests)))
    return found


def peers() -> list[str]:
    return sorted(directory.name for directory in CAPTURES.iterdir() if directory.is_dir())


# --- what the fake provider answered -------------------------------------------------------------


def expected_calls(requests: list[dict]) -> list[Call]:
    """The calls in order, replayed through the fake provider's answers with one prompt cache, as the run had."""
    cache = fake_answers.PrefixCache()
    calls = []
    for request in requests:
        path, body = request["path"], request["body"]
        call = Call(path, body, FAILING_MODEL in str(body.get("model", "")))
        calls.append(call)
        if call.failed:
            continue
        builder = BUILDERS[path]
        answer = builder(body, cache)
        payloads = [answer.payload] if answer.payload is not None else [data for data, _ in answer.events]
        usage: dict[str, Any] = {}
        for payload in payloads:
            _merge_usage(payload, usage)
        call.usage = _whole_usage(usage)
        # The reply does not depend on streaming or the cache: read it from a plain answer.
        plain = builder({**body, "stream": False}, fake_answers.PrefixCache()).payload
        call.answer_text, call.tool_call = _reply(path, plain)
    return calls


def _merge_usage(value: Any, usage: dict) -> None:
    """Every ``usage`` object in an answer (stream events carry it in pieces), later values winning."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "usage" and isinstance(item, dict):
                usage.update({name: part for name, part in item.items() if part is not None})
            else:
                _merge_usage(item, usage)
    elif isinstance(value, list):
        for item in value:
            _merge_usage(item, usage)


def _whole_usage(usage: dict) -> dict[str, int | None]:
    if not usage:
        return {}
    if "prompt_tokens" in usage:  # chat completions: the prompt includes cached tokens
        return {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"],
                "cache_read_tokens": usage["prompt_tokens_details"]["cached_tokens"], "cache_creation_tokens": 0}
    if "cache_read_input_tokens" in usage:  # anthropic: input_tokens leaves the cached parts out
        read, written = usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"]
        return {"input_tokens": usage["input_tokens"] + read + written, "output_tokens": usage["output_tokens"],
                "cache_read_tokens": read, "cache_creation_tokens": written}
    return {"input_tokens": usage["input_tokens"], "output_tokens": usage["output_tokens"],
            "cache_read_tokens": usage["input_tokens_details"]["cached_tokens"], "cache_creation_tokens": 0}


def _reply(path: str, payload: dict) -> tuple[str | None, bool]:
    if path == "/v1/chat/completions":
        message = payload["choices"][0]["message"]
        return message.get("content"), bool(message.get("tool_calls"))
    if path == "/v1/messages":
        texts = [block["text"] for block in payload["content"] if block["type"] == "text"]
        return ("".join(texts) or None), any(block["type"] == "tool_use" for block in payload["content"])
    texts = [part["text"] for item in payload["output"] if item["type"] == "message" for part in item["content"]]
    return ("".join(texts) or None), any(item["type"] == "function_call" for item in payload["output"])


# --- replay ------------------------------------------------------------------------------------


def replay(scenario: Scenario, endpoints: dict[str, str], signals=("traces", "logs", "metrics")) -> list[int | str]:
    """Send every export of ``scenario`` the way it travelled; the HTTP status or gRPC code of each."""
    answers = []
    for export in scenario.exports:
        if export.signal not in signals:
            continue
        if export.transport == "grpc":
            target = endpoints["otlp_grpc"].removeprefix("http://")
            with grpc.insecure_channel(target) as channel:
                call = channel.unary_unary(GRPC_PATHS[export.signal], request_serializer=None,
                                           response_deserializer=None)
                _, outcome = call.with_call(export.payload, timeout=30)
                answers.append(outcome.code().name)
            continue
        headers = {"Content-Type": export.content_type}
        if export.content_encoding not in ("", "identity"):
            headers["Content-Encoding"] = export.content_encoding
        request = urllib.request.Request(endpoints["otlp_http"] + export.path, data=export.payload, method="POST",
                                         headers=headers)
        with urllib.request.urlopen(request, timeout=30) as response:
            answers.append(response.status)
    return answers

"""The lineage of a request: the earlier requests it may be compared with.

A prompt's growth and a provider's prompt cache only mean something between
requests of the same stream of work, and a provider caches per provider and
model. Every comparison promptprism makes — the API's ``previous`` (and the
trace page's growth built on it), ``prompt diff`` against the previous
request, cache verdicts, growth attribution and the Grafana panels — is made
within one lineage:

* with a conversation id: the same conversation, service, provider, model and
  process kind (an empty kind matches an empty kind);
* without one (many agent loops set none): the same trace, service, provider,
  model and process (kind and id).

This module is the one definition, twice: ``lineage_key`` for Python (the
read side) and ``LINEAGE_SQL`` for SQL (the insight queries, and through
them the Grafana panels). Both give the same seven-part tuple for the same
row; a test holds them side by side.
"""

from __future__ import annotations

from typing import Any, Mapping

# What a lineage is anchored on.
BASIS_CONVERSATION = "conversation"
BASIS_TRACE = "trace"

# The columns both definitions read (requests / prompt_requests, and the
# summaries the read side fetches).
COLUMNS = ("conversation_id", "trace_id", "service", "provider", "model", "process_kind", "process_id")

# (basis, conversation or trace id, service, provider, model, process kind,
# process id — only without a conversation). toString: LowCardinality columns
# and plain strings must give one tuple type in both branches.
LINEAGE_SQL = (
    "if(conversation_id != '',"
    " tuple('conversation', conversation_id, toString(service), toString(provider), toString(model),"
    " toString(process_kind), ''),"
    " tuple('trace', trace_id, toString(service), toString(provider), toString(model),"
    " toString(process_kind), process_id))"
)

# The lineage as one number: the column `requests.lineage_key` (migration 024,
# MATERIALIZED with this expression) and the hourly rollups' key.
LINEAGE_KEY_SQL = f"sipHash64({LINEAGE_SQL})"


def lineage_key(row: Mapping[str, Any]) -> tuple[str, str, str, str, str, str, str]:
    """The lineage of a request row (any mapping with ``COLUMNS``), as ``LINEAGE_SQL`` computes it."""
    common = (str(row["service"]), str(row["provider"]), str(row["model"]), str(row["process_kind"]))
    if row["conversation_id"]:
        return (BASIS_CONVERSATION, str(row["conversation_id"]), *common, "")
    return (BASIS_TRACE, str(row["trace_id"]), *common, str(row["process_id"]))


def describe(row: Mapping[str, Any]) -> dict[str, str]:
    """The lineage as the API shows it: its basis and the values that define it."""
    basis, anchor, service, provider, model, process_kind, process_id = lineage_key(row)
    described = {"basis": basis, f"{basis}_id": anchor, "service": service, "provider": provider,
                 "model": model, "process_kind": process_kind}
    if basis == BASIS_TRACE:
        described["process_id"] = process_id
    return described


def same_lineage(first: Mapping[str, Any], second: Mapping[str, Any]) -> bool:
    return lineage_key(first) == lineage_key(second)


__all__ = ["BASIS_CONVERSATION", "BASIS_TRACE", "COLUMNS", "LINEAGE_KEY_SQL", "LINEAGE_SQL", "describe", "lineage_key",
           "same_lineage"]

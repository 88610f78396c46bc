"""The JSON API's answers and query parameters as pydantic models, and the JSON Schema built from them.

Where an answer's field is a ``requests`` column shown 1:1 (``record.py``
declares it with ``column(type, api=…)``), its model field is derived from
that declaration: the ClickHouse type says the JSON type, the ``api`` path
says where it sits. The rest (times, the prompt object, blocks, tools,
lineage, the diff) is written out here, beside what ``request_view`` and
``diff`` build. ``web.json_answer`` sends every answer through its model,
so what is served is what ``GET /api/schema`` describes.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.json_schema import models_json_schema

from ..record import RECORD_COLUMNS, REQUEST_COLUMNS, Column
from .errors import BadArgument
from .insight.growth_queries import DIMENSIONS
from .queries import LIST_LIMIT_DEFAULT

SCHEMA_PATH = "/api/schema"
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
# One cap for every list a route answers (requests, insight rows): a thousand
# summaries (~0.5 MB JSON) is already more than a screen or a script page needs.
LIMIT_MAX = 1000


class Answer(BaseModel):
    """An API object: every key it may carry is declared (the schema says additionalProperties: false)."""

    model_config = ConfigDict(extra="forbid")


# --- fields derived from record.py ------------------------------------------------------------

_NULLABLE = "Nullable("


def _json_type(column: Column) -> Any:
    """The JSON type of a declared column as the API shows it (request_view._api_value)."""
    if column.content:
        return Optional[Any]  # captured content: parsed JSON (or the raw text), None when not captured
    kind = column.type
    nullable = kind.startswith(_NULLABLE)
    if nullable:
        kind = kind[len(_NULLABLE):-1]
    if kind == "Bool":
        python_type: Any = bool
    elif kind.startswith(("UInt", "Int")):
        python_type = int
    elif kind.startswith("Float"):
        python_type = float
    elif kind.startswith("Array("):
        python_type = list[str]
    elif kind.startswith("Map("):
        python_type = dict[str, str]
    elif kind.startswith(("String", "LowCardinality(String)")):
        python_type = str
    else:
        raise TypeError(f"no JSON type for column {column.name} ({column.type})")
    return Optional[python_type] if nullable else python_type


def _declared_fields(columns: list[Column], *, first_only: bool) -> dict[str, Any]:
    """{top-level key: type or nested dict} from the columns' api paths."""
    tree: dict[str, Any] = {}
    for column in columns:
        for path in column.api[:1] if first_only else column.api:
            *parents, leaf = path.split(".")
            node = tree
            for parent in parents:
                node = node.setdefault(parent, {})
            node[leaf] = _json_type(column)
    return tree


def _models(tree: dict[str, Any], prefix: str) -> dict[str, Any]:
    """Pydantic field definitions for ``tree``; a nested dict becomes a model named ``prefix`` + its path."""
    definitions = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            name = prefix + "".join(part.capitalize() for part in key.split("_"))
            value = create_model(name, __base__=Answer, **_models(value, name))
        definitions[key] = (value, ...)
    return definitions


# --- the parts request_view shapes itself ------------------------------------------------------

class Template(Answer):
    name: str
    origin: str = Field(description="where the template text came from: builtin, global, scope ('' unknown)")


class PromptSummary(Answer):
    bytes: int
    sha256: str
    tokens_estimate: int
    mapped: bool
    unmapped_reason: str
    template: Template
    block_count: int


class Block(Answer):
    index: int
    name: str
    layer: str
    stability: str
    source: str
    start: int
    end: int
    size: int
    sha256: str
    content: Optional[str] = Field(description="the block's text; null when content was not captured")
    redacted: bool
    problems: list[str]
    tokens_estimate: int
    byte_share: Optional[float]
    token_share: Optional[float]


class Prompt(Answer):
    bytes: int
    sha256: str
    tokens_estimate: int
    mapped: bool
    unmapped_reason: str
    template: Template
    declared_block_count: int
    block_count: int
    content_captured: bool
    text: Optional[str]
    redacted: bool
    token_share_basis: Literal["input_tokens", "request_bytes_estimate", "prompt_bytes_estimate"]
    blocks: list[Block]
    problems: list[str]


class Tool(Answer):
    index: int
    name: str
    size: int
    sha256: str
    tokens_estimate: int
    content: Optional[str]
    redacted: bool


class Lineage(Answer):
    """What a request is compared within (README "Lineage: what is compared with what")."""

    basis: Literal["conversation", "trace"]
    conversation_id: Optional[str] = None
    trace_id: Optional[str] = None
    service: str
    provider: str
    model: str
    process_kind: str
    process_id: Optional[str] = None


class Previous(Answer):
    request_id: str
    trace_id: str
    started_at: str
    basis: Literal["conversation", "trace"]
    prompt_bytes: int
    request_bytes: int
    prompt_bytes_delta: int
    request_bytes_delta: int
    tokens_delta_estimate: int


_STARTED_AT = (str, Field(description="RFC 3339, UTC, nanoseconds"))
_DURATION = (float, Field(description="milliseconds"))

RequestSummary = create_model(
    "RequestSummary", __base__=Answer, __doc__="An entry of GET /api/requests: enough to choose a request, no content.",
    started_at=_STARTED_AT, duration_ms=_DURATION, prompt=(PromptSummary, ...),
    **_models(_declared_fields([column for column in REQUEST_COLUMNS if column.summary], first_only=True),
              "Summary"),
)

Request = create_model(
    "Request", __base__=Answer, __doc__="One LLM request (GET /api/requests/{id}, and each of a trace's).",
    started_at=_STARTED_AT, duration_ms=_DURATION, prompt=(Prompt, ...), tools=(list[Tool], ...),
    lineage=(Lineage, ...), previous=(Optional[Previous], ...), token_estimate_method=(str, ...),
    **_models(_declared_fields(list(RECORD_COLUMNS), first_only=False), "Request"),
)


class RequestList(Answer):
    """GET /api/requests: summaries, newest first, one page of them."""

    requests: list[RequestSummary]
    next_cursor: Optional[str] = Field(description="pass as cursor= for the next page; null on the last page")
    total: int = Field(description="requests matching the filters (all pages), counted up to 10,000")
    total_exact: bool = Field(description="false when there are more than `total`")


class Trace(Answer):
    """GET /api/traces/{trace_id}: every LLM request of the trace, in start order."""

    trace_id: str
    requests: list[Request]


# --- the diff ------------------------------------------------------------------------------------

class DiffSide(Answer):
    request_id: str
    trace_id: str
    started_at: str
    service: str
    model: str
    prompt_bytes: int
    prompt_sha256: str
    mapped: bool
    request_bytes: int
    block_count: int
    lineage: Optional[Lineage]


class DiffBlock(Answer):
    status: Literal["added", "removed", "resized", "changed", "moved", "unchanged"]
    name: str
    layer: str
    stability: str
    source: str
    index_a: Optional[int]
    index_b: Optional[int]
    moved: bool
    size_a: Optional[int]
    size_b: Optional[int]
    bytes_delta: int
    tokens_delta_estimate: int
    sha256_a: Optional[str]
    sha256_b: Optional[str]
    content_diff: Optional[list[str]] = Field(description="unified diff lines, when both texts were captured")
    content_diff_truncated: Optional[bool] = None


class ToolBrief(Answer):
    name: str
    size: int
    sha256: str


class ToolChange(Answer):
    name: str
    size_a: int
    size_b: int
    bytes_delta: int


class ToolDiff(Answer):
    added: list[ToolBrief]
    removed: list[ToolBrief]
    changed: list[ToolChange]
    bytes_delta: int


class Diff(Answer):
    """GET /api/diff: request b against request a, block by block, largest change first."""

    a: DiffSide
    b: DiffSide
    a_chosen_as: Literal["given", "previous"]
    prompt_bytes_delta: int
    tokens_delta_estimate: int
    request_bytes_delta: int
    byte_classes_delta: dict[str, int]
    identical_prompt: bool
    same_lineage: bool
    responsible: Optional[str]
    blocks: list[DiffBlock]
    added: list[DiffBlock]
    removed: list[DiffBlock]
    resized: list[DiffBlock]
    changed: list[DiffBlock]
    moved: list[DiffBlock]
    unchanged_count: int
    tools: ToolDiff
    token_estimate_method: str


# --- insight ------------------------------------------------------------------------------------

# Rows of the named insight queries (README "Insights"), one model per query: the
# query's output columns, as the API serves them (ClickHouse 0/1 conditions as
# booleans, times as UTC text "YYYY-MM-DD hh:mm:ss[.fffffffff]", NULL as null).
# A test runs every query and checks its columns against these models.
_TIME = Field(description="UTC, 'YYYY-MM-DD hh:mm:ss' (bucket start) or with nanoseconds (a request's start)")


class Window(Answer):
    since: str
    until: str
    seconds: int


class GrowthSeriesRow(Answer):
    """growth_series: average system-prompt bytes per request of one part (series) in one time bucket."""

    time: str = _TIME
    series: str
    bytes_per_request: float


class GrowthAttributionRow(Answer):
    """growth_attribution: one part's bytes per request, this period against the one before."""

    series: str
    layers: str = Field(description="the layers of a block name (by name only; else empty)")
    previous_bytes: float
    current_bytes: float
    delta_bytes: float
    delta_tokens: float
    change_pct: Optional[float]
    contribution_pct: Optional[float]
    previous_requests: int
    current_requests: int
    lineages_compared: int
    requests_not_compared: int


class GrowthTotal(Answer):
    """The whole prompt's change (the attribution's parts added up)."""

    previous_bytes: float
    current_bytes: float
    delta_bytes: float
    delta_tokens: float
    change_pct: Optional[float]
    previous_requests: int
    current_requests: int
    lineages_compared: int
    requests_not_compared: int
    current_requests_all: Optional[int] = Field(None, description="only when nothing was compared: requests in "
                                                                  "the period, compared or not")
    previous_requests_all: Optional[int] = None


class Growth(Answer):
    """GET /api/insight/growth."""

    window: Window
    previous_window: Window
    window_chosen: Literal["default", "given"]
    window_basis: str
    dimension: str
    bucket_seconds: int
    bytes_per_token: int
    total: GrowthTotal
    attribution: list[GrowthAttributionRow]
    series: list[GrowthSeriesRow]
    summary: str


class CacheCounts(Answer):
    follow_ups: int
    breaks: int
    misordered: int
    provider_misses: int


class CacheSeriesRow(Answer):
    """cache_series: follow-up requests, cache breaks, misordered requests and provider misses per bucket."""

    time: str = _TIME
    follow_ups: int
    breaks: int
    misordered: int
    provider_misses: int


class CacheBlockRow(Answer):
    """cache_breaks_by_block: the first changed block within the cached prefix, and what it cost."""

    block: str
    stability: str
    breaks: int
    bytes_rewritten: int
    tokens_rewritten: int
    expected_prefix_tokens: int
    reported_cache_read_tokens: Optional[int]
    conversations: int
    example_trace_id: str


class CacheMisorderedRow(Answer):
    """cache_misordered: a turn block placed before stable blocks."""

    block: str
    before_block: str
    requests: int
    uncacheable_bytes: int
    uncacheable_tokens: int
    services: int
    example_trace_id: str


class CacheRequestRow(Answer):
    """cache_requests: one request's verdict against the previous request of its lineage."""

    time: str = _TIME
    trace_id: str
    request_id: str
    service: str
    provider: str
    model: str
    process_kind: str
    conversation_id: str
    verdict: str
    changed_block: str
    changed_stability: str
    expected_prefix_bytes: int
    expected_prefix_tokens: int
    cache_read_tokens: Optional[int]
    cache_read_covers_prefix: Optional[bool]
    changed_in_prefix: bool
    prefix_blocks: int
    prefix_bytes: int
    tools_bytes: int
    prefix_identical: bool
    expected_cached_tokens: int
    rewritten_bytes: int
    misplaced_block: str
    displaced_block: str
    stable_bytes_after_turn: int
    previous_request_id: str
    changed_index: int
    changed_is_new: bool
    has_previous: bool
    cache_break: Optional[bool]
    turn_before_stable: bool
    provider_missed: Optional[bool]
    expected_cached_bytes: int
    input_tokens: Optional[int]
    blocks: int


class Cache(Answer):
    """GET /api/insight/cache."""

    window: Window
    bucket_seconds: int
    bytes_per_token: int
    counts: CacheCounts
    by_block: list[CacheBlockRow]
    misordered: list[CacheMisorderedRow]
    series: list[CacheSeriesRow]
    requests: list[CacheRequestRow]
    summary: list[str]


class HeadroomSeriesRow(Answer):
    """headroom_series: per bucket and model, the largest and average share of the context window used."""

    time: str = _TIME
    model: str
    max_used_pct: float
    avg_used_pct: float
    min_headroom_tokens: int


class HeadroomRequestRow(Answer):
    """headroom_requests: a request and the share of its model's context window it used."""

    time: str = _TIME
    trace_id: str
    request_id: str
    service: str
    model: str
    process_kind: str
    context_window: int
    tokens_estimate: int
    headroom_tokens: int
    used_pct: float


class Headroom(Answer):
    """GET /api/insight/headroom."""

    window: Window
    bucket_seconds: int
    series: list[HeadroomSeriesRow]
    requests: list[HeadroomRequestRow]
    summary: str


# The query behind each row model (the test runs them and compares columns).
INSIGHT_ROWS: dict[str, type[Answer]] = {
    "growth_series": GrowthSeriesRow, "growth_attribution": GrowthAttributionRow,
    "cache_series": CacheSeriesRow, "cache_breaks_by_block": CacheBlockRow, "cache_misordered": CacheMisorderedRow,
    "cache_requests": CacheRequestRow, "headroom_series": HeadroomSeriesRow, "headroom_requests": HeadroomRequestRow,
}


class Error(Answer):
    """Any failure: 400 bad argument, 404 nothing matches (or no such path), 409 ambiguous prefix,
    503 store unavailable (Retry-After), 500 store failure."""

    error: str
    candidates: Optional[list[str]] = None
    more_candidates: Optional[bool] = None


# --- query parameters ---------------------------------------------------------------------------

_MOMENT = "RFC 3339, a date, Unix seconds, now, or an age counted back from now (15m, 2h, 7d, 1w)"


class Parameters(BaseModel):
    """Query parameters: every one a route takes is declared; anything else is refused (400)."""

    model_config = ConfigDict(extra="forbid")


class ListParameters(Parameters):
    """GET /api/requests."""

    service: str = ""
    model: str = Field("", description="the requested or the answering model")
    conversation: str = ""
    message_id: str = ""
    process: str = Field("", description="a process kind or id; KIND:ID for both")
    run_id: str = ""
    since: str = Field("", description=_MOMENT)
    until: str = Field("", description=_MOMENT)
    limit: int = Field(LIST_LIMIT_DEFAULT, ge=1, le=LIMIT_MAX)
    cursor: str = Field("", description="the previous page's next_cursor (keyset on started_at, request_id)")


class DiffParameters(Parameters):
    """GET /api/diff."""

    a: str = Field("", description="request id or prefix; default: b's previous request in its lineage")
    b: str = Field("", description="request id or prefix (required: a missing b is a 400)")


class InsightParameters(Parameters):
    """GET /api/insight/growth|cache|headroom."""

    since: str = Field("", description=_MOMENT + "; default 7d")
    until: str = Field("", description=_MOMENT + "; default now")
    service: str = ""
    model: str = ""
    process: str = ""
    conversation: str = ""
    bucket: str = Field("", description="a chart bucket: seconds, or 90s, 15m, 1h, 1d, 1w; default ~48 per window")
    limit: int = Field(100, ge=1, le=LIMIT_MAX, description="per-request rows (cache, headroom)")
    dimension: Literal[tuple(DIMENSIONS)] = Field("name", description="growth only: what the change is attributed to")


def parameters(model: type[Parameters], query: dict[str, str]) -> Parameters:
    """The query string as ``model``, or BadArgument with one line naming the parameter."""
    given = {name: value for name, value in query.items() if value != ""}  # empty: the default
    try:
        return model.model_validate(given)
    except ValidationError as error:
        problem = error.errors()[0]
        name = ".".join(str(part) for part in problem["loc"]) or "query"
        if problem["type"] == "extra_forbidden":
            known = ", ".join(model.model_fields)
            raise BadArgument(f"unknown parameter {name!r}; use one of: {known}") from None
        given = query.get(name)
        shown = f"{name}={given!r}" if given is not None else name
        raise BadArgument(f"{shown}: {problem['msg'][:1].lower()}{problem['msg'][1:]}") from None


# --- the schema ---------------------------------------------------------------------------------

# Route → (its query parameters, its answer). Every route answers Error on failure.
ROUTES: dict[str, tuple[type[BaseModel] | None, type[BaseModel]]] = {
    "GET /api/requests": (ListParameters, RequestList),
    "GET /api/requests/{id}": (None, Request),
    "GET /api/traces/{trace_id}": (None, Trace),
    "GET /api/diff": (DiffParameters, Diff),
    "GET /api/insight/growth": (InsightParameters, Growth),
    "GET /api/insight/cache": (InsightParameters, Cache),
    "GET /api/insight/headroom": (InsightParameters, Headroom),
}


def json_schema() -> dict[str, Any]:
    """One JSON Schema document: every answer and parameter set under ``$defs``, and which route uses which.

    Validate an answer against ``{"$ref": "<collector>/api/schema#/$defs/Request"}`` (or the route's
    ``response`` reference under ``routes``).
    """
    models = {Error}
    for parameter_model, answer_model in ROUTES.values():
        models.add(answer_model)
        if parameter_model is not None:
            models.add(parameter_model)
    ordered = sorted(models, key=lambda model: model.__name__)
    modes = [(model, "validation" if issubclass(model, Parameters) else "serialization") for model in ordered]
    references, document = models_json_schema(modes, ref_template="#/$defs/{model}")

    def reference(model: type[BaseModel], mode: str) -> dict[str, str]:
        return references[(model, mode)]

    routes = {}
    for route, (parameter_model, answer_model) in ROUTES.items():
        entry = {"response": reference(answer_model, "serialization"), "error": reference(Error, "serialization")}
        if parameter_model is not None:
            entry["parameters"] = reference(parameter_model, "validation")
        routes[route] = entry
    return {
        "$schema": JSON_SCHEMA_DIALECT,
        "$id": SCHEMA_PATH,
        "title": "promptprism JSON API",
        "description": "Answers and query parameters of the collector's JSON API. Each route's answer is "
                       "the $defs entry its `routes` entry refers to; every failure is an Error.",
        "routes": routes,
        "$defs": document.get("$defs", {}),
    }


__all__ = ["INSIGHT_ROWS", "LIMIT_MAX", "ROUTES", "SCHEMA_PATH", "Cache", "Diff", "DiffParameters", "Error", "Growth",
           "Headroom", "InsightParameters", "ListParameters", "Request", "RequestList", "RequestSummary",
           "Trace", "json_schema", "parameters"]


if __name__ == "__main__":  # python -m promptprism.collector.read.models > docs/api-schema.json
    import json
    import sys

    sys.stdout.write(json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n")

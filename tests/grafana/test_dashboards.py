"""Every panel's SQL, expanded as Grafana and the ClickHouse plugin expand it,
runs against the real schema in chdb (filled with the scripted scenario) and
returns the columns its panel type needs."""

from __future__ import annotations

import dataclasses
import json
import re
import time
from pathlib import Path

import pytest
import yaml

from promptprism.collector.read.insight import grafana
from promptprism.collector.read.insight.queries import QUERIES

from collector.read.insight import scenario  # tests/ is on sys.path (rootdir-relative packages)
from collector.write_path_samples import write_records
from .macros import (ALL, TimeRange, Variable, _macro_args, apply_conditional_all, expand, interpolate,
                     interpolate_value)
from .metric_samples import genai_metric_points, write_genai_metrics

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((ROOT / "grafana" / "dashboards").glob("*.json"))
GRAFANA_UNITS = {"short", "decbytes", "bytes", "percent", "percentunit", "ms", "s", "none"}
NUMERIC = re.compile(r"^(Nullable\()?(U?Int\d+|Float\d+|Decimal.*)\)?$")

# `make test` runs this module on ClickHouse 24.8 too (tests/conftest.py).
pytestmark = pytest.mark.clickhouse


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def panels(dashboard: dict) -> list[dict]:
    return [panel for panel in dashboard["panels"] if panel["type"] != "row"]


def test_committed_dashboard_is_generated_from_the_named_queries():
    committed = (ROOT / "grafana" / "dashboards" / "promptprism.json").read_text(encoding="utf-8")
    assert committed == grafana.render_json(), "run: python -m promptprism.collector.read.insight.grafana"


def test_every_named_query_has_a_panel():
    used = {panel["targets"][0]["meta"]["promptprism_query"] for path in DASHBOARDS for panel in panels(load(path))}
    assert set(QUERIES) - {"cache_requests"} <= used  # per-request rows are for the API and CLI


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda path: path.name)
def test_dashboard_structure(path):
    dashboard = load(path)
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids)) and all(isinstance(panel_id, int) for panel_id in ids)
    assert dashboard["uid"] and isinstance(dashboard["schemaVersion"], int)
    variables = {variable["name"]: variable for variable in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "grafana-clickhouse-datasource"
    for name in ("service", "model", "process"):
        assert variables[name]["includeAll"] and variables[name]["multi"]
        assert variables[name]["datasource"] == {"type": "grafana-clickhouse-datasource", "uid": "${datasource}"}
    for panel in panels(dashboard):
        assert panel["datasource"] == {"type": "grafana-clickhouse-datasource", "uid": "${datasource}"}, panel["title"]
        grid = panel["gridPos"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24 and grid["h"] > 0
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}"
            assert target["editorType"] == "sql" and target["rawSql"].strip()
            assert target["format"] == (0 if panel["type"] == "timeseries" else 1)
        defaults = panel["fieldConfig"]["defaults"]
        assert defaults["unit"] in GRAFANA_UNITS and isinstance(defaults["decimals"], int)
        for override in panel["fieldConfig"]["overrides"]:
            for prop in override["properties"]:
                if prop["id"] == "unit":
                    assert prop["value"] in GRAFANA_UNITS
        # Every filter on service/model/process goes through $__conditionalAll.
        sql = panel["targets"][0]["rawSql"]
        for name in ("service", "model", "process"):
            assert "${" + name + ":singlequote}" not in sql, panel["title"]  # see named_query.grafana_selection
            calls = [(match.start(), _macro_args(sql, match.end() - 1)[1])
                     for match in re.finditer(re.escape("$__conditionalAll("), sql)]
            for use in re.finditer(r"\$\{" + name + r":queryparam\}", sql):
                assert any(start < use.start() < end for start, end in calls), panel["title"]


def _trace_id_links(dashboard: dict) -> list[dict]:
    table = next(panel for panel in panels(dashboard) if panel["targets"][0]["meta"]["promptprism_query"] == "requests_table")
    override = next(o for o in table["fieldConfig"]["overrides"] if o["matcher"]["options"] == "trace_id")
    return next(prop["value"] for prop in override["properties"] if prop["id"] == "links")


def test_requests_table_links_trace_ids_to_inspector_and_trace_view():
    dashboard = load(ROOT / "grafana" / "dashboards" / "promptprism.json")
    links = _trace_id_links(dashboard)
    urls = [link["url"] for link in links]
    assert "${inspector_url}/trace/${__value.raw:percentencode}" in urls
    [explore] = [link["internal"] for link in links if "internal" in link]
    sql = explore["query"]["rawSql"]
    assert "otel_traces" in sql and "TraceId = decodeURLComponent('${__value.raw:percentencode}')" in sql
    provisioned = yaml.safe_load((ROOT / "grafana/provisioning/datasources/clickhouse.yaml").read_text())
    assert explore["datasourceUid"] in {source["uid"] for source in provisioned["datasources"]}
    variables = {variable["name"] for variable in dashboard["templating"]["list"]}
    assert "inspector_url" in variables


def test_every_clicked_value_in_a_link_is_percent_encoded():
    """A value pasted raw into a URL or into SQL can end a literal; every use of one is formatted."""
    text = (ROOT / "grafana" / "dashboards" / "promptprism.json").read_text()
    uses = re.findall(r"\$\{__value\.[a-z]+(?::[a-z]+)?\}", text)
    assert uses and set(uses) == {"${__value.raw:percentencode}"}


HOSTILE_TRACE_IDS = ["0123456789abcdef0123456789abcdef", "ends with a backslash\\", "it's", "two '' quotes",
                     "x') OR 1=1 --", 'a "double" quote', "$$heredoc$$", "tab\there\nnewline", "100% {x:String}",
                     "日本語 ü", "\\'; DROP TABLE otel_traces; --"]


@pytest.mark.parametrize("trace_id", HOSTILE_TRACE_IDS)
def test_the_trace_view_link_selects_exactly_the_clicked_trace_for_any_value(filled, trace_id):
    """The Explore link's SQL as Grafana renders it for a clicked value, run in ClickHouse (no panel reads otel_traces)."""
    store, _ = filled
    for span, value in (("1", trace_id), ("2", "other-trace")):
        store.execute(f"INSERT INTO {store.database}.otel_traces (Timestamp, TraceId, SpanId, SpanName, ServiceName) "
                      "VALUES (now64(9), {trace:String}, {span:String}, 'hostile link', 'svc')",
                      {"trace": value, "span": span})
    [explore] = [link["internal"] for link in _trace_id_links(grafana.build_dashboard()) if "internal" in link]
    sql = interpolate(interpolate_value(explore["query"]["rawSql"], trace_id), _variables(store.database))
    rows = store.query(sql)
    assert [(row["traceID"], row["spanID"]) for row in rows] == [(trace_id, "1")]


def test_provisioning_points_at_the_dashboards_and_the_plugin():
    datasources = yaml.safe_load((ROOT / "grafana/provisioning/datasources/clickhouse.yaml").read_text())
    (source,) = datasources["datasources"]
    assert source["type"] == "grafana-clickhouse-datasource"
    assert source["jsonData"]["traces"]["defaultTable"] == "otel_traces"
    assert source["jsonData"]["traces"]["otelEnabled"] is True
    providers = yaml.safe_load((ROOT / "grafana/provisioning/dashboards/promptprism.yaml").read_text())
    (provider,) = providers["providers"]
    assert provider["type"] == "file" and provider["options"]["path"].startswith("/var/lib/grafana/dashboards")


# --- the SQL, expanded and run ---------------------------------------------------


def _variables(database: str, **selected) -> dict[str, Variable]:
    return {
        "database": Variable("database", database),
        "service": Variable("service", selected.get("service", ALL), [scenario.SERVICE, "other-service"]),
        "model": Variable("model", selected.get("model", ALL), [scenario.MODEL]),
        "process": Variable("process", selected.get("process", ALL), ["channel", "worker"]),
        "dimension": Variable("dimension", selected.get("dimension", "layer"), []),
        "inspector_url": Variable("inspector_url", "http://127.0.0.1:4380"),
    }


def _describe(store, sql: str) -> list[tuple[str, str]]:
    return [(row["name"], row["type"]) for row in store.query(f"DESCRIBE ({sql})")]


def _check_columns(panel: dict, columns: list[tuple[str, str]], rows: list[dict]) -> None:
    names = [name for name, _ in columns]
    if panel["type"] == "timeseries":
        assert names[0] == "time" and columns[0][1].startswith("DateTime"), panel["title"]
        value_columns = [(name, kind) for name, kind in columns[1:] if not kind.endswith("String)") and kind != "String"]
        assert value_columns and all(NUMERIC.match(kind) for _, kind in value_columns), columns
        labels = [name for name, kind in columns[1:] if kind in ("String", "LowCardinality(String)")]
        assert len(labels) <= 1, columns  # long format: one label column for LongToWide
    elif panel["type"] == "stat":
        assert len(rows) == 1
        assert any(NUMERIC.match(kind) for _, kind in columns)
    else:
        assert names, panel["title"]
    for column, unit in grafana.UNITS.items():
        if column in names:
            kind = dict(columns)[column]
            assert NUMERIC.match(kind), (column, kind)


ALL_PANELS = [(path, panel) for path in DASHBOARDS for panel in panels(load(path))]


@pytest.fixture(scope="module")
def filled(migrated_database):
    """One database with the scenario for the whole module (the panels only read)."""
    with migrated_database("test_grafana") as store:
        now_ns = int(time.time()) * 10**9
        write_records(store, scenario.records(now_ns))
        write_genai_metrics(store, genai_metric_points(scenario.SERVICE, scenario.MODEL, now_ns))
        yield store, now_ns


@pytest.mark.parametrize("path,panel", ALL_PANELS, ids=[f"{p.stem}:{panel['id']}" for p, panel in ALL_PANELS])
def test_panel_sql_runs_and_returns_its_columns(filled, path, panel):
    store, now_ns = filled
    now_ms = now_ns // 10**6
    week = TimeRange(from_ms=now_ms - 7 * 86_400_000, to_ms=now_ms, interval_ms=3_600_000)
    sql = expand(panel["targets"][0]["rawSql"], _variables(store.database), week)
    assert "$" not in sql, sql
    rows = store.query(sql)
    _check_columns(panel, _describe(store, sql), rows)
    assert rows, f"{panel['title']}: no rows for the scenario week"
    # A specific service selected (the IN branch of $__conditionalAll) and one that matches nothing.
    selected = expand(panel["targets"][0]["rawSql"], _variables(store.database, service=[scenario.SERVICE]), week)
    assert len(store.query(selected)) == len(rows)
    nothing = expand(panel["targets"][0]["rawSql"], _variables(store.database, service=["other-service"]), week)
    other_rows = store.query(nothing)
    if panel["type"] != "stat":
        assert other_rows == []


def test_growth_panels_name_the_block_that_grew(filled):
    store, now_ns = filled
    now_ms = now_ns // 10**6
    week = TimeRange(now_ms - 7 * 86_400_000, now_ms, 3_600_000)
    sql = expand(QUERIES["growth_attribution"].render(grafana.GRAFANA),
                 _variables(store.database, dimension="name"), week)
    top = store.query(sql)[0]
    assert top["series"] == "skills_prompt" and top["delta_bytes"] == scenario.SKILL_GROWTH
    sql = expand(QUERIES["cache_misordered"].render(grafana.GRAFANA), _variables(store.database), week)
    assert store.query(sql)[0]["block"] == "user_context"


def test_genai_metric_panels_count_what_each_bucket_added(filled):
    """Cumulative points: each bucket shows the increase since the series' previous point."""
    store, now_ns = filled
    now_ms = now_ns // 10**6
    week = TimeRange(from_ms=now_ms - 7 * 86_400_000, to_ms=now_ms, interval_ms=6 * 3_600_000)
    tokens = store.query(expand(QUERIES["genai_token_usage"].render(grafana.GRAFANA), _variables(store.database), week))
    per_series = {}
    for row in tokens:
        per_series[row["series"]] = per_series.get(row["series"], 0) + row["tokens"]
    steps = 6 * 24 // 6
    assert per_series == {f"{scenario.MODEL} input": 10 * steps * 800, f"{scenario.MODEL} output": 10 * steps * 60}
    durations = store.query(
        expand(QUERIES["genai_operation_duration"].render(grafana.GRAFANA), _variables(store.database), week))
    assert {row["average_seconds"] for row in durations} == {1.5}
    assert sum(row["calls"] for row in durations) == 10 * steps


@pytest.mark.parametrize("name", ["service", "model", "process"])
def test_variable_queries_run(filled, name):
    store, now_ns = filled
    variable = next(v for v in grafana.templating() if v["name"] == name)
    now_ms = now_ns // 10**6
    sql = expand(variable["query"], _variables(store.database), TimeRange(now_ms - 7 * 86_400_000, now_ms, 60_000))
    values = [list(row.values())[0] for row in store.query(sql)]
    assert values, name


def test_trace_view_query_runs_on_otel_traces(filled):
    store, _ = filled
    sql = interpolate(interpolate_value(grafana.TRACE_VIEW_SQL, "4bf92f3577b34da6a3ce929d0e0e4736"),
                      _variables(store.database))
    columns = [name for name, _ in _describe(store, sql)]
    assert columns == ["traceID", "spanID", "parentSpanID", "serviceName", "operationName", "startTime",
                       "duration", "tags", "serviceTags"]


# Names a client may give its service: quotes, a trailing backslash, the characters
# the queryparam format joins with (& =), a literal %, a plus, a space, non-ASCII.
HOSTILE_SERVICES = ["it's", "trailing\\", "a&b=c", "50% +1 ü", "x') OR 1=1 --"]


@pytest.fixture(scope="module")
def hostile(migrated_database):
    """The scenario again, once under each hostile service name, in a database of its own."""
    with migrated_database("test_grafana_hostile") as store:
        now_ns = int(time.time()) * 10**9
        records = scenario.records(now_ns)
        write_records(store, [dataclasses.replace(record, service=service) for service in HOSTILE_SERVICES
                              for record in records])
        # the requests of the panel's week, for each service
        yield store, now_ns, sum(record.started_at_ns >= now_ns - 7 * 86_400 * 10**9 for record in records)


def test_a_selected_service_matches_its_rows_whatever_its_name(hostile):
    """Selecting one service shows its rows and only its rows, for every name a client
    could send: the value cannot end the SQL string literal it is placed in."""
    store, now_ns, per_service = hostile
    now_ms = now_ns // 10**6
    week = TimeRange(from_ms=now_ms - 7 * 86_400_000, to_ms=now_ms, interval_ms=3_600_000)
    table = next(panel for panel in panels(load(ROOT / "grafana" / "dashboards" / "promptprism.json"))
                 if panel["targets"][0]["meta"]["promptprism_query"] == "requests_table")
    for service in HOSTILE_SERVICES:
        sql = expand(table["targets"][0]["rawSql"], _variables(store.database, service=[service]), week)
        rows = store.query(sql)
        assert {row["service"] for row in rows} == {service}, service
        assert len({row["request_id"] for row in rows}) == per_service, service
    both = expand(table["targets"][0]["rawSql"], _variables(store.database, service=HOSTILE_SERVICES[:2]), week)
    assert {row["service"] for row in store.query(both)} == set(HOSTILE_SERVICES[:2])
    variable = next(v for v in grafana.templating() if v["name"] == "model")
    sql = expand(variable["query"], _variables(store.database, service=["trailing\\"]), week)
    assert [list(row.values())[0] for row in store.query(sql)] == [scenario.MODEL]


def test_expander_models_the_plugin():
    variables = {"service": Variable("service", ALL, ["a"]), "model": Variable("model", ["x", "y'z"], [])}
    sql = "WHERE $__conditionalAll(service IN (${service:singlequote}), $service) AND $__conditionalAll(model IN (${model:singlequote}), $model)"
    assert apply_conditional_all(sql, variables) == "WHERE 1=1 AND model IN (${model:singlequote})"
    assert interpolate(apply_conditional_all(sql, variables), variables) == "WHERE 1=1 AND model IN ('x','y\\'z')"
    assert expand("$__timeFilter(t) AND $__timeInterval(t) $__interval_s $__fromTime",
                  {}, TimeRange(1_000_000, 2_000_000, 20_000)) == (
        "t >= toDateTime(1000) AND t <= toDateTime(2000) AND "
        "toStartOfInterval(toDateTime(t), INTERVAL 20 second) 20 toDateTime(1000)")
    # Grafana 11 (scene variables: urlUtil.toUrlParams of the URL state, AngularJS encoding)
    assert interpolate("${model:queryparam}", variables) == "var-model=x&var-model=y%27z"
    assert interpolate("${model:queryparam}", {"model": Variable("model", ["a b\\&=%+@:$,;ü"], [])}) == (
        "var-model=a%20b%5C%26%3D%25%2B@:$,;%C3%BC")
    with pytest.raises(ValueError):
        expand("$__nonsense(t)", {}, TimeRange(0, 1000, 1000))


def test_panels_count_a_system_prompt_that_arrived_as_log_events(store):
    """The committed panels, as Grafana runs them, see an event-only prompt with
    the size the API serves (the views of migration 008 under the panels' SQL)."""
    from promptprism.collector.read import lookups

    from collector.log_samples import OPENAI_V2_EVENTS
    from collector.event_samples import span_record, write_events

    from promptprism.wire import names

    now_ns = int(time.time()) * 10**9
    # Two requests of one lineage (a conversation), a week apart: growth compares them.
    for span_id, age_ns in ((0xF00D, 60 * 10**9), (0xF00C, 8 * 86_400 * 10**9)):
        write_records(store, [span_record(span_id << 64, span_id, now_ns - age_ns,
                                          **{names.GEN_AI_CONVERSATION_ID: "events-conversation"})])
        write_events(store, OPENAI_V2_EVENTS, span_id << 64, span_id)
    served = lookups.request(store, f"{0xF00D:016x}")["prompt"]
    assert served["bytes"] > 0

    by_query = {panel["targets"][0]["meta"]["promptprism_query"]: panel for path in DASHBOARDS
                for panel in panels(load(path))}
    now_ms = now_ns // 10**6
    week = TimeRange(now_ms - 7 * 86_400_000, now_ms, 3_600_000)

    def run(query: str) -> list[dict]:
        return store.query(expand(by_query[query]["targets"][0]["rawSql"], _variables(store.database), week))

    [request] = run("requests_table")
    assert (request["prompt_bytes"], request["block_count"]) == (served["bytes"], 1)
    [part] = run("growth_attribution")
    assert (part["series"], part["current_bytes"], part["current_requests"]) == ("(unmapped)", served["bytes"], 1)
    assert (part["previous_bytes"], part["previous_requests"], part["lineages_compared"]) == (served["bytes"], 1, 1)
    assert run("growth_total")[0]["current_bytes"] == served["bytes"]
    assert {row["bytes_per_request"] for row in run("growth_series")} == {served["bytes"]}

"""The HTML inspector's pages, served by a real collector fed over OTLP (no browser here)."""

from __future__ import annotations

import html
import re

import httpx
import pytest

from promptprism.collector.read.inspector import presentation

from ... import read_side_data as data


@pytest.fixture(scope="module")
def site(migrated_database, tmp_path_factory):
    with data.running_collector(migrated_database, str(tmp_path_factory.mktemp("collector")), data.scenario()) as (_, _, url):
        with httpx.Client(base_url=url, timeout=30) as client:
            yield client


def page(site, path, status=200, **params):
    # httpx replaces a query in the path with params= even when params is empty.
    response = site.get(path, params=params) if params else site.get(path)
    assert response.status_code == status, response.text[:500]
    assert response.headers["content-type"].startswith("text/html")
    return response.text


def test_request_page_shows_blocks_labelled_with_shares_then_divided_sections(site):
    text = page(site, f"/requests/{data.SECOND}")
    for label in ("identity", "instructions", "memory", "knowledge", "state", "static", "session", "turn",
                  "memory-store", "retrieval", "of bytes", "of tokens"):
        assert label in text, label
    # Prompt, tools, messages and response follow each other behind hard dividers.
    positions = [text.index(marker) for marker in
                 ('id="prompt"', 'id="tools"', 'id="messages"', 'id="response"')]
    assert positions == sorted(positions)
    assert text.count('<hr class="divider">') >= 4
    assert "promptprism prompt show a1b2c3d4e5f60002" in text
    assert " · 1,250 ms" in text  # the span's 1.25 s
    assert 'class="minimap"' in text and text.count('class="minimap-segment') == 6 + 3


def test_captured_text_is_escaped_everywhere(site):
    text = page(site, f"/requests/{data.SECOND}")
    assert "<script>alert" not in text and "<img src=x" not in text
    assert html.escape(data.XSS, quote=False) in text or "&lt;script&gt;alert(&#39;xss&#39;)" in text
    # prompt block, tool definition, message and response all carry the payload
    assert text.count("&lt;script&gt;alert(") >= 4


def test_multibyte_block_text_is_exact(site):
    text = page(site, f"/requests/{data.FIRST}")
    # An HTML parser drops the one newline right after <pre>; the page puts it there on purpose.
    blocks = re.findall(r'<pre class="text block-text">\n(.*?)</pre>', text, re.S)
    expected = [part.text for part in data.agent_parts("User prefers short answers. 🎯\n",
                                                       "Doc: the calendar has two meetings.\n")]
    assert [html.unescape(block) for block in blocks] == expected


def test_trace_page_lists_requests_in_order_with_growth(site):
    text = page(site, f"/trace/{data.AGENT_TRACE}")
    order = [text.index(f"<code>{request_id}</code>") for request_id in (data.FIRST, data.SECOND, data.THIRD)]
    assert order == sorted(order)
    assert "first of its lineage" in text
    assert "growth up" in text and f"/diff?a={data.FIRST}&amp;b={data.SECOND}" in text


def test_unmapped_prompt_renders_whole_with_its_reason(site):
    text = page(site, f"/requests/{data.UNMAPPED}")
    assert "unmapped: sentinel_collision" in text
    assert "You are a summarizer." in text


def test_not_captured_blocks_say_so(site):
    text = page(site, f"/requests/{data.NO_CONTENT}")
    assert "content not captured" in text and "messages not captured" in text


def test_diff_page_puts_the_responsible_block_first(site):
    text = page(site, "/diff", a=data.FIRST, b=data.THIRD)
    assert "most responsible block: <strong class=\"responsible\">memory</strong>" in text
    rows = re.findall(r'<td class="block-name">(.*?)</td>', text)
    assert rows[0] == "memory" and set(rows) == {"memory", "skills", "knowledge"}
    assert 'class="add"' in text  # the memory block's added line


def test_index_lists_and_filters(site):
    text = page(site, "/", service="billing")
    assert data.NO_CONTENT in text and data.FIRST not in text
    response = site.get("/requests", params={"id": data.UNMAPPED[:6]}, follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == f"/requests/{data.UNMAPPED[:6]}"


@pytest.mark.parametrize("path, status, needle", [
    ("/requests/a1b2", 409, data.THIRD),
    ("/requests/ffffffffffffffff", 404, "no request"),
    ("/requests/zz", 400, "hexadecimal"),
    ("/trace/ffffffffffffffffffffffffffffffff", 404, "no LLM requests"),
    ("/diff?a=a1b2c3d4e5f60001", 400, "give the request to compare"),
])
def test_error_pages_keep_statuses_apart(site, path, status, needle):
    assert needle in page(site, path, status)


def test_static_assets_are_served_locally_and_no_cdn(site):
    text = page(site, f"/requests/{data.FIRST}")
    assert not re.search(r'(src|href)="(https?:)?//', text)
    for asset in ("inspector.css", "inspector.js"):
        response = site.get(f"/static/promptprism/{asset}")
        assert response.status_code == 200 and len(response.text) > 500
    assert "prefers-color-scheme: dark" in site.get("/static/promptprism/inspector.css").text


def test_message_views_accept_the_shapes_instrumentations_send():
    views = presentation.message_views([
        {"role": "user", "parts": [{"type": "text", "content": "hi"}]},
        {"role": "assistant", "content": "hello", "tool_calls": [{"id": "1"}]},
        {"role": "user", "content": [{"type": "input_text", "text": "x"}, {"type": "image", "url": "u"}]},
    ])
    assert [view["role"] for view in views] == ["user", "assistant", "user"]
    assert views[0]["parts"] == [{"kind": "text", "label": "text", "text": "hi"}]
    assert [part["kind"] for part in views[1]["parts"]] == ["text", "data"]
    assert [part["kind"] for part in views[2]["parts"]] == ["text", "data"]
    assert presentation.message_views("raw text")[0]["parts"][0]["text"] == "raw text"


def test_number_formatting():
    assert presentation.human_bytes(1536) == "1.5 KiB"
    assert presentation.signed_bytes(-2048) == "−2.0 KiB"
    assert presentation.signed_bytes(0) == "±0 B"
    assert presentation.percent(0.1234) == "12.3%"
    assert presentation.percent(0.0001) == "<0.1%"
    assert presentation.layer_style("memory") != presentation.layer_style("identity")
    # Durations are rounded, as the CLI rounds them (the request page once cut 2.6 ms to "2 ms").
    assert [presentation.milliseconds(value) for value in (2.6, 2.4, 1250.0, 0.2, None)] == ["3", "2", "1,250", "0", "–"]


def test_trace_page_has_a_layer_legend(site):
    text = page(site, f"/trace/{data.AGENT_TRACE}")
    legend = re.search(r'<p class="legend-layers">(.*?)</p>', text, re.S).group(1)
    assert re.findall(r"</span>(\w+) ", legend) == ["identity", "template", "instructions", "memory", "knowledge",
                                                     "state", "skills"]


def test_every_page_links_to_the_request_list_and_the_overview(site):
    index = page(site, "/")
    request_path = re.search(r'href="(/requests/[0-9a-f]{16})"', index).group(1)
    for path in ("/", request_path):
        text = page(site, path)
        assert '<a href="/overview">' in text and '<a href="/">' in text, path
    assert '<a href="/">' in page(site, "/overview")


def test_index_counts_every_match_and_pages_through_them(site):
    first = page(site, "/", limit="2")
    assert "5 requests match; showing 2, newest first." in " ".join(first.split())
    seen = re.findall(r'href="/requests/([0-9a-f]{16})"><code>', first)
    following = html.unescape(re.search(r'href="/\?([^"]+)" rel="next"', first).group(1))
    while following:
        text = site.get("/?" + following).text
        seen += re.findall(r'href="/requests/([0-9a-f]{16})"><code>', text)
        found = re.search(r'href="/\?([^"]+)" rel="next"', text)
        following = html.unescape(found.group(1)) if found else ""
    # Every request once, newest first, across the pages (keyset on started_at, request_id).
    listed = [item["request_id"] for item in site.get("/api/requests").json()["requests"]]
    assert seen == listed and len(set(seen)) == 5


def test_api_pages_with_a_cursor_and_counts_the_whole_list(site):
    answer = site.get("/api/requests", params={"limit": 2}).json()
    assert (answer["total"], answer["total_exact"], len(answer["requests"])) == (5, True, 2)
    ids = [item["request_id"] for item in answer["requests"]]
    while answer["next_cursor"]:
        answer = site.get("/api/requests", params={"limit": 2, "cursor": answer["next_cursor"]}).json()
        ids += [item["request_id"] for item in answer["requests"]]
    assert len(ids) == len(set(ids)) == 5
    assert site.get("/api/requests", params={"cursor": "garbage"}).status_code == 400


def test_index_shows_the_columns_and_the_choices_from_the_data(site):
    text = page(site, "/")
    for header in ("conversation", "duration", "status", "cache read", "prompt"):
        assert f">{header}</th>" in text, header
    services = re.search(r'<select name="service">(.*?)</select>', text, re.S).group(1)
    assert re.findall(r'<option value="([^"]*)"', services) == ["", "assistant", "billing", "summarizer"]
    assert 'class="bar"' in text and data.CONVERSATION in text
    for preset in ("15m", "1h", "24h", "7d"):
        assert f'name="since" value="{preset}"' in text


@pytest.mark.parametrize("path, needle", [("/?since=bogus", "since=&#39;bogus&#39;"),
                                          ("/?limit=0", "limit"), ("/?colour=red", "unknown filter"),
                                          ("/overview?since=bogus", "since=&#39;bogus&#39;"),
                                          ("/overview?bucket=soon", "bucket=&#39;soon&#39;")])
def test_a_bad_filter_shows_the_form_with_the_error(site, path, needle):
    text = page(site, path, 400)
    error = re.search(r'<p class="form-error" role="alert">(.*?)</p>', text, re.S).group(1)
    assert needle in error
    assert '<form class="filters"' in text and 'class="topbar"' in text


def test_the_search_box_opens_a_trace_id_or_a_request(site):
    for typed, target in ((data.AGENT_TRACE, f"/trace/{data.AGENT_TRACE}"),
                          (data.AGENT_TRACE.upper(), f"/trace/{data.AGENT_TRACE}"),
                          (data.UNMAPPED[:6], f"/requests/{data.UNMAPPED[:6]}")):
        response = site.get("/requests", params={"id": typed}, follow_redirects=False)
        assert response.status_code == 303 and response.headers["location"] == target, typed
    assert data.FIRST in page(site, f"/trace/{data.AGENT_TRACE}")


def test_every_page_has_a_favicon_and_unknown_pages_are_styled(site):
    for path in ("/", "/overview", f"/requests/{data.FIRST}", "/nope"):
        text = site.get(path).text
        icon = re.search(r'<link rel="icon" href="([^"]+)"', text).group(1)
        assert site.get(icon).status_code == 200, path
    assert "404 · Not found" in page(site, "/nope", 404)


def test_plurals(site):
    assert presentation.plural(1, "message") == "1 message"
    assert presentation.plural(2, "message") == "2 messages"
    assert presentation.plural(0, "block") == "0 blocks"
    assert " 1 messages" not in page(site, f"/requests/{data.UNMAPPED}")

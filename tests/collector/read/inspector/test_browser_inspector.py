"""The inspector in a real browser (Playwright driving Debian's headless Chromium).

One browser for the module. Outside CI a missing Chromium skips these tests;
with CI=true it fails them.
"""

from __future__ import annotations

import pytest

from ... import read_side_data as data
from .conftest import ARTIFACTS

pytestmark = pytest.mark.browser

# Map and page may disagree by at most this fraction of the document height.
DRIFT_LIMIT = 0.01
SCROLL_DEPTHS = (0.1, 0.3, 0.5, 0.7, 0.9)

LONG = "d0c5000000000042"


def long_record():
    """A prompt long enough to scroll through many screens: every later offset follows multi-byte text."""
    parts = [data.Part("identity", "identity", "static", "builtin", "Ünïcödé identity — 日本語 ☕ 🎉\n")]
    for number in range(24):
        text = f"Section {number}: ✓ naïve café 🎯 " + ("lorem ipsum dolor sit amet " * (6 + (number * 7) % 50)) + "\n"
        layer = ("skills", "memory", "knowledge", "template")[number % 4]
        stability = ("static", "session", "turn", "static")[number % 4]
        parts.append(data.Part(f"part-{number}", layer, stability, f"source-{number % 3}", text))
    parts.append(data.Part("state", "state", "turn", "app", f"State: {data.XSS}\n"))
    return data.build_record(trace_id="7" * 32, request_id=LONG, parts=parts, started_offset_ms=9000)


@pytest.fixture(scope="module")
def site(migrated_database, tmp_path_factory):
    records = [*data.scenario(), long_record()]
    with data.running_collector(migrated_database, str(tmp_path_factory.mktemp("collector")), records) as (_, _, url):
        yield url, records


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    opened = context.new_page()
    dialogs: list[str] = []
    opened.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    opened.dialogs = dialogs
    yield opened
    context.close()


def settle(page):
    """Two animation frames: the map relayouts on requestAnimationFrame after scroll and resize."""
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")


def test_trace_page_lists_every_request(site, page):
    url, _ = site
    page.goto(f"{url}/trace/{data.AGENT_TRACE}")
    links = page.locator(".trace-request .trace-head a code").all_inner_texts()
    assert links == [data.FIRST, data.SECOND, data.THIRD]
    assert page.locator(".trace-request .growth.up").count() == 2
    page.screenshot(path=str(ARTIFACTS / "inspector-trace.png"), full_page=True)


def test_every_block_text_is_exact_after_multibyte_characters(site, page):
    url, records = site
    for record in records:
        if not record.mapped or record.request_id == data.NO_CONTENT:
            continue
        page.goto(f"{url}/requests/{record.request_id}")
        shown = page.locator("pre.block-text").evaluate_all("nodes => nodes.map(node => node.textContent)")
        assert shown == [block.content for block in record.blocks], record.request_id


def map_measurements(page):
    return page.evaluate("""() => {
        const track = document.querySelector('.minimap-track');
        const height = document.documentElement.scrollHeight;
        const trackRect = track.getBoundingClientRect();
        const segments = [...document.querySelectorAll('.minimap-segment')].map(segment => {
            const target = document.getElementById(segment.dataset.target);
            const rect = segment.getBoundingClientRect();
            const targetRect = target.getBoundingClientRect();
            return {
                target: segment.dataset.target,
                mapTop: (rect.top - trackRect.top) / trackRect.height,
                mapHeight: rect.height / trackRect.height,
                pageTop: (targetRect.top + window.scrollY) / height,
                pageHeight: targetRect.height / height,
            };
        });
        const box = document.querySelector('.minimap-viewport').getBoundingClientRect();
        return {
            segments,
            boxTop: (box.top - trackRect.top) / trackRect.height,
            boxHeight: box.height / trackRect.height,
            scrollTop: window.scrollY / height,
            windowShare: window.innerHeight / height,
            scrollable: height - window.innerHeight,
            measured: document.querySelector('.minimap').classList.contains('measured'),
        };
    }""")


def test_map_agrees_with_scroll_position_at_five_depths(site, page):
    url, _ = site
    page.goto(f"{url}/requests/{LONG}")
    settle(page)
    first = map_measurements(page)
    assert first["measured"] and first["scrollable"] > 5 * 800  # many screens of prompt
    for segment in first["segments"]:
        assert abs(segment["mapTop"] - segment["pageTop"]) < DRIFT_LIMIT, segment
        assert abs(segment["mapHeight"] - segment["pageHeight"]) < DRIFT_LIMIT, segment
    for depth in SCROLL_DEPTHS:
        page.evaluate("y => window.scrollTo(0, y)", depth * first["scrollable"])
        settle(page)
        now = map_measurements(page)
        assert abs(now["boxTop"] - now["scrollTop"]) < DRIFT_LIMIT, (depth, now["boxTop"], now["scrollTop"])
        assert abs(now["boxHeight"] - now["windowShare"]) < DRIFT_LIMIT
        # The block under the box's top edge on the map is the block at the top of the window.
        at_top = page.evaluate("""() => {
            const element = document.elementFromPoint(300, 2);
            const block = element && element.closest('[data-map]');
            return block ? block.id : null;
        }""")
        if at_top:
            under_box = [segment["target"] for segment in now["segments"]
                         if segment["mapTop"] <= now["boxTop"] + 0.001 < segment["mapTop"] + segment["mapHeight"]]
            assert at_top in under_box or not under_box, (depth, at_top, under_box)
        if depth == 0.5:
            page.screenshot(path=str(ARTIFACTS / "inspector-request-middle.png"))


def test_clicking_the_map_scrolls_to_the_block(site, page):
    url, _ = site
    page.goto(f"{url}/requests/{LONG}")
    settle(page)
    page.locator('.minimap-segment[data-target="block-12"]').click()
    settle(page)
    target_top = page.evaluate("() => document.getElementById('block-12').getBoundingClientRect().top")
    assert abs(target_top) <= 2
    now = map_measurements(page)
    segment = next(item for item in now["segments"] if item["target"] == "block-12")
    assert abs(now["boxTop"] - segment["mapTop"]) < DRIFT_LIMIT


def test_xss_payloads_stay_inert_text(site, page):
    url, _ = site
    page.goto(f"{url}/requests/{data.SECOND}")
    settle(page)
    page.wait_for_timeout(200)
    assert page.dialogs == []
    payload = "<script>alert('xss')</script>"
    for section in ("#prompt", "#tools", "#messages", "#response"):
        assert payload in page.locator(section).inner_text(), section
    assert page.locator("img[src='x']").count() == 0
    assert page.locator("script").count() == 1  # only the inspector's own
    page.screenshot(path=str(ARTIFACTS / "inspector-request.png"), full_page=False)


def test_copy_button_offers_the_cli_command(site, page):
    url, _ = site
    page.goto(f"{url}/requests/{data.FIRST}")
    assert page.locator("button.copy").get_attribute("data-copy") == f"promptprism prompt show {data.FIRST}"
    page.locator("button.copy").click()
    page.wait_for_function("() => document.querySelector('button.copy').textContent !== 'Copy'")


def test_narrow_window_has_no_sideways_scroll(site, browser):
    url, _ = site
    context = browser.new_context(viewport={"width": 390, "height": 800})
    narrow = context.new_page()
    try:
        for path in (f"/requests/{data.SECOND}", f"/trace/{data.AGENT_TRACE}", f"/diff?a={data.FIRST}&b={data.THIRD}"):
            narrow.goto(url + path)
            overflow = narrow.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 1, (path, overflow)
        narrow.goto(f"{url}/requests/{data.SECOND}")
        narrow.screenshot(path=str(ARTIFACTS / "inspector-narrow.png"))
    finally:
        context.close()


def test_dark_color_scheme_is_dark(site, browser):
    url, _ = site
    context = browser.new_context(viewport={"width": 1280, "height": 800}, color_scheme="dark")
    dark = context.new_page()
    try:
        dark.goto(f"{url}/requests/{data.THIRD}")
        background = dark.evaluate("() => getComputedStyle(document.body).backgroundColor")
        channels = [int(value) for value in background[background.index("(") + 1:-1].split(",")[:3]]
        assert max(channels) < 60, background
        dark.screenshot(path=str(ARTIFACTS / "inspector-dark.png"))
        dark.goto(f"{url}/diff?a={data.FIRST}&b={data.THIRD}")
        dark.screenshot(path=str(ARTIFACTS / "inspector-diff-dark.png"), full_page=True)
    finally:
        context.close()

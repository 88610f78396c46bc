"""Every inspector page in a real browser at 1400 px and 420 px, light and dark.

Each page (index, overview, trace, request, unmapped request, diff, error) is
loaded from a real collector fed real OTLP, and checked the same way: no
sideways scroll, no clipped text (an element that hides overflow is not
wider inside than out, and chart labels stay inside their view box), no
console errors (a missing favicon is one), and the scheme's background. A
screenshot of each lands in test-artifacts/.
"""

from __future__ import annotations

import time

import pytest

from ... import read_side_data as data
from ..insight import scenario
from .conftest import ARTIFACTS

pytestmark = pytest.mark.browser

WIDTHS = (1400, 420)
SCHEMES = ("light", "dark")
PAGES = {
    "index": "/",
    "overview": "/overview?since=14d",
    "trace": f"/trace/{data.AGENT_TRACE}",
    "request": f"/requests/{data.SECOND}",
    "unmapped": f"/requests/{data.UNMAPPED}",
    "diff": f"/diff?a={data.FIRST}&b={data.THIRD}",
    "error": "/nope",
}

CLIPPED = """() => {
    const found = [];
    for (const element of document.body.querySelectorAll('*')) {
        if (element.closest('.bar, .visually-hidden, svg, .minimap')) continue;
        const style = getComputedStyle(element);
        const hides = ['hidden', 'clip'].includes(style.overflowX) || style.textOverflow === 'ellipsis';
        if (hides && element.scrollWidth > element.clientWidth + 1)
            found.push(element.tagName + '.' + element.className + ': ' + element.textContent.slice(0, 40));
    }
    for (const svg of document.querySelectorAll('svg[viewBox]')) {
        const box = svg.viewBox.baseVal;
        for (const text of svg.querySelectorAll('text')) {
            const b = text.getBBox();
            if (b.x < -0.5 || b.y < -0.5 || b.x + b.width > box.width + 0.5 || b.y + b.height > box.height + 0.5)
                found.push('svg text outside its view box: ' + text.textContent);
        }
    }
    return found;
}"""


@pytest.fixture(scope="module")
def site(migrated_database, tmp_path_factory):
    now_ns = int(time.time()) * 10**9
    records = [*data.scenario(), *scenario.records(now_ns)]
    with data.running_collector(migrated_database, str(tmp_path_factory.mktemp("collector")), records) as (_, _, url):
        yield url


def background_lightness(page) -> int:
    background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    return max(int(value) for value in background[background.index("(") + 1:-1].split(",")[:3])


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("width", WIDTHS)
def test_every_page_fits_and_reads_cleanly(site, browser, width, scheme):
    context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda message: errors.append(f"{message.type}: {message.text} {message.location}")
            if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(f"pageerror: {error}"))
    page.on("requestfailed", lambda request: errors.append(f"failed: {request.url}"))
    problems = {}
    try:
        for name, path in PAGES.items():
            errors.clear()
            response = page.goto(site + path)
            assert response.status == (404 if name == "error" else 200), (name, response.status)
            page.wait_for_load_state("networkidle")
            overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
            clipped = page.evaluate(CLIPPED)
            # The error page's own 404 is the answer, not a failed resource.
            console = [line for line in errors if not (name == "error" and "404" in line and "/nope" in line)]
            lightness = background_lightness(page)
            dark_enough = lightness < 60 if scheme == "dark" else lightness > 200
            page.screenshot(path=str(ARTIFACTS / f"page-{name}-{width}-{scheme}.png"), full_page=True)
            page.screenshot(path=str(ARTIFACTS / f"page-{name}-{width}-{scheme}-top.png"))
            if overflow > 1 or clipped or console or not dark_enough:
                problems[name] = {"overflow": overflow, "clipped": clipped[:5], "console": console,
                                  "background": lightness}
    finally:
        context.close()
    assert problems == {}


def test_a_layer_has_one_colour_on_the_overview_and_the_request_page(site, browser):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    try:
        page.goto(f"{site}/overview?since=14d")
        overview = page.evaluate("""() => Object.fromEntries([...document.querySelectorAll('#growth .legend-item')]
            .map(item => [item.textContent.trim(), getComputedStyle(item.querySelector('.swatch')).backgroundColor]))""")
        page.goto(f"{site}/requests/{data.SECOND}")
        request = page.evaluate("""() => Object.fromEntries([...document.querySelectorAll('.bar-segment')]
            .map(segment => [segment.title.split(' · ')[1], getComputedStyle(segment).backgroundColor]))""")
        # A narrower filter shows fewer layers; the colours stay.
        page.goto(f"{site}/overview?since=14d&service={scenario.SERVICE}")
        filtered = page.evaluate("""() => Object.fromEntries([...document.querySelectorAll('#growth .legend-item')]
            .map(item => [item.textContent.trim(), getComputedStyle(item.querySelector('.swatch')).backgroundColor]))""")
    finally:
        context.close()

    def channels(color):
        return [int(value) for value in color[color.index("(") + 1:-1].split(",")[:3]]

    shared = set(overview) & set(request)
    assert {"memory", "identity"} <= shared, (overview, request)
    for layer in shared:
        assert max(abs(a - b) for a, b in zip(channels(overview[layer]), channels(request[layer]))) <= 2, layer
    assert all(filtered[layer] == overview[layer] for layer in filtered if layer in overview)

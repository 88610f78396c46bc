"""The browser the inspector's browser tests share: Debian's headless Chromium through Playwright.

Outside CI a missing Chromium skips those tests; with CI=true it fails them.
"""

from __future__ import annotations

import os

import pytest

from support import IN_CI, REPOSITORY

CHROMIUM = os.environ.get("PROMPTPRISM_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
ARTIFACTS = REPOSITORY / "test-artifacts"


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        message = f"Chromium not found at {CHROMIUM} (install Debian's chromium; `make browser`)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield instance
        instance.close()

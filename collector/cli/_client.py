"""The read commands' HTTP client for the collector's JSON API.

Standard library only (urllib), so read commands work on the base install.
Errors become ``CommandError`` with one actionable line each.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Mapping

from ..config import DEFAULT_URL, PROMPTPRISM_UI_TOKEN, PROMPTPRISM_URL
from . import CommandError

# A read command should answer or fail quickly; the API's queries are small.
REQUEST_TIMEOUT_SECONDS = 30


class ApiError(CommandError):
    def __init__(self, status: int, message: str, body: Any = None):
        super().__init__(message)
        self.status = status
        self.body = body


def base_url(explicit: str | None = None) -> str:
    return (explicit or os.environ.get(PROMPTPRISM_URL) or DEFAULT_URL).rstrip("/")


def get_json(path: str, params: Mapping[str, Any] | None = None, *, url: str | None = None,
             token: str | None = None) -> Any:
    """GET ``path`` from the collector API and decode the JSON answer."""
    query = urllib.parse.urlencode({k: v for k, v in (params or {}).items() if v not in (None, "")})
    target = f"{base_url(url)}{path}" + (f"?{query}" if query else "")
    request = urllib.request.Request(target, headers={"Accept": "application/json"})
    token = token or os.environ.get(PROMPTPRISM_UI_TOKEN)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_SECONDS) as response:
            return json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as error:
        raw = error.read().decode("utf-8", "replace")
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        detail = body.get("error") if isinstance(body, dict) and body.get("error") else raw.strip()[:200]
        if error.code in (401, 403):
            detail = f"{detail} (set {PROMPTPRISM_UI_TOKEN} to the collector's UI token)"
        raise ApiError(error.code, f"{error.code} from {target.split('?')[0]}: {detail}", body) from None
    except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
        reason = getattr(error, "reason", error)
        raise CommandError(
            f"cannot reach the collector at {base_url(url)} ({reason}); start it with "
            f"`promptprism collector` or set {PROMPTPRISM_URL}"
        ) from None

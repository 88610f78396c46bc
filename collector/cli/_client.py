"""The read commands' HTTP client for the collector's JSON API.

Standard library only (urllib), so read commands work on the base install.
Errors become ``CommandError`` with one actionable line each.
"""

from __future__ import annotations

import http.client
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Mapping

from ..config import DEFAULT_URL, PROMPTPRISM_UI_TOKEN, PROMPTPRISM_URL
from . import CommandError, UsageError
from ._progress import waiting

# A read command should answer or fail quickly; the API's queries are small.
REQUEST_TIMEOUT_SECONDS = 30


class ApiError(CommandError):
    def __init__(self, status: int, message: str, body: Any = None):
        super().__init__(message)
        self.status = status
        self.body = body


def _not_a_collector(base: str, status: int) -> CommandError:
    """Something answered, but not the collector's JSON API (a web server, a proxy's page)."""
    return CommandError(f"{base} answered {status} without the collector's JSON: is it a promptprism collector? "
                        f"(--url or {PROMPTPRISM_URL})")


def base_url(explicit: str | None = None) -> str:
    return (explicit or os.environ.get(PROMPTPRISM_URL) or DEFAULT_URL).rstrip("/")


def get_json(path: str, params: Mapping[str, Any] | None = None, *, url: str | None = None,
             token: str | None = None) -> Any:
    """GET ``path`` from the collector API and decode the JSON answer."""
    query = urllib.parse.urlencode({k: v for k, v in (params or {}).items() if v not in (None, "")})
    base = base_url(url)
    scheme = urllib.parse.urlsplit(base)
    if scheme.scheme not in ("http", "https") or not scheme.netloc:
        raise UsageError(f"{base!r} is not a collector URL: give http(s)://host:port (--url or {PROMPTPRISM_URL})")
    target = f"{base}{path}" + (f"?{query}" if query else "")
    request = urllib.request.Request(target, headers={"Accept": "application/json"})
    token = token or os.environ.get(PROMPTPRISM_UI_TOKEN)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with waiting(f"waiting for {base}{path}"), \
                urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_SECONDS) as response:
            raw = response.read().decode("utf-8", "replace")
            try:
                return json.loads(raw)
            except ValueError:
                raise _not_a_collector(base, response.status) from None
    except urllib.error.HTTPError as error:
        raw = error.read().decode("utf-8", "replace")
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not (isinstance(body, dict) and body.get("error")):
            raise _not_a_collector(base, error.code) from None
        detail = body["error"]
        if error.code in (401, 403):
            detail = f"{detail} (set {PROMPTPRISM_UI_TOKEN} to the collector's UI token)"
        raise ApiError(error.code, f"{error.code} from {target.split('?')[0]}: {detail}", body) from None
    except (http.client.InvalidURL, ValueError) as error:  # a port that is not a number, a space in the host
        raise UsageError(f"{base!r} is not a collector URL ({error}): give http(s)://host:port "
                         f"(--url or {PROMPTPRISM_URL})") from None
    except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
        reason = getattr(error, "reason", error)
        raise CommandError(
            f"cannot reach the collector at {base_url(url)} ({reason}); start it with "
            f"`promptprism collector` or set {PROMPTPRISM_URL}"
        ) from None

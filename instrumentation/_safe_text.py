"""Identifiers, endpoints and errors without free text.

The request manifest and the provider spans may show a model name, a tool
name, an effort word or a provider's error message; any of them can hold user
text, a pasted credential or an attack on a terminal. Values that pass a
strict allowlist are shown as they are; everything else becomes a
``sha256:<12 hex>`` fingerprint, so a preview can be pasted into an issue and
a hostile name can never reach a terminal or a log. Standard library only.
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from typing import Any

from ..wire.canonical import canonical_json, sha256_hex

# Model and tool names are short machine identifiers; anything longer or with
# other characters may be user text (or an attack on a terminal) and is
# fingerprinted instead of printed.
IDENTIFIER_PATTERN = re.compile(r"[A-Za-z0-9._:/-]{1,64}")
# Allowlisted characters can still spell a credential pasted into the wrong
# field: well-known key prefixes, or a long run mixing cases and digits.
SECRET_PATTERN = re.compile(
    r"(?:^|[._:/-])(?:sk|pk|rk|ghp|gho|ghs|xox[abpr])[-_][A-Za-z0-9]|(?:AKIA|AIza)[A-Za-z0-9]{8}"
    r"|(?=[A-Za-z0-9]*[a-z])(?=[A-Za-z0-9]*[A-Z])(?=[A-Za-z0-9]*[0-9])[A-Za-z0-9]{20,}"
)
# Hex digits shown of a fingerprint: enough to tell values apart in one
# deployment, too few to be worth brute-forcing back to short secrets.
FINGERPRINT_HEX_DIGITS = 12
# Error words kept as they are: plain lowercase or Capitalised words, short
# upper-case acronyms and small numbers, with light punctuation. Mixed-case or
# long runs look like keys or tokens and are fingerprinted.
ERROR_WORD_PATTERN = re.compile(r"\(?(?:[A-Za-z][a-z]{0,19}|[A-Z]{1,8}|[0-9]{1,9})\)?[.,:;]?")
# An error message longer than this is cut: a preview line, not a log dump.
MAX_ERROR_WORDS = 40

HOST_LOOPBACK = "loopback"
HOST_PRIVATE = "private"
HOST_PUBLIC = "public"
# Host names that only resolve inside a network.
PRIVATE_NAME_SUFFIXES = (".local", ".internal", ".lan", ".home.arpa", ".intranet", ".corp")


def fingerprint(text: str) -> str:
    digest = sha256_hex(text.encode("utf-8", "surrogatepass"))
    return f"sha256:{digest[:FINGERPRINT_HEX_DIGITS]}"


def safe_identifier(value: Any) -> str | None:
    """The identifier itself when it passes the allowlist, else its fingerprint."""
    if value is None:
        return None
    text = value if isinstance(value, str) else canonical_json(value)
    if IDENTIFIER_PATTERN.fullmatch(text) and not SECRET_PATTERN.search(text):
        return text
    return fingerprint(text)


def safe_error_text(text: str) -> str:
    """An error message reduced to allowlisted words; other words fingerprinted.

    Provider and parser errors often echo input (a model name, a body
    fragment, a key); this keeps the sentence readable without printing any
    of it.
    """
    words = str(text).split()
    kept = [word if ERROR_WORD_PATTERN.fullmatch(word) else fingerprint(word) for word in words[:MAX_ERROR_WORDS]]
    if len(words) > MAX_ERROR_WORDS:
        kept.append("…")
    return " ".join(kept)


def endpoint_class(url: str) -> tuple[str, str]:
    """(host class, fingerprint of scheme://host:port) — never the URL itself."""
    parts = urllib.parse.urlsplit(str(url))
    host = (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:  # a port that is not a number: still classify the host
        port = None
    origin = f"{parts.scheme}://{host}:{port or ''}"
    return _host_class(host), fingerprint(origin)


def _host_class(host: str) -> str:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        if host == "localhost" or host.endswith(".localhost"):
            return HOST_LOOPBACK
        if "." not in host or host.endswith(PRIVATE_NAME_SUFFIXES):
            return HOST_PRIVATE
        return HOST_PUBLIC
    if address.is_loopback:
        return HOST_LOOPBACK
    if address.is_private or address.is_link_local:
        return HOST_PRIVATE
    return HOST_PUBLIC

"""The canonical JSON (README "The request span on the wire"): the one serialisation every byte count is taken in.

``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``
encoded as UTF-8. The manifest counts byte classes in it, the fake provider
hashes prompt-cache prefixes in it, and tool definitions travel as its text:
part of the wire convention, so it lives beside the names. Standard library
only.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """The canonical serialisation of a JSON value, as text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_bytes(value: Any) -> bytes:
    # "surrogatepass" only matters for lone surrogates (a JSON "\ud800"
    # escape), which plain .encode() cannot encode at all: the manifest still
    # exists for such a body instead of failing.
    return canonical_json(value).encode("utf-8", "surrogatepass")


def canonical_size(value: Any) -> int:
    return len(canonical_bytes(value))


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()

"""The canonical JSON (README "The request span on the wire"): the one serialisation every byte count is taken in.

``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``
encoded as UTF-8. The manifest counts byte classes in it, the fake provider
hashes prompt-cache prefixes in it, and tool definitions travel as its text:
part of the wire convention, so it lives beside the names, with the one
bytes-per-token ratio every token estimate is taken at. Standard library
only.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

# Token counts are estimated from these byte counts at ~4 UTF-8 bytes per
# token, the usual rule of thumb for English prose and code with BPE
# tokenizers: the manifest's ``tokens_estimate`` (with its margin), the
# collector's per-block and per-request estimates, the insight queries and
# the fake provider's usage all use this one ratio.
BYTES_PER_TOKEN = 4


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


def tokens_in_bytes(byte_count: int) -> int:
    """Tokens in ``byte_count`` bytes at BYTES_PER_TOKEN, rounded up, no margin (0 for none)."""
    return -(-max(int(byte_count), 0) // BYTES_PER_TOKEN)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()

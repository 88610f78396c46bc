"""The redaction hook: runs over every piece of captured content before it leaves the process.

The default masks common secrets. Replace it with :func:`set_redactor` (any
``str -> str`` callable) or turn it off with ``set_redactor(keep_everything)``.
A redactor that raises fails closed: the content is dropped, never sent
unredacted.

Sizes and sha256 digests always describe the original bytes, so block maps
still validate; content that the hook changed is flagged
(``names.BLOCK_REDACTED`` / ``names.TOOL_REDACTED``) so the collector skips
checking it against the digest.
"""

from __future__ import annotations

import re
from typing import Callable

Redactor = Callable[[str], str]

# (label, literal triggers, pattern): each match becomes "[REDACTED:label]".
# A pattern runs only when one of its triggers occurs in the text: a substring
# test is ~100x cheaper than a regex scan that starts with \b, and most
# content contains no secret at all.
SECRET_PATTERNS: tuple[tuple[str, tuple[str, ...], re.Pattern[str]], ...] = (
    ("private_key", ("PRIVATE KEY-----",), re.compile(
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.DOTALL)),
    # OpenAI (sk-, sk-proj-) and Anthropic (sk-ant-) keys.
    ("api_key", ("sk-",), re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}")),
    ("bearer_token", ("earer",), re.compile(r"\b[Bb]earer\s+[A-Za-z0-9\-._~+/]{8,}=*")),
    ("aws_access_key_id", ("AKIA", "ASIA"), re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("aws_secret_access_key", ("secret", "SECRET", "Secret"), re.compile(
        r"(?i)(aws_secret_access_key|secret_access_key|aws_secret)(\s*[=:]\s*[\"']?)[A-Za-z0-9/+=]{40}")),
    ("github_token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}\b")),
    ("slack_token", ("xox",), re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}")),
    ("google_api_key", ("AIza",), re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b")),
)


def mask_secrets(text: str) -> str:
    """The default redactor: every match of :data:`SECRET_PATTERNS` becomes ``[REDACTED:label]``."""
    for label, triggers, pattern in SECRET_PATTERNS:
        if not any(trigger in text for trigger in triggers):
            continue
        if label == "aws_secret_access_key":
            # Keep the key name so a reader sees what was there.
            text = pattern.sub(lambda match: f"{match.group(1)}{match.group(2)}[REDACTED:{label}]", text)
        else:
            text = pattern.sub(f"[REDACTED:{label}]", text)
    return text


def keep_everything(text: str) -> str:
    """A redactor that changes nothing (content is sent as captured)."""
    return text


_redactor: Redactor = mask_secrets


def set_redactor(redactor: Redactor | None) -> None:
    """Use ``redactor`` for all captured content; ``None`` restores :func:`mask_secrets`."""
    global _redactor
    _redactor = redactor if redactor is not None else mask_secrets


def current_redactor() -> Redactor:
    return _redactor


def redact(text: str) -> tuple[str | None, bool]:
    """``(content to send, whether it differs from text)``; ``(None, True)`` when the hook failed."""
    try:
        result = _redactor(text)
    except Exception:  # the hook is application code; fail closed
        return None, True
    if not isinstance(result, str):
        return None, True
    return result, result != text

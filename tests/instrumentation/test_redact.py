"""The default redaction hook masks common secrets and leaves ordinary text alone."""

from __future__ import annotations

import pytest

from promptprism.instrumentation._redact import keep_everything, mask_secrets, redact, set_redactor

PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1234\nabcd==\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize("secret, label", [
    ("sk-proj-AbCdEfGhIjKlMnOpQrStUvWx1234", "api_key"),
    ("sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv", "api_key"),
    ("Bearer eyJhbGciOiJIUzI1NiJ9.payload.signature", "bearer_token"),
    ("AKIAIOSFODNN7EXAMPLE", "aws_access_key_id"),
    (PEM, "private_key"),
    ("ghp_" + "a1B2" * 9, "github_token"),
    ("xoxb-1234567890-abcdefghij", "slack_token"),
    ("AIza" + "B" * 35, "google_api_key"),
])
def test_common_secrets_are_masked(secret, label):
    masked = mask_secrets(f"before {secret} after")
    assert secret not in masked
    assert masked == f"before [REDACTED:{label}] after"


def test_aws_secret_keeps_its_key_name():
    text = "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    assert mask_secrets(text) == "aws_secret_access_key = [REDACTED:aws_secret_access_key]"


@pytest.mark.parametrize("text", ["Ask the user about their task-list.", "Use sk- prefixes carefully",
                                  "The bearer of this note", "AKIA is a prefix", "ghp_short", "héllo 🙂"])
def test_ordinary_text_is_unchanged(text):
    assert mask_secrets(text) == text


def test_redact_reports_changes_and_fails_closed():
    assert redact("plain") == ("plain", False)
    assert redact("key sk-abcdefghijklmnopqrstuv") == ("key [REDACTED:api_key]", True)
    set_redactor(keep_everything)
    assert redact("key sk-abcdefghijklmnopqrstuv") == ("key sk-abcdefghijklmnopqrstuv", False)
    set_redactor(lambda text: text.replace("tea", "***"))
    assert redact("likes tea") == ("likes ***", True)
    set_redactor(lambda text: 1 / 0)
    assert redact("anything") == (None, True)
    set_redactor(lambda text: None)
    assert redact("anything") == (None, True)
    set_redactor(None)
    assert redact("sk-abcdefghijklmnopqrstuv")[1] is True

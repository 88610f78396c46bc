"""``promptprism preview BODY.json``: the request manifest of a body, before sending it.

Reads a provider request body (a file, or ``-`` for standard input), builds
the same manifest the provider wrappers put on every span and prints it as a
table or, with ``--json``, as one JSON object; ``--schema`` prints the JSON
Schema of that object (derived from the manifest's declaration). Works on the
base install.

Nothing from the body is printed as text: identifiers pass an allowlist or
appear as fingerprints, and parse errors are reduced word by word.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from promptprism.instrumentation.manifest import (
    BYTES_PER_TOKEN,
    ESTIMATE_MARGIN,
    ManifestError,
    RequestManifest,
    build_manifest,
    json_schema,
    safe_error_text,
)
from promptprism.wire import names

from . import CommandError, UsageError

# Hex digits of a sha256 shown in the table; --json has the whole digest.
TABLE_DIGEST_DIGITS = 16


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "preview",
        help="byte and token manifest of a request body (no network)",
        description="Describe a provider request body: bytes by class (system, tools, messages, framing), "
                    "tool catalog, estimated tokens and headroom. Token counts are estimates "
                    f"(~{BYTES_PER_TOKEN} bytes per token + {ESTIMATE_MARGIN:.0%}).",
    )
    parser.add_argument("body", metavar="BODY.json", nargs="?",
                        help="request body as JSON; - reads standard input")
    parser.add_argument("--dialect", choices=names.DIALECTS, help="body format (detected when absent)")
    parser.add_argument("--context-window", type=_positive_int, metavar="N",
                        help="model context window in tokens, for the headroom line")
    parser.add_argument("--json", action="store_true", help="print the manifest as JSON")
    parser.add_argument("--schema", action="store_true",
                        help="print the JSON Schema of the --json object instead (no BODY.json needed)")
    parser.set_defaults(handler=run)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a whole number of tokens") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be greater than zero")
    return value


# A request body of any dialect carries its conversation under one of these
# (Chat Completions and Anthropic: messages; Responses: input or instructions).
CONVERSATION_KEYS = ("messages", "input", "instructions", "system")


def run(args: argparse.Namespace) -> int:
    if args.schema:
        _print_json(json_schema())
        return 0
    if args.body is None:
        raise CommandError("give a request body (BODY.json, or - for standard input), or --schema")
    source = _source(args.body)
    body = _read_body(args.body)
    if args.dialect is None and not any(key in body for key in CONVERSATION_KEYS):
        raise UsageError(f"{source} is not a request body of any dialect ({', '.join(names.DIALECTS)}): "
                         f"it has none of {', '.join(CONVERSATION_KEYS)}")
    try:
        manifest = build_manifest(body, args.dialect, context_window=args.context_window)
    except ManifestError as error:
        raise CommandError(f"{source}: {safe_error_text(str(error))}") from None
    if args.json:
        _print_json(manifest.to_json())
    else:
        sys.stdout.write(render_table(manifest))
    return 0


def _print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


def _source(path: str) -> str:
    return "standard input" if path == "-" else repr(path)


def _read_body(path: str) -> Any:
    try:
        if path == "-":
            raw = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as handle:
                raw = handle.read()
    except OSError as error:
        raise CommandError(f"cannot read {_source(path)}: {safe_error_text(error.strerror or 'error')}") from None
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as error:
        raise UsageError(f"{_source(path)} is not valid JSON: {safe_error_text(str(error))}") from None
    if not isinstance(body, dict):
        raise UsageError(f"{_source(path)} must hold a JSON object (a request body)")
    return body


def render_table(manifest: RequestManifest) -> str:
    total = manifest.bytes_total or 1
    lines = [
        f"dialect            {manifest.dialect}{' (detected)' if manifest.dialect_detected else ''}",
        f"model              {manifest.model or '-'}",
        f"body sha256        {manifest.body_sha256[:TABLE_DIGEST_DIGITS]}…",
        f"manifest schema    {manifest.schema_version}",
        "",
        f"{'class':<18} {'bytes':>10} {'share':>7} {'~tokens':>9}",
    ]

    def row(label: str, size: int, tokens: int | None) -> str:
        token_text = f"{tokens:>9,}" if tokens is not None else f"{'':>9}"
        return f"{label:<18} {size:>10,} {size / total:>7.1%} {token_text}"

    by_class = manifest.tokens_by_class
    lines += [
        row("system", manifest.bytes_system, by_class.get("system")),
        row("tools", manifest.bytes_tools, by_class.get("tools")),
        row("messages", manifest.bytes_messages, by_class.get("messages")),
        row("  tool results", manifest.bytes_tool_results, None),
        row("  attachments", manifest.bytes_attachments, None),
        row("framing", manifest.bytes_framing, by_class.get("framing")),
        row("total", manifest.bytes_total, manifest.tokens_estimate),
        "",
        f"messages           {manifest.messages_count}",
        f"tools              {manifest.tools_count}"
        + (f"   catalog sha256 {manifest.tools_catalog_sha256[:TABLE_DIGEST_DIGITS]}…"
           if manifest.tools_catalog_sha256 else ""),
    ]
    for tool in manifest.tools:
        lines.append(f"  {tool.name or '-':<32} {tool.size:>8,} bytes  sha256 {tool.sha256[:TABLE_DIGEST_DIGITS]}…")
    if manifest.reasoning_effort is not None:
        lines.append(f"reasoning effort   {manifest.reasoning_effort}")
    if manifest.reasoning_budget_tokens is not None:
        lines.append(f"reasoning budget   {manifest.reasoning_budget_tokens:,} tokens")
    if manifest.max_output_tokens is not None:
        lines.append(f"max output         {manifest.max_output_tokens:,} tokens")
    lines.append(f"stream             {'yes' if manifest.stream else 'no'}")
    if manifest.context_window is not None and manifest.headroom_tokens is not None:
        verdict = "fits" if manifest.headroom_tokens >= 0 else "DOES NOT FIT"
        lines.append(f"context window     {manifest.context_window:,} tokens; "
                     f"headroom {manifest.headroom_tokens:,} tokens ({verdict})")
    lines += ["", f"~tokens are estimates: {BYTES_PER_TOKEN} bytes per token + {ESTIMATE_MARGIN:.0%} margin."]
    return "\n".join(lines) + "\n"

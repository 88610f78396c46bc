"""The ``promptprism`` command.

Each verb lives in its own module with a ``register(subparsers)`` function
that adds its parser and sets ``handler``. Modules import heavy dependencies
inside their handlers only, so ``promptprism template show`` and
``promptprism preview`` work on the light base install.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Verb modules, in the order `promptprism --help` lists them.
COMMAND_MODULES = (
    "collector_command",  # collector
    "prompt",  # prompt show | diff | list
    "insight",  # growth, cache
    "template",  # template show
    "preview",  # preview BODY.json
    "demo",  # demo
    "migrate",  # migrate
)


class CommandError(Exception):
    """A failure the user can act on: printed as one line, exit status 1."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="promptprism",
        description="See what your LLM application actually sends, block by block.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for module_name in COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{module_name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status = args.handler(args)
    except CommandError as error:
        print(f"promptprism {args.command}: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return int(status or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

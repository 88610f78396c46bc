"""The ``promptprism`` command.

Each verb lives in its own module with a ``register(subparsers)`` function
that adds its parser and sets ``handler``; each is a thin front for the
package that owns the feature (``collector`` → the app, ``prompt`` and
``growth``/``cache`` → the API, ``template`` → the instrumentation's
templates, ``preview`` → its manifest, ``demo`` → ``collector.demo``).
Modules import heavy dependencies inside their handlers only, so
``promptprism template show`` and ``promptprism preview`` work on the light
base install.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["CommandError", "build_parser", "main"]


class CommandError(Exception):
    """A failure the user can act on: printed as one line, exit status 1."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="promptprism",
        description="See what your LLM application actually sends, block by block.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    # Imported here, not at the top: each verb module imports CommandError from this one.
    from . import collector, demo, insight, migrate, preview, prompt, template

    # In the order `promptprism --help` lists them.
    for verb in (collector, prompt, insight, template, preview, demo, migrate):
        verb.register(subparsers)
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

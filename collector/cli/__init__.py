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
import os
import sys

__all__ = ["CommandError", "UsageError", "build_parser", "main"]

USAGE_STATUS = 2  # as argparse: the command line is wrong
# What a process killed by SIGPIPE reports (128 + 13): `promptprism … | head` stops quietly.
BROKEN_PIPE_STATUS = 141


class CommandError(Exception):
    """A failure the user can act on: printed as one line, exit status 1."""

    exit_status = 1


class UsageError(CommandError):
    """A bad argument: printed as one line, exit status 2."""

    exit_status = USAGE_STATUS


class Parser(argparse.ArgumentParser):
    """Every verb reports a bad argument the same way: one line naming the verb, exit 2."""

    def error(self, message: str) -> None:  # argparse's own: usage + error over several lines
        self.exit(USAGE_STATUS, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
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
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, as Unix tools do. Point
        # stdout at /dev/null so the interpreter's own flush at exit stays quiet too.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return BROKEN_PIPE_STATUS
    except CommandError as error:
        print(f"promptprism {args.command}: {error}", file=sys.stderr)
        return error.exit_status
    except KeyboardInterrupt:
        return 130
    return int(status or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

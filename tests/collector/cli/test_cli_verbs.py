"""The `promptprism` verbs the README documents, every one registered."""

import argparse

from promptprism.collector.cli import build_parser

DOCUMENTED_VERBS = {"collector", "prompt", "growth", "cache", "template", "preview", "demo", "migrate"}


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    [action] = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    return dict(action.choices)


def test_every_documented_verb_is_registered():
    verbs = _subcommands(build_parser())
    assert set(verbs) == DOCUMENTED_VERBS
    assert set(_subcommands(verbs["prompt"])) == {"show", "diff", "list"}
    assert set(_subcommands(verbs["template"])) == {"show"}


def test_read_commands_take_json():
    verbs = _subcommands(build_parser())
    readers = [*_subcommands(verbs["prompt"]).values(), verbs["growth"], verbs["cache"],
               _subcommands(verbs["template"])["show"], verbs["preview"]]
    for parser in readers:
        assert any("--json" in action.option_strings for action in parser._actions), parser.prog

"""``promptprism template show NAME [--scope S] [--json]``: the effective template and where it came from.

Where the templates are (flag, else environment variable):

- ``--templates SOURCE`` / ``PROMPTPRISM_TEMPLATES``: either a directory of
  built-in ``NAME.j2`` files, or ``package.module:attribute`` naming the
  application's ``TemplateCatalog`` (or a ``{name: text}`` mapping of
  built-ins) — the faithful choice when the app sets tokens or code overrides.
- ``--overrides DIR`` / ``PROMPTPRISM_TEMPLATE_OVERRIDES``: the overrides
  directory (``global/NAME.j2``, ``scopes/SCOPE/NAME.j2``), loaded on top.

Works on the base install: it imports only the instrumentation library.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path
from typing import Mapping

from ...instrumentation import ENV_TEMPLATE_OVERRIDES, ENV_TEMPLATES, TemplateCatalog, TemplateError
from . import CommandError


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "template", help="show a prompt template's effective text and origin",
        description="Inspect prompt templates and their overrides (scope → global → built-in).",
    )
    verbs = parser.add_subparsers(dest="template_command", metavar="VERB")
    verbs.required = True
    show = verbs.add_parser(
        "show", help="print the effective text, its origin and the built-in default",
        description="Print a template's effective text (scope override → global override → built-in), which "
                    "layer it came from, and the built-in default beside it. Templates come from --templates "
                    f"(or {ENV_TEMPLATES}), overrides from --overrides; --demo shows the demo application's.")
    show.add_argument("name", metavar="NAME", help="template name")
    show.add_argument("--scope", default=None, help="resolve for this scope (tenant, agent, channel…)")
    show.add_argument("--templates", default=None, metavar="SOURCE",
                      help=f"directory of NAME.j2 built-ins, or package.module:attribute [env {ENV_TEMPLATES}]")
    show.add_argument("--overrides", default=None, metavar="DIR",
                      help=f"overrides directory (global/NAME.j2, scopes/SCOPE/NAME.j2) "
                           f"[env {ENV_TEMPLATE_OVERRIDES}]")
    show.add_argument("--demo", action="store_true",
                      help="the templates and overrides `promptprism demo` renders (agent.system, worker.system, "
                           "compactor.system; scope web-legacy)")
    show.add_argument("--json", action="store_true", help="print one JSON object")
    show.set_defaults(handler=show_template)


def load_catalog(source: str | None, overrides: str | None) -> TemplateCatalog:
    """The catalog named by ``source`` (directory or module:attribute) with ``overrides`` loaded on top."""
    source = source or os.environ.get(ENV_TEMPLATES)
    overrides = overrides or os.environ.get(ENV_TEMPLATE_OVERRIDES)
    if not source and not overrides:
        raise CommandError(f"no templates given: pass --templates DIR|package.module:attribute "
                           f"or set {ENV_TEMPLATES}")
    try:
        if not source:
            catalog = TemplateCatalog(overrides_directory=overrides)
        elif Path(source).is_dir():
            catalog = TemplateCatalog.from_directory(source, overrides_directory=overrides)
        elif ":" in source:
            catalog = _catalog_from_module(source)
            if overrides:
                # Loading is idempotent, so a directory the catalog already read is harmless.
                catalog.load_overrides(overrides)
        else:
            raise CommandError(f"--templates {source!r} is neither a directory nor package.module:attribute")
    except TemplateError as error:
        raise CommandError(str(error)) from None
    return catalog


def _catalog_from_module(source: str) -> TemplateCatalog:
    module_name, _, attribute = source.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise CommandError(f"cannot import {module_name!r}: {error}") from None
    found = getattr(module, attribute, None)
    if isinstance(found, TemplateCatalog):
        return found
    if isinstance(found, Mapping):
        return TemplateCatalog(dict(found))
    raise CommandError(f"{source!r} is not a TemplateCatalog or a mapping of template texts")


def show_template(args: argparse.Namespace) -> int:
    if args.demo:
        from ..demo.application import demo_catalog

        catalog = demo_catalog()
        if args.overrides:
            catalog.load_overrides(args.overrides)
    else:
        catalog = load_catalog(args.templates, args.overrides)
    try:
        resolved = catalog.resolve(args.name, scope=args.scope)
    except TemplateError as error:
        known = ", ".join(catalog.template_names()) or "none"
        raise CommandError(f"{error}; known templates: {known}") from None
    if args.json:
        json.dump({"name": resolved.name, "scope": args.scope, "origin": resolved.origin, "text": resolved.text,
                   "builtin_text": resolved.builtin_text}, sys.stdout, ensure_ascii=False, indent=2)
        sys.stdout.write("\n")
        return 0
    where = f" for scope {args.scope!r}" if args.scope else ""
    print(f"template {resolved.name!r}{where}: origin {resolved.origin}")
    print("--- effective text " + "-" * 40)
    print(resolved.text, end="" if resolved.text.endswith("\n") else "\n")
    print("--- built-in default " + "-" * 38)
    if resolved.builtin_text is None:
        print("(none: this template exists only as an override)")
    else:
        print(resolved.builtin_text, end="" if resolved.builtin_text.endswith("\n") else "\n")
    return 0

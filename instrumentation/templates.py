"""Jinja2 prompt templates with layered overrides, rendered into segmented prompts.

Resolution (SPEC §2): scope override → global override → built-in. An empty or
whitespace-only override inherits the next layer; an override replaces the
whole text; ``<TOKEN>`` placeholders are replaced at every occurrence (unknown
ones stay literal); an override over the size cap is rejected when it is set
or loaded, with an error naming its layer.

Overrides come from code (:meth:`TemplateCatalog.set_override`) or from a
directory laid out as::

    OVERRIDES/global/NAME.j2           global override of template NAME
    OVERRIDES/scopes/SCOPE/NAME.j2     override of NAME for one scope (tenant, agent, channel…)

given as ``overrides_directory=`` or in ``PROMPTPRISM_TEMPLATE_OVERRIDES``.
Built-ins come from code (a ``{name: text}`` mapping) or a directory of
``NAME.j2`` files (:meth:`TemplateCatalog.from_directory`).

Rendering goes through one Jinja2 environment whose ``finalize`` hook wraps
every declared value in sentinels (``segments.finalize``); the text the
application gets is the sentinel-stripped output of that render, nothing else.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

import jinja2

from . import names
from .segments import (
    SegmentedPrompt,
    Template,
    Value,
    finalize,
    split_marked,
    unmapped,
)

# Operators paste overrides by hand; 16 KiB is far above any sane system
# prompt section and small enough that a runaway file is caught at load.
DEFAULT_SIZE_CAP_BYTES = 16 * 1024
TEMPLATE_SUFFIX = ".j2"

# Jinja2 drops a template's final newline by default; prompts are exact text.
ENVIRONMENT_OPTIONS: Mapping[str, Any] = {"keep_trailing_newline": True, "autoescape": False}


class TemplateError(ValueError):
    """A template configuration problem: unknown name, or an override over the cap."""


def prompt_environment(**options: Any) -> jinja2.Environment:
    """A Jinja2 environment for promptprism templates; add filters/globals to it freely."""
    if "finalize" in options:
        raise TemplateError("promptprism owns the environment's finalize hook (it marks values)")
    return jinja2.Environment(**{**ENVIRONMENT_OPTIONS, **options}, finalize=finalize)


def replace_tokens(text: str, tokens: Mapping[str, str]) -> str:
    """Replace every ``<TOKEN>`` whose name is in ``tokens``; unknown placeholders stay literal."""
    for token, replacement in tokens.items():
        text = text.replace(f"<{token}>", replacement)
    return text


def render_segmented(compiled: jinja2.Template, values: Iterable[Value] | Mapping[str, Value] = (), *,
                     context: Mapping[str, Any] | None = None, template: Template | None = None,
                     stability: str = names.STABILITY_STATIC) -> SegmentedPrompt:
    """Render ``compiled`` (from :func:`prompt_environment`) with ``values`` marked, and split it.

    ``values`` are :class:`Value` objects (or a mapping whose values they are);
    a later value of the same name wins, as in Jinja2. ``context`` holds
    undeclared variables (lists to loop over, flags): their output is prose.
    ``stability`` is the template text's own stability.
    """
    variables = dict(context) if context else {}
    declared: dict[str, Value] = {}
    collides = False
    for value in values.values() if isinstance(values, Mapping) else values:
        declared[value.name] = value
        variables[value.name] = value.marked
        collides = collides or value.collides
    if collides:
        # The value's own text would be cut as if it were ours: render it unmarked,
        # keep the exact text, record no map.
        for name, value in declared.items():
            variables[name] = value.text
        return unmapped(compiled.render(variables), names.UNMAPPED_SENTINEL_COLLISION, template=template,
                        context=context, values=tuple(declared.values()))
    prompt = split_marked(compiled.render(variables), declared, template=template, template_stability=stability,
                          context=context)
    if prompt is not None:
        return prompt
    # A filter cut or rewrote captured output that held sentinels ({% set %} +
    # |truncate, say): stripping them would not give Jinja2's text. The app must
    # still get exactly that, so render once more with the values unmarked.
    for name, value in declared.items():
        variables[name] = value.text
    return unmapped(compiled.render(variables), names.UNMAPPED_RENDER_ERROR, template=template, context=context,
                    values=tuple(declared.values()))


def render_string(source: str, values: Iterable[Value] | Mapping[str, Value] = (), *,
                  context: Mapping[str, Any] | None = None, name: str = "inline",
                  stability: str = names.STABILITY_STATIC) -> SegmentedPrompt:
    """Render a template given as text (no catalog, origin ``builtin``)."""
    compiled = _default_environment().from_string(source)
    return render_segmented(compiled, values, context=context, template=Template(name, names.ORIGIN_BUILTIN),
                            stability=stability)


_environment: jinja2.Environment | None = None


def _default_environment() -> jinja2.Environment:
    global _environment
    if _environment is None:
        _environment = prompt_environment()
    return _environment


@dataclass(frozen=True)
class ResolvedTemplate:
    """The effective text of a template and where it came from (tokens already replaced)."""

    name: str
    origin: str  # names.ORIGIN_BUILTIN / ORIGIN_GLOBAL / ORIGIN_SCOPE
    text: str
    builtin_text: str | None
    scope: str | None = None

    @property
    def template(self) -> Template:
        return Template(self.name, self.origin, self.scope)


class TemplateCatalog:
    """Named prompt templates: built-ins plus global and per-scope overrides."""

    def __init__(self, builtins: Mapping[str, str] | None = None, *,
                 overrides_directory: str | os.PathLike[str] | None = None,
                 tokens: Mapping[str, str] | None = None, size_cap: int = DEFAULT_SIZE_CAP_BYTES,
                 environment: jinja2.Environment | None = None):
        if environment is not None and environment.finalize is not finalize:
            raise TemplateError("the environment must come from prompt_environment() so values are marked")
        self.environment = environment or prompt_environment()
        self.size_cap = size_cap
        self.tokens: dict[str, str] = dict(tokens or {})
        self._builtins: dict[str, str] = dict(builtins or {})
        self._global: dict[str, str] = {}
        self._scoped: dict[str, dict[str, str]] = {}
        self._compiled: dict[tuple[str, str | None], tuple[ResolvedTemplate, jinja2.Template]] = {}
        self._lock = threading.Lock()
        directory = overrides_directory or os.environ.get(names.ENV_TEMPLATE_OVERRIDES)
        if directory:
            self.load_overrides(directory)

    @classmethod
    def from_directory(cls, builtins_directory: str | os.PathLike[str], **options: Any) -> TemplateCatalog:
        """Built-ins from ``NAME.j2`` files in ``builtins_directory``."""
        builtins = {path.name[: -len(TEMPLATE_SUFFIX)]: path.read_text(encoding="utf-8")
                    for path in sorted(Path(builtins_directory).glob(f"*{TEMPLATE_SUFFIX}"))}
        return cls(builtins, **options)

    # --- configuration (strict: errors here are the operator's to fix) -------

    def add_builtin(self, name: str, text: str) -> None:
        with self._lock:
            self._builtins[name] = text
            self._compiled.clear()

    def set_override(self, name: str, text: str | None, *, scope: str | None = None, origin_label: str = "") -> None:
        """Override template ``name`` globally, or for ``scope``; ``None`` removes the override."""
        layer = names.ORIGIN_SCOPE if scope is not None else names.ORIGIN_GLOBAL
        if text is not None:
            size = len(text.encode("utf-8"))
            if size > self.size_cap:
                where = f"{layer} override of template {name!r}" + (f" for scope {scope!r}" if scope else "")
                raise TemplateError(f"{where}{origin_label} is {size} bytes, over the {self.size_cap}-byte cap")
        with self._lock:
            target = self._global if scope is None else self._scoped.setdefault(scope, {})
            if text is None:
                target.pop(name, None)
            else:
                target[name] = text
            self._compiled.clear()

    def load_overrides(self, directory: str | os.PathLike[str]) -> None:
        """Load ``global/NAME.j2`` and ``scopes/SCOPE/NAME.j2`` from ``directory``."""
        root = Path(directory)
        if not root.is_dir():
            raise TemplateError(f"template overrides directory {str(root)!r} does not exist")
        for path in sorted((root / "global").glob(f"*{TEMPLATE_SUFFIX}")):
            self.set_override(path.name[: -len(TEMPLATE_SUFFIX)], path.read_text(encoding="utf-8"),
                              origin_label=f" ({path})")
        for scope_directory in sorted(path for path in (root / "scopes").glob("*") if path.is_dir()):
            for path in sorted(scope_directory.glob(f"*{TEMPLATE_SUFFIX}")):
                self.set_override(path.name[: -len(TEMPLATE_SUFFIX)], path.read_text(encoding="utf-8"),
                                  scope=scope_directory.name, origin_label=f" ({path})")

    def template_names(self) -> list[str]:
        scoped = {name for overrides in self._scoped.values() for name in overrides}
        return sorted(set(self._builtins) | set(self._global) | scoped)

    # --- resolution and rendering ---------------------------------------------

    def resolve(self, name: str, *, scope: str | None = None) -> ResolvedTemplate:
        """The effective template: scope override, else global override, else built-in."""
        builtin = self._builtins.get(name)
        candidates = (
            (names.ORIGIN_SCOPE, self._scoped.get(scope, {}).get(name) if scope is not None else None),
            (names.ORIGIN_GLOBAL, self._global.get(name)),
            (names.ORIGIN_BUILTIN, builtin),
        )
        for origin, text in candidates:
            if text is not None and (text.strip() or origin == names.ORIGIN_BUILTIN):
                return ResolvedTemplate(
                    name, origin, replace_tokens(text, self.tokens),
                    replace_tokens(builtin, self.tokens) if builtin is not None else None,
                    scope if origin == names.ORIGIN_SCOPE else None,
                )
        raise TemplateError(f"unknown template {name!r}" + (f" (scope {scope!r})" if scope else ""))

    def compiled(self, name: str, *, scope: str | None = None) -> tuple[ResolvedTemplate, jinja2.Template]:
        key = (name, scope)
        found = self._compiled.get(key)
        if found is None:
            resolved = self.resolve(name, scope=scope)
            found = (resolved, self.environment.from_string(resolved.text))
            with self._lock:
                self._compiled[key] = found
        return found

    def render(self, name: str, values: Iterable[Value] | Mapping[str, Value] = (), *,
               scope: str | None = None, context: Mapping[str, Any] | None = None,
               stability: str = names.STABILITY_STATIC) -> SegmentedPrompt:
        """Render template ``name`` for ``scope`` with declared ``values`` and plain ``context``."""
        resolved, compiled = self.compiled(name, scope=scope)
        return render_segmented(compiled, values, context=context, template=resolved.template, stability=stability)

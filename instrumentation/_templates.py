"""Jinja2 prompt templates with layered overrides, rendered into segmented prompts.

Resolution (README "Instrumenting an application", templates and overrides):
scope override → global override → built-in. An empty or whitespace-only
override inherits the next layer; an override replaces the
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
Its code generator inlines that hook's check into each compiled template, so
an output that is not a declared value costs one class comparison, not a call;
its ``concat`` hook (``segments.join_captured``) makes captured output
(``{% set %}`` blocks, macros) behave like a declared value: filters see its
exact text, an unchanged output keeps the blocks inside.
"""

from __future__ import annotations

import os
import re
import threading
from collections import ChainMap
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Mapping

import jinja2
from jinja2.compiler import CodeGenerator
from markupsafe import escape

from ..wire import names
from ._segments import (
    MarkedValue,
    SegmentedPrompt,
    Template,
    Value,
    finalize,
    join_captured,
    one_off_sentinel,
    render_sentinel,
    split_rendered,
    strip_sentinels,
    unmapped,
)

# Directory of template overrides (global/NAME.j2, scopes/SCOPE/NAME.j2) that
# TemplateCatalog and `promptprism template show` load when none is given.
ENV_TEMPLATE_OVERRIDES = "PROMPTPRISM_TEMPLATE_OVERRIDES"
# Built-in templates for `promptprism template show`: a directory of NAME.j2
# files, or `package.module:attribute` naming the application's TemplateCatalog.
ENV_TEMPLATES = "PROMPTPRISM_TEMPLATES"

# Operators paste overrides by hand; 16 KiB is far above any sane system
# prompt section and small enough that a runaway file is caught at load.
DEFAULT_SIZE_CAP_BYTES = 16 * 1024
TEMPLATE_SUFFIX = ".j2"

# Jinja2 drops a template's final newline by default; prompts are exact text.
ENVIRONMENT_OPTIONS: Mapping[str, Any] = {"keep_trailing_newline": True, "autoescape": False}


class TemplateError(ValueError):
    """A template problem: unknown name, an override over the cap, or a render whose exact text is unknowable.

    The last is raised by :func:`render_segmented` when code in the template or
    its filters took apart the sentinels around a value (only code that reads
    a marked value's internals can), so no split yields Jinja2's text.
    """


# Names the generated code uses for the marked-value class and for the output
# being checked; Jinja2's own names are l_*, t_* and a few fixed words.
_MARKED_CLASS_NAME = "promptprism_MarkedValue"
_OUTPUT_NAME = "promptprism_output"
_FINALIZE_SOURCE = "environment.finalize("


class MarkingCodeGenerator(CodeGenerator):
    """Jinja2 code generator that inlines :func:`segments.finalize` into each output.

    ``{{ expression }}`` compiles to ``(output.wrapped if (output := expression).__class__
    is MarkedValue else output if output.__class__ is str else str(output))``
    instead of ``str(environment.finalize(expression))``: the same result (the
    hook is exactly this check, and ``str()`` of a ``str`` is itself) without
    a Python call per output, nor a ``str()`` call for the strings most
    outputs are. Outputs that Jinja2 folds at compile time still go through
    the hook itself.
    """

    def visit_Template(self, node: Any, frame: Any = None) -> None:
        self.writeline(f"from {MarkedValue.__module__} import {MarkedValue.__name__} as {_MARKED_CLASS_NAME}")
        super().visit_Template(node, frame)

    def _inlines(self, frame: Any, finalize_info: Any) -> bool:
        # Escaping environments and environments with another hook keep Jinja2's code.
        return (finalize_info.src == _FINALIZE_SOURCE and self.environment.finalize is finalize
                and not frame.eval_ctx.volatile and not frame.eval_ctx.autoescape)

    def visit_Call(self, node: Any, frame: Any, forward_caller: bool = False) -> None:
        # {% call macro() %}…{% endcall %} outputs the macro's result without
        # finalize; that result is a capture (segments.join_captured) whose
        # blocks are kept only if it is output in its marked form.
        marks = forward_caller and self._inlines(frame, self._make_finalize())
        if marks:
            self.write(f"({_OUTPUT_NAME}.wrapped if ({_OUTPUT_NAME} := ")
        super().visit_Call(node, frame, forward_caller=forward_caller)
        if marks:
            self.write(f").__class__ is {_MARKED_CLASS_NAME} else {_OUTPUT_NAME})")

    def _output_child_pre(self, node: Any, frame: Any, finalize_info: Any) -> None:
        if self._inlines(frame, finalize_info):
            self.write(f"({_OUTPUT_NAME}.wrapped if ({_OUTPUT_NAME} := ")
        else:
            super()._output_child_pre(node, frame, finalize_info)

    def _output_child_post(self, node: Any, frame: Any, finalize_info: Any) -> None:
        if self._inlines(frame, finalize_info):
            self.write(f").__class__ is {_MARKED_CLASS_NAME} else {_OUTPUT_NAME} "
                       f"if {_OUTPUT_NAME}.__class__ is str else str({_OUTPUT_NAME}))")
        else:
            super()._output_child_post(node, frame, finalize_info)


def prompt_environment(**options: Any) -> jinja2.Environment:
    """A Jinja2 environment for promptprism templates; add filters/globals to it freely."""
    if "finalize" in options:
        raise TemplateError("promptprism owns the environment's finalize hook (it marks values)")
    environment = jinja2.Environment(**{**ENVIRONMENT_OPTIONS, **options}, finalize=finalize)
    environment.code_generator_class = MarkingCodeGenerator
    environment.concat = join_captured  # type: ignore[assignment]
    return environment


def replace_tokens(text: str, tokens: Mapping[str, str]) -> str:
    """Replace every ``<TOKEN>`` whose name is in ``tokens``; unknown placeholders stay literal.

    One pass over ``text``: a replacement is never scanned again, so a value
    that spells another ``<TOKEN>`` stays as written, whatever the tokens' order.
    """
    if not tokens:
        return text
    # Longest names first, so a name that another one starts with cannot win.
    pattern = re.compile("|".join(re.escape(f"<{token}>") for token in sorted(tokens, key=len, reverse=True)))
    return pattern.sub(lambda match: tokens[match.group()[1:-1]], text)


def render_segmented(compiled: jinja2.Template, values: Iterable[Value] | Mapping[str, Value] = (), *,
                     context: Mapping[str, Any] | None = None, template: Template | None = None,
                     stability: str = names.STABILITY_STATIC) -> SegmentedPrompt:
    """Render ``compiled`` (from :func:`prompt_environment`) with ``values`` marked, and split it.

    ``values`` are :class:`Value` objects (or a mapping whose values they are);
    a later value of the same name wins, as in Jinja2. ``context`` holds
    undeclared variables (lists to loop over, flags): their output is prose.
    ``stability`` is the template text's own stability. A value holding the
    sentinel, or a render the split refuses, is rendered again on a one-off
    sentinel and recorded unmapped (:func:`_render_unmapped`, which raises
    :class:`TemplateError` in the one case where the exact text is unknowable).
    """
    if not isinstance(values, (list, tuple)):
        values = values.values() if isinstance(values, Mapping) else values
    values = tuple(values)
    variables = _globals_of(compiled)
    if context:
        variables.update(context)
    collides = False
    for value in values:
        variables[value.name] = value.marked
        collides = collides or value.collides
    if collides:
        # The value's own text would be cut as if it were ours.
        return _render_unmapped(compiled, variables, values, names.UNMAPPED_SENTINEL_COLLISION,
                                template=template, context=context)
    prompt = split_rendered(_render(compiled, variables), variables, values, template=template,
                            template_stability=stability, context=context)
    if prompt is not None:
        return prompt
    # Sentinels reached the output in a shape the split refuses: an escaping
    # output changed a value's text inside them, or a sentinel passed in
    # undeclared context was cut. Stripping them would not give Jinja2's text.
    return _render_unmapped(compiled, variables, values, names.UNMAPPED_RENDER_ERROR,
                            template=template, context=context)


def _render_unmapped(compiled: jinja2.Template, variables: dict[str, Any], values: tuple[Value, ...], reason: str,
                     *, template: Template | None, context: Mapping[str, Any] | None) -> SegmentedPrompt:
    """Render ``compiled`` again on a one-off sentinel and record its exact text unmapped, for ``reason``.

    SENTINEL cannot be trusted for this render, but the text must still come
    from a split (README "Instrumenting an application": there is no unmarked render), so the same
    marking render runs with a sentinel that none of the variables' strings
    hold. Its split checks the sentinels as the first one does, and also
    accepts a value's text HTML-escaped: an escaping output (``{% autoescape
    %}``, or an environment made with ``autoescape=True``) escapes the whole
    marked form, which leaves sentinels and keys alone, so stripping them
    gives exactly Jinja2's escaped text. The map is withheld all the same.

    Raises :class:`TemplateError` when even that split fails: the sentinels
    were taken apart by code that read a marked value's internals, so what
    Jinja2 alone would render is unknown. Returning a guess would silently give
    the application a prompt nobody wrote, and only the template's own code
    (its filters and globals) can cause this, so it is the developer's error to
    see, like a Jinja2 syntax error, not a runtime condition to degrade around.
    """
    sentinel = one_off_sentinel(variables)
    for value in values:
        variables[value.name] = value.marked_with(sentinel)
    token = render_sentinel.set(sentinel)
    try:
        rendered = _render(compiled, variables)
    finally:
        render_sentinel.reset(token)
    text = strip_sentinels(rendered, variables, sentinel, _escaped)
    if text is None:
        name = template.name if template is not None else compiled.name
        raise TemplateError(
            f"{f'template {name!r}' if name else 'a template from a string'} took apart the sentinels promptprism "
            "wraps around declared values (a filter or global reading a marked value's internals?), so its exact "
            "text cannot be known; it is not rendered rather than rendered wrong")
    return unmapped(text, reason, template=template, context=context, values=values)


def _escaped(value: Any) -> str:
    """What an escaping output makes of ``value``'s text inside its marked form."""
    return str(escape(value))


def _globals_of(compiled: jinja2.Template) -> dict[str, Any]:
    """A new dict of the template's globals, to be filled with its variables.

    Template.render copies the variables into a new dict with the globals
    anyway; building that dict here once lets the context share it. The
    globals are a ChainMap (template's over the environment's), which
    ``dict()`` copies key by key in Python (~3.5 µs, a third of a plain
    render); merging its maps is two C-level updates.
    """
    found = compiled.globals
    if not isinstance(found, ChainMap):
        return dict(found)
    variables: dict[str, Any] = {}
    for layer in reversed(found.maps):
        variables.update(layer)
    return variables


def _render(compiled: jinja2.Template, variables: dict[str, Any]) -> str:
    """``compiled.render(variables)`` for ``variables`` that already hold the template's globals."""
    if compiled.environment.is_async:
        # Not render(): it joins with the environment's concat, which strips sentinels.
        return "".join(compiled.generate(variables))
    try:
        return "".join(compiled.root_render_func(compiled.new_context(variables, shared=True)))
    except Exception:
        # What Template.render does: rewrite the traceback to point into the template.
        return compiled.environment.handle_exception()


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

    @cached_property
    def template(self) -> Template:
        # Cached: every render of this template records it (cached_property
        # writes the instance __dict__ directly, which a frozen dataclass allows).
        return Template(self.name, self.origin, self.scope)


class TemplateCatalog:
    """Named prompt templates: built-ins plus global and per-scope overrides."""

    def __init__(self, builtins: Mapping[str, str] | None = None, *,
                 overrides_directory: str | os.PathLike[str] | None = None,
                 tokens: Mapping[str, str] | None = None, size_cap: int = DEFAULT_SIZE_CAP_BYTES,
                 environment: jinja2.Environment | None = None):
        if environment is not None and (environment.finalize is not finalize
                                        or environment.concat is not join_captured):
            raise TemplateError("the environment must come from prompt_environment() so values are marked")
        self.environment = environment or prompt_environment()
        self.size_cap = size_cap
        self.tokens: dict[str, str] = dict(tokens or {})
        self._builtins: dict[str, str] = dict(builtins or {})
        self._global: dict[str, str] = {}
        self._scoped: dict[str, dict[str, str]] = {}
        self._compiled: dict[tuple[str, str | None], tuple[ResolvedTemplate, jinja2.Template]] = {}
        # Bumped by every change: a compilation that started before a change is not cached after it.
        self._generation = 0
        self._lock = threading.Lock()
        directory = overrides_directory or os.environ.get(ENV_TEMPLATE_OVERRIDES)
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
            self._generation += 1
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
            self._generation += 1
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
            generation = self._generation
            resolved = self.resolve(name, scope=scope)
            found = (resolved, self.environment.from_string(resolved.text))
            with self._lock:
                if generation == self._generation:
                    self._compiled[key] = found
        return found

    def render(self, name: str, values: Iterable[Value] | Mapping[str, Value] = (), *,
               scope: str | None = None, context: Mapping[str, Any] | None = None,
               stability: str = names.STABILITY_STATIC) -> SegmentedPrompt:
        """Render template ``name`` for ``scope`` with declared ``values`` and plain ``context``."""
        resolved, compiled = self.compiled(name, scope=scope)
        return render_segmented(compiled, values, context=context, template=resolved.template, stability=stability)

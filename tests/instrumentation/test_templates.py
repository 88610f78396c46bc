"""Layered template overrides: scope → global → built-in (README "Instrumenting an application")."""

from __future__ import annotations

import pytest

from promptprism.instrumentation import block
from promptprism.instrumentation._templates import (
    DEFAULT_SIZE_CAP_BYTES,
    ENV_TEMPLATE_OVERRIDES,
    TemplateCatalog,
    TemplateError,
    prompt_environment,
    replace_tokens,
)
from promptprism.wire import names

BUILTIN = "Built-in for <PRODUCT>. {{ memory }}"


@pytest.fixture
def catalog(monkeypatch):
    monkeypatch.delenv(ENV_TEMPLATE_OVERRIDES, raising=False)
    return TemplateCatalog({"system": BUILTIN}, tokens={"PRODUCT": "Acme"})


def test_builtin_when_nothing_overrides(catalog):
    resolved = catalog.resolve("system")
    assert (resolved.origin, resolved.text) == (names.ORIGIN_BUILTIN, "Built-in for Acme. {{ memory }}")
    assert resolved.builtin_text == resolved.text


def test_scope_beats_global_beats_builtin(catalog):
    catalog.set_override("system", "Global <PRODUCT>")
    catalog.set_override("system", "Support scope", scope="support")
    assert catalog.resolve("system", scope="support").origin == names.ORIGIN_SCOPE
    assert catalog.resolve("system", scope="support").text == "Support scope"
    assert catalog.resolve("system", scope="sales").origin == names.ORIGIN_GLOBAL
    assert catalog.resolve("system", scope="sales").text == "Global Acme"
    assert catalog.resolve("system").origin == names.ORIGIN_GLOBAL
    catalog.set_override("system", None)
    assert catalog.resolve("system", scope="sales").origin == names.ORIGIN_BUILTIN


@pytest.mark.parametrize("blank", ["", "   ", "\n\t \n"])
def test_empty_or_whitespace_override_inherits_the_next_layer(catalog, blank):
    catalog.set_override("system", "Global")
    catalog.set_override("system", blank, scope="support")
    assert catalog.resolve("system", scope="support").origin == names.ORIGIN_GLOBAL
    catalog.set_override("system", blank)
    assert catalog.resolve("system", scope="support").origin == names.ORIGIN_BUILTIN


def test_override_replaces_the_whole_text(catalog):
    catalog.set_override("system", "Only this.")
    prompt = catalog.render("system", [block("memory", "tea", layer="memory")])
    assert prompt.text == "Only this."
    assert "Built-in" not in prompt.text


def test_tokens_replaced_everywhere_unknown_ones_stay_literal():
    assert replace_tokens("<A> and <A> but <B> and <a>", {"A": "x"}) == "x and x but <B> and <a>"
    catalog = TemplateCatalog({"t": "<NAME>/<NAME>/<UNKNOWN>"}, tokens={"NAME": "Prism"})
    assert catalog.render("t").text == "Prism/Prism/<UNKNOWN>"


def test_token_values_are_not_themselves_scanned_for_tokens():
    # One pass over the template text: a value that happens to spell another
    # token stays as written, whatever order the tokens were given in.
    for tokens in ({"A": "<B>", "B": "x"}, {"B": "x", "A": "<B>"}):
        assert replace_tokens("<A> and <B>", tokens) == "<B> and x"
    assert replace_tokens("<A>", {"A": "<A>"}) == "<A>"


def test_an_override_set_while_a_template_compiles_is_not_hidden_by_a_stale_cache_entry(catalog):
    # Another thread sets an override between the resolution of the old text
    # and its entry in the compiled cache: the next render must use the override.
    compile_text = catalog.environment.from_string

    def compile_while_the_override_changes(text):
        compiled = compile_text(text)
        if "Late override" not in text:
            catalog.set_override("system", "Late override.")
        return compiled

    catalog.environment.from_string = compile_while_the_override_changes
    catalog.render("system", [block("memory", "tea", layer="memory")])
    assert catalog.render("system", [block("memory", "tea", layer="memory")]).text == "Late override."


def test_override_over_the_cap_is_rejected_naming_the_layer(catalog):
    with pytest.raises(TemplateError, match=r"global override of template 'system'.*over the 16384-byte cap"):
        catalog.set_override("system", "x" * (DEFAULT_SIZE_CAP_BYTES + 1))
    with pytest.raises(TemplateError, match=r"scope override of template 'system' for scope 'support'"):
        catalog.set_override("system", "é" * (DEFAULT_SIZE_CAP_BYTES // 2 + 1), scope="support")
    catalog.set_override("system", "x" * DEFAULT_SIZE_CAP_BYTES)  # exactly the cap is fine
    small = TemplateCatalog({"system": BUILTIN}, size_cap=10)
    with pytest.raises(TemplateError, match="10-byte cap"):
        small.set_override("system", "eleven byte")


def test_overrides_directory_layout(tmp_path, monkeypatch):
    (tmp_path / "global").mkdir()
    (tmp_path / "scopes" / "support").mkdir(parents=True)
    (tmp_path / "global" / "system.j2").write_text("Global file {{ memory }}", encoding="utf-8")
    (tmp_path / "scopes" / "support" / "system.j2").write_text("Support file", encoding="utf-8")
    (tmp_path / "scopes" / "empty").mkdir()
    (tmp_path / "scopes" / "empty" / "system.j2").write_text("  \n", encoding="utf-8")
    catalog = TemplateCatalog({"system": BUILTIN}, overrides_directory=tmp_path)
    assert catalog.resolve("system", scope="support").text == "Support file"
    assert catalog.resolve("system", scope="empty").origin == names.ORIGIN_GLOBAL
    # The environment variable names the same layout when no directory is given.
    monkeypatch.setenv(ENV_TEMPLATE_OVERRIDES, str(tmp_path))
    assert TemplateCatalog({"system": BUILTIN}).resolve("system").origin == names.ORIGIN_GLOBAL


def test_oversized_override_file_error_names_the_file(tmp_path):
    (tmp_path / "global").mkdir()
    big = tmp_path / "global" / "system.j2"
    big.write_text("x" * 20, encoding="utf-8")
    with pytest.raises(TemplateError, match=r"global override of template 'system' \(.*system\.j2\) is 20 bytes"):
        TemplateCatalog({"system": BUILTIN}, overrides_directory=tmp_path, size_cap=10)


def test_builtins_from_a_directory(tmp_path):
    (tmp_path / "system.j2").write_text("Hi {{ who }}\n", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("ignored", encoding="utf-8")
    catalog = TemplateCatalog.from_directory(tmp_path)
    assert catalog.template_names() == ["system"]
    assert catalog.render("system", [block("who", "you", layer="x")]).text == "Hi you\n"


def test_render_records_the_origin_and_scope(catalog):
    catalog.set_override("system", "Scoped {{ memory }}", scope="support")
    prompt = catalog.render("system", [block("memory", "tea", layer="memory")], scope="support")
    assert (prompt.template.name, prompt.template.origin, prompt.template.scope) == ("system", "scope", "support")
    assert prompt.blocks[0].source == "template:system:scope"
    # A later override takes effect: compiled templates are not served stale.
    catalog.set_override("system", "Changed {{ memory }}", scope="support")
    assert catalog.render("system", [block("memory", "tea", layer="memory")], scope="support").text == "Changed tea"


def test_unknown_template_and_foreign_environment_are_errors(catalog):
    import jinja2

    with pytest.raises(TemplateError, match="unknown template 'missing'"):
        catalog.resolve("missing")
    with pytest.raises(TemplateError, match="prompt_environment"):
        TemplateCatalog({}, environment=jinja2.Environment())
    environment = prompt_environment()
    environment.filters["shout"] = lambda text: text.upper() + "!"
    custom = TemplateCatalog({"t": "{{ a|shout }} {{ a }}"}, environment=environment)
    prompt = custom.render("t", [block("a", "hi", layer="x")])
    assert prompt.text == "HI! hi" and [b.content for b in prompt.blocks] == ["HI! ", "hi"]

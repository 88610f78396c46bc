"""``promptprism template show``: effective text, origin and built-in default."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from promptprism.collector.cli import main
from promptprism.instrumentation import ENV_TEMPLATE_OVERRIDES, ENV_TEMPLATES


@pytest.fixture
def template_tree(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_TEMPLATES, raising=False)
    monkeypatch.delenv(ENV_TEMPLATE_OVERRIDES, raising=False)
    builtins = tmp_path / "builtins"
    builtins.mkdir()
    (builtins / "system.j2").write_text("Built-in {{ memory }}\n", encoding="utf-8")
    overrides = tmp_path / "overrides"
    (overrides / "global").mkdir(parents=True)
    (overrides / "scopes" / "support").mkdir(parents=True)
    (overrides / "global" / "system.j2").write_text("Global {{ memory }}\n", encoding="utf-8")
    (overrides / "scopes" / "support" / "system.j2").write_text("Support {{ memory }}\n", encoding="utf-8")
    return builtins, overrides


def test_show_json_per_scope(template_tree, capsys):
    builtins, overrides = template_tree
    assert main(["template", "show", "system", "--templates", str(builtins), "--overrides", str(overrides),
                 "--scope", "support", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown == {"name": "system", "scope": "support", "origin": "scope", "text": "Support {{ memory }}\n",
                     "builtin_text": "Built-in {{ memory }}\n"}
    assert main(["template", "show", "system", "--templates", str(builtins), "--overrides", str(overrides),
                 "--scope", "sales", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["origin"] == "global"


def test_show_text_from_environment_variables(template_tree, capsys, monkeypatch):
    builtins, overrides = template_tree
    monkeypatch.setenv(ENV_TEMPLATES, str(builtins))
    assert main(["template", "show", "system"]) == 0
    out = capsys.readouterr().out
    assert "origin builtin" in out and "Built-in {{ memory }}" in out
    monkeypatch.setenv(ENV_TEMPLATE_OVERRIDES, str(overrides))
    assert main(["template", "show", "system"]) == 0
    out = capsys.readouterr().out
    effective, default = out.split("--- built-in default")
    assert "origin global" in effective and "Global {{ memory }}" in effective
    assert "Built-in {{ memory }}" in default


def test_show_from_an_application_module(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(ENV_TEMPLATE_OVERRIDES, raising=False)
    (tmp_path / "my_app_prompts.py").write_text(
        "from promptprism.instrumentation import TemplateCatalog\n"
        "catalog = TemplateCatalog({'system': 'Hello <PRODUCT>'}, tokens={'PRODUCT': 'Acme'})\n"
        "catalog.set_override('system', 'Scoped <PRODUCT>', scope='vip')\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["template", "show", "system", "--templates", "my_app_prompts:catalog", "--scope", "vip",
                 "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["origin"], shown["text"], shown["builtin_text"]) == ("scope", "Scoped Acme", "Hello Acme")


def test_errors_are_one_line(template_tree, capsys):
    builtins, _ = template_tree
    assert main(["template", "show", "missing", "--templates", str(builtins)]) == 1
    assert "unknown template 'missing'; known templates: system" in capsys.readouterr().err
    assert main(["template", "show", "system"]) == 1
    assert "no templates given" in capsys.readouterr().err
    assert main(["template", "show", "system", "--templates", "no_such_module_xyz:catalog"]) == 1
    assert "cannot import 'no_such_module_xyz'" in capsys.readouterr().err


def test_console_entry_point_runs(template_tree):
    builtins, _ = template_tree
    command = Path(sys.executable).parent / "promptprism"  # the console script pyproject installs
    result = subprocess.run([str(command), "template", "show", "system", "--templates", str(builtins), "--json"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["origin"] == "builtin"

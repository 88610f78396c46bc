"""Imports only flow downstream: the package tree is the pipeline, and this test keeps it so.

An AST walk of wire/, instrumentation/, exporter/ and collector/ (every import
statement, including those inside functions and ``TYPE_CHECKING`` blocks)
builds the import graph; each rule below names the arrows it forbids. The
rules are checked on synthetic graphs too, so each one is known to fail.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Callable, Iterable

from support import REPOSITORY

TOP_LEVEL = ("wire", "instrumentation", "exporter", "collector")
ROOT = "promptprism"

Graph = dict[str, set[str]]

# Arrows that break a rule today, each with the reason it is still there. An
# exception that no longer occurs fails the test too: delete it with the arrow.
KNOWN_EXCEPTIONS: dict[tuple[str, str], str] = {}


# --- the walk -----------------------------------------------------------------------------


def module_name(path: Path, source_root: Path) -> tuple[str, bool]:
    """``collector/write/rows.py`` → ``promptprism.collector.write.rows``; whether it is a package."""
    parts = list(path.relative_to(source_root).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return ".".join([ROOT, *parts]), is_package


def imports_of(tree: ast.AST, name: str, is_package: bool, known_modules: set[str]) -> set[str]:
    """Absolute names of every module ``tree`` imports; ``from X import y`` counts X.y when that is a module."""
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                if node.level > 1:
                    base = base[:-(node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "__future__":
                continue
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                found.add(submodule if submodule in known_modules else target)
    return found


def import_graph(source_root: Path, top_level: Iterable[str] = TOP_LEVEL) -> Graph:
    files = {}
    for top in top_level:
        for path in sorted((source_root / top).rglob("*.py")):
            files[path] = module_name(path, source_root)
    known = {name for name, _ in files.values()}
    return {name: imports_of(ast.parse(path.read_text(encoding="utf-8"), str(path)), name, is_package, known)
            for path, (name, is_package) in files.items()}


# --- the rules ----------------------------------------------------------------------------


def within(name: str, *packages: str) -> bool:
    return any(name == package or name.startswith(package + ".") for package in packages)


def is_standard_library(name: str) -> bool:
    return name.partition(".")[0] in sys.stdlib_module_names


COLLECTOR = f"{ROOT}.collector"
WIRE = f"{ROOT}.wire"


def wire_is_standard_library_only(importer: str, imported: str) -> bool:
    """wire/ (the names both ends share) imports the standard library and nothing else, not even promptprism."""
    return within(importer, WIRE) and not is_standard_library(imported)


def wire_names_imports_nothing(importer: str, imported: str) -> bool:
    return importer == f"{WIRE}.names"


def read_side_stays_off_the_write_path(importer: str, imported: str) -> bool:
    return within(importer, f"{COLLECTOR}.read") and within(imported, f"{COLLECTOR}.write", f"{COLLECTOR}.receive")


def write_path_stays_off_the_read_side(importer: str, imported: str) -> bool:
    return within(importer, f"{COLLECTOR}.write") and within(imported, f"{COLLECTOR}.read")


def otlp_is_pure_translation(importer: str, imported: str) -> bool:
    """otlp/ imports nothing of promptprism but itself and wire/ (no write, read, store, receive, record)."""
    return (within(importer, f"{COLLECTOR}.otlp") and within(imported, ROOT)
            and not within(imported, f"{COLLECTOR}.otlp", WIRE))


def libraries_do_not_import_the_collector(importer: str, imported: str) -> bool:
    return within(importer, f"{ROOT}.instrumentation", f"{ROOT}.exporter") and within(imported, COLLECTOR)


def record_imports_only_wire(importer: str, imported: str) -> bool:
    return importer == f"{COLLECTOR}.record" and within(imported, ROOT) and not within(imported, WIRE)


def store_stays_below_the_pipeline(importer: str, imported: str) -> bool:
    upstream = ("receive", "write", "read", "app", "cli", "demo")
    return within(importer, f"{COLLECTOR}.store") and within(imported, *(f"{COLLECTOR}.{name}" for name in upstream))


def internal_modules_stay_in_their_package(importer: str, imported: str) -> bool:
    """A module with a leading underscore is imported only by the package that holds it (and its subpackages)."""
    if not within(imported, ROOT):
        return False
    parts = imported.split(".")
    for depth, part in enumerate(parts):
        if part.startswith("_") and not within(importer, ".".join(parts[:depth])):
            return True
    return False


RULES: dict[str, Callable[[str, str], bool]] = {
    "wire/ imports the standard library only": wire_is_standard_library_only,
    "wire/names.py imports nothing": wire_names_imports_nothing,
    "collector/read imports neither collector/write nor collector/receive": read_side_stays_off_the_write_path,
    "collector/write does not import collector/read": write_path_stays_off_the_read_side,
    "collector/otlp imports only itself and wire/": otlp_is_pure_translation,
    "instrumentation/ and exporter/ do not import collector/": libraries_do_not_import_the_collector,
    "collector/record.py imports nothing of promptprism but wire/": record_imports_only_wire,
    "collector/store imports nothing upstream of it": store_stays_below_the_pipeline,
    "an _internal module is imported only inside its package": internal_modules_stay_in_their_package,
}


def violations(graph: Graph, exceptions: Iterable[tuple[str, str]] = ()) -> list[tuple[str, str, str]]:
    allowed = set(exceptions)
    return sorted((rule, importer, imported)
                  for importer, imported_modules in graph.items() for imported in imported_modules
                  for rule, broken in RULES.items()
                  if broken(importer, imported) and (importer, imported) not in allowed)


# --- the repository -----------------------------------------------------------------------


def test_the_walk_sees_the_whole_tree():
    graph = import_graph(REPOSITORY)
    assert len(graph) > 80
    # Relative imports resolve to modules, and `from . import x` to the submodule x.
    assert "promptprism.collector.otlp.traces" in graph["promptprism.collector.write.convert"]
    assert "promptprism.wire.names" in graph["promptprism.collector.write.reassemble"]
    assert "promptprism.collector.read.lookups" in graph["promptprism.collector.read.api"]


def test_imports_only_flow_downstream():
    assert violations(import_graph(REPOSITORY), KNOWN_EXCEPTIONS) == []


def test_every_known_exception_still_occurs():
    graph = import_graph(REPOSITORY)
    stale = [arrow for arrow in KNOWN_EXCEPTIONS if arrow[1] not in graph.get(arrow[0], set())]
    assert stale == [], "the arrow is gone: delete its entry from KNOWN_EXCEPTIONS"


# --- the rules can fail -------------------------------------------------------------------


def test_each_rule_catches_its_arrow():
    broken = {
        "wire/ imports the standard library only": ("promptprism.wire.canonical", "jinja2"),
        "wire/names.py imports nothing": ("promptprism.wire.names", "json"),
        "collector/read imports neither collector/write nor collector/receive":
            ("promptprism.collector.read.lookups", "promptprism.collector.receive.auth"),
        "collector/write does not import collector/read":
            ("promptprism.collector.write.rows", "promptprism.collector.read.lineage"),
        "collector/otlp imports only itself and wire/":
            ("promptprism.collector.otlp.traces", "promptprism.collector.store.base"),
        "instrumentation/ and exporter/ do not import collector/":
            ("promptprism.exporter._configure", "promptprism.collector.config"),
        "collector/record.py imports nothing of promptprism but wire/":
            ("promptprism.collector.record", "promptprism.collector.otlp.model"),
        "collector/store imports nothing upstream of it":
            ("promptprism.collector.store.cluster", "promptprism.collector.write.sink"),
        "an _internal module is imported only inside its package":
            ("promptprism.collector.write.genai_events", "promptprism.collector.conventions._convention"),
    }
    assert set(broken) == set(RULES)
    for rule, (importer, imported) in broken.items():
        assert (rule, importer, imported) in violations({importer: {imported}}), rule


def test_downstream_arrows_pass():
    fine = {
        "promptprism.wire.names": set(),
        "promptprism.wire.canonical": {"hashlib", "json", "typing"},
        "promptprism.collector.read.events": {"promptprism.collector.otlp.model", "promptprism.wire.names"},
        "promptprism.collector.write.sink": {"promptprism.collector.store.base", "promptprism.collector.record"},
        "promptprism.collector.otlp.logs": {"promptprism.collector.otlp._parse", "promptprism.wire.names",
                                            "opentelemetry.proto.collector.logs.v1.logs_service_pb2"},
        "promptprism.collector.record": {"dataclasses", "promptprism.wire.names"},
        "promptprism.instrumentation._record": {"promptprism.wire.names", "opentelemetry.trace"},
        "promptprism.collector.store.cluster": {"promptprism.collector.config"},
        "promptprism.collector.write.ingest": {"promptprism.collector._logsafe"},
        "promptprism.instrumentation.providers._transport": {"promptprism.instrumentation._record"},
    }
    assert violations(fine) == []


def test_a_known_exception_allows_only_its_own_arrow():
    graph = {"promptprism.collector.read.events": {"promptprism.collector.write.reassemble",
                                                   "promptprism.collector.write.rows"}}
    exceptions = {("promptprism.collector.read.events", "promptprism.collector.write.reassemble"): "a reason"}
    assert [arrow[1:] for arrow in violations(graph, exceptions)] == [
        ("promptprism.collector.read.events", "promptprism.collector.write.rows")]


def test_the_walk_resolves_relative_imports(tmp_path):
    package = tmp_path / "collector" / "read"
    package.mkdir(parents=True)
    (tmp_path / "collector" / "__init__.py").write_text("")
    (tmp_path / "collector" / "write").mkdir()
    (tmp_path / "collector" / "write" / "__init__.py").write_text("")
    (tmp_path / "collector" / "write" / "rows.py").write_text("")
    (package / "__init__.py").write_text("from . import lookups\n")
    (package / "lookups.py").write_text(
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "from ..write import rows\n"
        "def later():\n"
        "    from ...wire.names import SCHEMA_VERSION\n")
    graph = import_graph(tmp_path, top_level=("collector",))
    assert graph["promptprism.collector.read"] == {"promptprism.collector.read.lookups"}
    assert graph["promptprism.collector.read.lookups"] == {
        "typing", "promptprism.collector.write.rows", "promptprism.wire.names"}
    assert violations(graph) == [("collector/read imports neither collector/write nor collector/receive",
                                  "promptprism.collector.read.lookups", "promptprism.collector.write.rows")]


# --- public surfaces ----------------------------------------------------------------------


def test_every_package_lists_its_public_surface_and_each_name_exists():
    import importlib
    import importlib.util

    for top in TOP_LEVEL:
        for init in sorted((REPOSITORY / top).rglob("__init__.py")):
            package, _ = module_name(init, REPOSITORY)
            if ".store.schema" in package:  # migration files, loaded by path
                continue
            module = importlib.import_module(package)
            assert isinstance(getattr(module, "__all__", None), (list, tuple)), f"{package} has no __all__"
            for name in module.__all__:
                assert not name.startswith("_"), f"{package}.__all__ lists the internal {name}"
                assert hasattr(module, name) or importlib.util.find_spec(f"{package}.{name}") is not None, (
                    f"{package}.__all__ lists {name}, which is neither defined there nor a submodule")

"""Every data file the packages read at run time is in pyproject's package-data.

The editable install the tests run on reads files straight from the checkout;
a wheel (the Docker image's `pip install .`) holds only what package-data
names, and its patterns do not descend into subfolders. A migration, template
or stylesheet that no pattern names works here and is missing there.
"""

from __future__ import annotations

import fnmatch
import subprocess
import tomllib

from support import REPOSITORY

PACKAGE_FOLDERS = ("wire", "instrumentation", "exporter", "collector")


def package_data_patterns() -> list[str]:
    config = tomllib.loads((REPOSITORY / "pyproject.toml").read_text(encoding="utf-8"))
    return config["tool"]["setuptools"]["package-data"]["*"]


def matches(relative: str, pattern: str) -> bool:
    """setuptools' glob: `*` stays within one path segment."""
    parts, pattern_parts = relative.split("/"), pattern.split("/")
    return len(parts) == len(pattern_parts) and all(map(fnmatch.fnmatchcase, parts, pattern_parts))


def data_files() -> list[tuple[str, str]]:
    """(path in the repository, path relative to the package folder that holds it) of each non-Python file."""
    tracked = subprocess.run(["git", "ls-files", *PACKAGE_FOLDERS], cwd=REPOSITORY, capture_output=True,
                             text=True, check=True).stdout.split()
    found = []
    for path in tracked:
        if path.endswith(".py"):
            continue
        folder = (REPOSITORY / path).parent
        while not (folder / "__init__.py").exists():
            folder = folder.parent
        found.append((path, (REPOSITORY / path).relative_to(folder).as_posix()))
    return found


def test_every_data_file_is_packaged():
    files = data_files()
    assert any(path.endswith(".sql") for path, _ in files)  # the walk found the migrations
    missing = [path for path, relative in files
               if not any(matches(relative, pattern) for pattern in package_data_patterns())]
    assert missing == []


def test_patterns_do_not_descend_into_subfolders():
    assert matches("001_initial.sql", "*.sql")
    assert not matches("schema/001_initial.sql", "*.sql")
    assert matches("schema/001_initial.sql", "schema/*.sql")

"""Helpers shared by test modules (importable as ``support``: pytest puts
``tests/`` on sys.path for the rootdir conftest). Fixtures stay in conftest.py;
plain functions and constants live here, because several directories have a
conftest.py of their own and ``from conftest import …`` would pick whichever
was imported first."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

# The repository root, wherever a test module sits below tests/.
REPOSITORY = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def metric_value(exposition: str, name: str, **labels: str) -> float | None:
    """The value of the sample ``name{labels}`` (exactly these labels) in a /metrics answer; None when absent."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# Runs ``code`` in a fresh interpreter where the named modules (and their
# submodules) cannot be imported, as on an install without them.
_WITHOUT_PROBE = """
import sys
from importlib.abc import MetaPathFinder

BLOCKED = {blocked!r}


class Uninstalled(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == blocked or name.startswith(blocked + ".") for blocked in BLOCKED):
            raise ImportError(f"{{name}} is not installed here")
        return None


sys.meta_path.insert(0, Uninstalled())
"""


def python_without(blocked: tuple[str, ...], code: str, *arguments: str, stdin: str = "",
                   timeout: float = 60) -> subprocess.CompletedProcess:
    """``python -c code arguments…`` with ``blocked`` unimportable; output captured as text."""
    return subprocess.run([sys.executable, "-c", _WITHOUT_PROBE.format(blocked=tuple(blocked)) + code, *arguments],
                          input=stdin, capture_output=True, text=True, timeout=timeout)

"""Helpers shared by test modules (importable as ``support``: pytest puts
``tests/`` on sys.path for the rootdir conftest). Fixtures stay in conftest.py;
plain functions and constants live here, because several directories have a
conftest.py of their own and ``from conftest import …`` would pick whichever
was imported first."""

from __future__ import annotations

import os
import socket
from pathlib import Path

# The repository root, wherever a test module sits below tests/.
REPOSITORY = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]

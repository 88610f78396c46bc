"""The run's own check (conftest.pytest_sessionfinish) fails a run that leaves a process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from support import HAS_PROC, REPOSITORY

pytestmark = pytest.mark.skipif(not HAS_PROC, reason="reads the process table from /proc")

LEAKING_TEST = """
import subprocess, sys


def test_leaves_a_process_behind():
    leaked = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    with open({pid_file!r}, "w") as handle:
        handle.write(str(leaked.pid))
"""


def run_pytest_with_our_conftest(tmp_path, test_source: str) -> tuple[subprocess.CompletedProcess, int | None]:
    pid_file = tmp_path / "leaked.pid"
    (tmp_path / "test_inner.py").write_text(test_source.format(pid_file=str(pid_file)), encoding="utf-8")
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY / "tests"), "PYTEST_LEFTOVER_GRACE_SECONDS": "1"}
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-q", "--rootdir",
         str(tmp_path), str(tmp_path / "test_inner.py")],
        cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=120)
    return completed, int(pid_file.read_text()) if pid_file.exists() else None


def test_a_run_that_leaves_a_process_fails_and_names_it(tmp_path):
    completed, leaked = run_pytest_with_our_conftest(tmp_path, LEAKING_TEST)
    try:
        assert leaked is not None, completed.stdout + completed.stderr
        assert completed.returncode == pytest.ExitCode.TESTS_FAILED, completed.stdout
        assert "1 passed" in completed.stdout
        assert f"pid {leaked} " in completed.stdout and "time.sleep(120)" in completed.stdout
    finally:
        if leaked is not None:
            os.kill(leaked, signal.SIGKILL)


def test_a_run_that_cleans_up_passes(tmp_path):
    completed, _ = run_pytest_with_our_conftest(tmp_path, LEAKING_TEST.replace(
        "    with open", "    leaked.kill(); leaked.wait()\n    with open"))
    assert completed.returncode == 0, completed.stdout + completed.stderr

"""The README's instrumentation example runs as written and prints what the README says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
MARKER = "<!-- instrumentation -->"


def fenced_blocks(section: str, language: str) -> list[str]:
    blocks = []
    for chunk in section.split(f"```{language}\n")[1:]:
        blocks.append(chunk.split("```", 1)[0])
    return blocks


def instrumentation_section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(MARKER)
    return text[start:text.index("\n## ", start)]


def test_readme_example_runs_and_prints_the_documented_output(tmp_path):
    section = instrumentation_section()
    code = fenced_blocks(section, "python")[0]
    documented_output = fenced_blocks(section, "text")[0]
    script = tmp_path / "readme_example.py"
    script.write_text(code, encoding="utf-8")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == documented_output

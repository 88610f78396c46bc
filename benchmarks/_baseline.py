"""``--baseline PATH``: run a benchmark in this tree and in another checkout, in alternation.

The other checkout (an older commit, e.g. ``git worktree add /tmp/pre 362fc65``
and ``make .venv/.installed`` there) runs its own copy of the script with its
own ``.venv``, so each side measures its own code even where modules moved.
Rounds alternate new, old, new, old … so both sides see about the same load
on a shared machine; each figure is read from the script's printed output and
the ratio new/old is the median of the per-round ratios.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
from dataclasses import dataclass

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class Figure:
    name: str
    pattern: str  # a regex whose first group is the number, on the script's output
    unit: str
    lower_is_better: bool


def _run(tree: str, script: str, arguments: list[str]) -> str:
    python = os.path.join(tree, ".venv", "bin", "python")
    if not os.path.exists(python):
        raise SystemExit(f"{python} not found: run `make .venv/.installed` in {tree} first")
    completed = subprocess.run([python, os.path.join(tree, "benchmarks", script), *arguments], cwd=tree,
                               capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise SystemExit(f"{script} failed in {tree}:\n{completed.stdout}\n{completed.stderr}")
    return completed.stdout


def _read(output: str, figure: Figure) -> float:
    match = re.search(figure.pattern, output)
    if match is None:
        raise SystemExit(f"no {figure.name!r} in the output:\n{output}")
    return float(match.group(1).replace(",", ""))


def _shown(value: float) -> str:
    # a ratio such as collector / noop (0.37) needs its second decimal; spans/s do not
    return f"{value:>10,.2f}" if abs(value) < 10 else f"{value:>10,.1f}"


def compare(script: str, baseline: str, figures: list[Figure], *, rounds: int, arguments: list[str]) -> int:
    """Alternate ``rounds`` runs of ``script`` here and in ``baseline``; print each figure's new/old ratio."""
    baseline = os.path.abspath(baseline)
    print(f"{script}: this tree {HERE} against {baseline}, {rounds} alternating rounds", flush=True)
    values: dict[str, list[tuple[float, float]]] = {figure.name: [] for figure in figures}
    for number in range(rounds):
        new = _run(HERE, script, arguments)
        old = _run(baseline, script, arguments)
        line = []
        for figure in figures:
            pair = _read(new, figure), _read(old, figure)
            values[figure.name].append(pair)
            line.append(f"{figure.name} {pair[0]:g}/{pair[1]:g}")
        print(f"  round {number + 1}: " + "; ".join(line), flush=True)
    print("medians (new / old; the ratio is the median of per-round ratios):")
    for figure in figures:
        pairs = values[figure.name]
        ratio = statistics.median(new / old for new, old in pairs)
        better = "lower" if figure.lower_is_better else "higher"
        print(f"  {figure.name:<22} new {_shown(statistics.median(p[0] for p in pairs))} {figure.unit:<8} "
              f"old {_shown(statistics.median(p[1] for p in pairs))} {figure.unit:<8} "
              f"ratio {ratio:.3f}  ({better} is better)")
    return 0

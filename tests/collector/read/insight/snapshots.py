"""One ``report.Snapshot`` for every panel query over a window, as the overview page reads it."""

from __future__ import annotations

from promptprism.collector.read.insight import report


def window_snapshot(store, since: int, until: int) -> report.Snapshot:
    """What the read side knows of the store (rolled-up hours, log events with prompts) for every
    query over since–until, the growth queries' previous period included: read once, as the
    overview page reads it for its panels, where ``report.run`` alone reads it again for each query
    (two statements, ~0.3 s of CPU on ClickHouse 24.8). Read it anew whenever the store may have
    changed (the rollup job ran, rows arrived): a snapshot is of one moment."""
    return report.snapshot(store, max(0, since - (until - since)), until)

"""What ``ingest.py`` would measure if a worker's traces conversion cost a given fraction of today's.

Run: ``nice python benchmarks/ingest_what_if.py --conversion-cost F [ingest.py options]``,
e.g. ``--conversion-cost 0.5 --rounds 6``. Everything is the real collector (gRPC
receive, shared-memory slots, spool, group inserts, the store) except the
conversion in its ingest workers: each worker converts its first three traces
exports for real and keeps the CPU time of the cheaper warm one (the first
pays the imports); every later export gets that conversion's tables again
after the worker has spun ``F`` × that CPU time. Its request ids are suffixed
with the export's own token, so each export stores requests of its own and
``ingest.py``'s stored-count check still holds; its call identities are left
out, so the collector does not take it for a second span of a stored call.

It measures how much cheaper the conversion has to get for a ratio (README,
"Ingest throughput"): ``F`` = 1 reproduces ``ingest.py``, ``F`` = 0 is the
ceiling of the rest of the path. Not a product path; the rows it stores
repeat one export's content.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time

import pyarrow as pa
import pyarrow.compute as compute

from promptprism.collector.write import convert as _convert
from promptprism.collector.write import workers as _workers
from promptprism.collector.write.rows import TableSet

# How the factor reaches the workers: they are spawned, and import this script again as __mp_main__.
COST_VARIABLE = "PROMPTPRISM_WHAT_IF_CONVERSION_COST"
REAL_CONVERSIONS = 3  # per worker: the first pays the imports, the warm ones set the cost
_REQUEST_TABLES = ("requests", "request_docs")

_real_convert = _workers.convert
_kept: dict[str, object] = {}


def _spin(seconds: float) -> None:
    """Busy for ``seconds`` of this process's CPU time, as a conversion would be."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def _with_own_requests(tables: TableSet, token: str) -> TableSet:
    """``tables`` with each request id suffixed by the export's token: rows of their own."""
    renamed = dict(tables.tables)
    for name in _REQUEST_TABLES:
        table = renamed[name]
        ids = compute.binary_join_element_wise(table.column("request_id"), pa.scalar(token[:16]), "-")
        renamed[name] = table.set_column(table.column_names.index("request_id"), "request_id", ids)
    return TableSet(renamed, tables.content_keys, tables.spans, tables.requests)


def convert_at_cost(kind: str, payload, encoding: str) -> _convert.ConvertedExport:
    """``convert.convert`` in a worker, the traces conversion at ``F`` × its measured CPU time."""
    if kind != _convert.KIND_TRACES:
        return _real_convert(kind, payload, encoding)
    real = _kept.setdefault("real", 0)
    if real < REAL_CONVERSIONS:
        started = time.process_time()
        converted = _real_convert(kind, payload, encoding)
        seconds = time.process_time() - started
        _kept["real"] = real + 1
        if real >= 1 and ("seconds" not in _kept or seconds < _kept["seconds"]):
            _kept["converted"], _kept["seconds"] = converted, seconds
        return converted
    _spin(float(os.environ[COST_VARIABLE]) * _kept["seconds"])
    kept = _kept["converted"]
    # A token of the export's own bytes (its spans' ids come first), not of the whole payload: cheap.
    token = hashlib.sha256(bytes(payload[:65536]) + len(payload).to_bytes(8, "little")).hexdigest()
    return _convert.ConvertedExport(_with_own_requests(kept.tables, token), token, kept.received, kept.rejected,
                                    kept.error_message, kept.requests, kept.mapped_blocks,
                                    dict(kept.unmapped_reasons))


if os.environ.get(COST_VARIABLE):
    _workers.convert = convert_at_cost


def main() -> int:
    arguments = sys.argv[1:]
    if "--conversion-cost" not in arguments[:-1]:
        print("usage: ingest_what_if.py --conversion-cost F [ingest.py options]", file=sys.stderr)
        return 2
    at = arguments.index("--conversion-cost")
    try:
        factor = float(arguments[at + 1])
    except ValueError:
        factor = -1.0
    if not factor >= 0:
        print(f"--conversion-cost: a factor ≥ 0, not {arguments[at + 1]!r}", file=sys.stderr)
        return 2
    if any(argument.startswith("--baseline") or argument == "--stages" for argument in arguments):
        print("--baseline and --stages measure real conversions: run ingest.py for them", file=sys.stderr)
        return 2
    if any(argument in ("--ingest-workers=0", "--ingest-workers 0") for argument in
           [*arguments, *(" ".join(pair) for pair in zip(arguments, arguments[1:]))]):
        print("--ingest-workers 0 converts in the collector's process: this changes the workers' conversion only",
              file=sys.stderr)
        return 2
    os.environ[COST_VARIABLE] = repr(factor)
    _workers.convert = convert_at_cost
    print(f"what if: a worker's traces conversion costs {factor:g} × its measured CPU time", flush=True)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import ingest

    sys.argv = [sys.argv[0], *arguments[:at], *arguments[at + 2:]]
    return ingest.main()


if __name__ == "__main__":
    sys.exit(main())

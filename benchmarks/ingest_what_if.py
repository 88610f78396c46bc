"""What ``ingest.py`` would measure with a cheaper conversion.

Run: ``nice python benchmarks/ingest_what_if.py --conversion-cost F [ingest.py options]``,
e.g. ``--conversion-cost 0.5 --rounds 6``. Everything is the real collector
(gRPC receive, shared-memory slots, spool, group inserts, the store) except
its ingest workers' traces conversion: each worker converts its first three
traces exports for real and keeps the CPU time of the cheaper warm one (the
first pays the imports); every later export gets that conversion's tables
again after the worker has spun ``F`` × that CPU time. Its request ids are
suffixed with the export's own token, so each export stores requests of its
own and ``ingest.py``'s stored-count check still holds; its call identities
are left out, so the collector does not take it for a second span of a
stored call. ``F`` = 1 reproduces ``ingest.py``; ``F`` = 0 is the ceiling of
the rest of the path.

It measures how much cheaper the path has to get for a ratio (README,
"Ingest throughput"). Not a product path: the rows it stores repeat one
export's content. (Session 19's ``--document-cost``, documents made in the
workers at a given speed, is gone: the workers build them now, for real.)
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time

import pyarrow as pa
import pyarrow.compute as compute

from promptprism.collector.write import convert as _convert
from promptprism.collector.write import workers as _workers
from promptprism.collector.write.rows import TableSet

# How the options reach the workers: they are spawned, and import this script again as __mp_main__.
CONVERSION_COST_VARIABLE = "PROMPTPRISM_WHAT_IF_CONVERSION_COST"
REAL_CONVERSIONS = 3  # per worker: the first pays the imports, the warm ones set the cost
_REQUEST_TABLES = ("requests", "request_docs")

_real_convert = _workers.convert
_kept: dict[str, object] = {}


def _spin(seconds: float) -> None:
    """Busy for ``seconds`` of this process's CPU time."""
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
    kept = _kept["converted"]
    _spin(float(os.environ[CONVERSION_COST_VARIABLE]) * _kept["seconds"])
    # A token of the export's own bytes (its spans' ids come first), not of the whole payload: cheap.
    token = hashlib.sha256(bytes(payload[:65536]) + len(payload).to_bytes(8, "little")).hexdigest()
    return _convert.ConvertedExport(_with_own_requests(kept.tables, token), token, kept.received, kept.rejected,
                                    kept.error_message, kept.requests, kept.mapped_blocks,
                                    dict(kept.unmapped_reasons))


def _patch() -> None:
    if os.environ.get(CONVERSION_COST_VARIABLE):
        _workers.convert = convert_at_cost


_patch()  # in a worker (spawned: it imports this script again), from the variables the run set


def _cost(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also NaN
        raise argparse.ArgumentTypeError(f"a cost ≥ 0, not {text!r}")
    return value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog="Every other option goes to ingest.py (see its --help).")
    parser.add_argument("--conversion-cost", type=_cost, metavar="F", required=True,
                        help="the workers' traces conversion at F × its measured CPU time")
    options, passed = parser.parse_known_args()
    refused = [argument for argument in passed if argument.split("=")[0] in ("--baseline", "--stages")]
    if refused:
        parser.error(f"{refused[0].split('=')[0]} measures the real path: run ingest.py for it")
    workers = [value for flag, value in zip(passed, passed[1:]) if flag == "--ingest-workers"]
    workers += [argument.split("=", 1)[1] for argument in passed if argument.startswith("--ingest-workers=")]
    if "0" in workers:
        parser.error("--ingest-workers 0 converts in the collector's process: --conversion-cost changes the workers'")
    os.environ[CONVERSION_COST_VARIABLE] = repr(options.conversion_cost)
    print(f"what if: a worker's traces conversion costs {options.conversion_cost:g} × its measured CPU time",
          flush=True)
    _patch()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import ingest

    sys.argv = [sys.argv[0], *passed]
    return ingest.main()


if __name__ == "__main__":
    sys.exit(main())

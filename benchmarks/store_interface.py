"""The embedded store through clickhouse-connect's chdb interface, against ours, in one run.

clickhouse-connect (1.x) can drive chdb in-process (``get_client(interface="chdb",
path=…)``). If it carried the project's DDL, inserts and queries as fast as
``collector/store/embedded.py``, the embedded and the server store could be one
class. This measures it on the same chdb engine (one per process), two
databases side by side:

- ``ours``   — ``EmbeddedStore``: ``INSERT … SELECT * FROM Python(arrow table)``, JSONEachRow reads;
- ``connect``— ``ServerStore``'s own code (``insert_arrow``, ``raw_query`` JSONEachRow,
  ``command``) on a ``ChdbClient`` instead of an HTTP client.

Both run every migration, get the same exports (512 spans × 40 blocks from
``ingest.build_batch``, converted once), and answer the read side's lookups and
insight reports — the answers must be equal. Inserts and queries are timed in
interleaved rounds (ours, then connect, in each round); the ratio printed is
the median of per-round ratios connect / ours (> 1: connect is slower).
Run: ``python benchmarks/store_interface.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import clickhouse_connect

from promptprism.collector.read import lookups
from promptprism.collector.read.insight import report
from promptprism.collector.store.embedded import EmbeddedStore
from promptprism.collector.store.migrations import migrate
from promptprism.collector.store.server import ServerStore
from promptprism.collector.write.convert import ENCODING_PROTOBUF, convert_traces

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ingest import build_batch  # noqa: E402  (the ingest benchmark's realistic export)


class ConnectChdbStore(ServerStore):
    """ServerStore's code path with clickhouse-connect's chdb client in place of its HTTP client."""

    def __init__(self, path: str, database: str):
        super().__init__(f"http://default@localhost:8123/{database}")
        self._path = path

    def _client(self):
        if self._client_instance is None:
            self._client_instance = clickhouse_connect.get_client(interface="chdb", path=self._path)
        return self._client_instance


def timed(function) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def paired(rounds: int, ours, theirs) -> tuple[float, float, float]:
    """Median seconds of each and the median per-round ratio theirs / ours."""
    ours_times, theirs_times = [], []
    for _ in range(rounds):
        ours_times.append(timed(ours))
        theirs_times.append(timed(theirs))
    ratios = [other / one for one, other in zip(ours_times, theirs_times)]
    return statistics.median(ours_times), statistics.median(theirs_times), statistics.median(ratios)


def insert_all(store, tables, token: str) -> None:
    for name, table in tables.non_empty():
        store.insert(name, table, dedup_token=token)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds per measurement (default 7)")
    parser.add_argument("--batches", type=int, default=3, help="distinct exports inserted (default 3)")
    args = parser.parse_args()

    exports = [convert_traces(build_batch(number), ENCODING_PROTOBUF) for number in range(args.batches)]
    with tempfile.TemporaryDirectory(prefix="store-interface-") as directory:
        ours = EmbeddedStore(directory, database="ours")
        theirs = ConnectChdbStore(os.path.join(directory, "clickhouse"), "connect")
        try:
            return run(args, exports, ours, theirs)
        finally:
            theirs.close()
            ours.close()


def run(args, exports, ours, theirs) -> int:
    print(f"clickhouse-connect {clickhouse_connect.__version__}; {args.rounds} interleaved rounds; "
          "ratio = connect / ours (median of per-round ratios)")
    ddl_ours = timed(lambda: migrate(ours))
    ddl_theirs = timed(theirs.migrate)
    print(f"{'migrations (once)':<34} ours {ddl_ours * 1e3:8.1f} ms  connect {ddl_theirs * 1e3:8.1f} ms  "
          f"ratio {ddl_theirs / ddl_ours:5.2f}")

    inserted = {"ours": 0, "connect": 0}

    def insert(store, name):
        number = inserted[name]
        inserted[name] += 1
        # Both stores get the same exports in the same order; a fresh token, so none is deduplicated away.
        insert_all(store, exports[number % len(exports)].tables, f"{name}-{number}")

    label = f"insert one export ({exports[0].tables.spans} spans)"
    mine, other, ratio = paired(args.rounds, lambda: insert(ours, "ours"), lambda: insert(theirs, "connect"))
    print(f"{label:<34} ours {mine * 1e3:8.1f} ms  connect {other * 1e3:8.1f} ms  ratio {ratio:5.2f}")

    request_id = ours.query("SELECT request_id FROM ours.requests LIMIT 1")[0]["request_id"]
    trace_id = ours.query("SELECT trace_id FROM ours.requests LIMIT 1")[0]["trace_id"]
    readers = {
        "lookups.request": lambda store: lookups.request(store, request_id),
        "lookups.trace": lambda store: lookups.trace(store, trace_id),
        "lookups.list_summaries": lambda store: lookups.list_summaries(store, {"limit": "50"}),
        "report.growth": lambda store: report.growth(store, None, report.Filters()),
    }
    same = True
    for name, read in readers.items():
        answers = read(ours), read(theirs)
        equal = _comparable(answers[0]) == _comparable(answers[1])
        same &= equal
        mine, other, ratio = paired(args.rounds, lambda: read(ours), lambda: read(theirs))
        print(f"{name:<34} ours {mine * 1e3:8.1f} ms  connect {other * 1e3:8.1f} ms  ratio {ratio:5.2f}"
              f"  {'same answer' if equal else 'DIFFERENT ANSWER'}")
    return 0 if same else 1


def _comparable(answer):
    """The answer with the database name (the only intended difference) taken out."""
    return repr(answer).replace("'connect'", "'ours'")


if __name__ == "__main__":
    sys.exit(main())

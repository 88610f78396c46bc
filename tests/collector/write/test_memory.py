"""A worker keeps the memory a conversion freed (write/_memory.pyx): the next
conversion reuses it instead of faulting fresh pages in, within the bound,
and converts exactly as before.

Each check runs in a process of its own: the module replaces the process's
arena allocator, which this test process should not inherit."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from promptprism.collector.write.convert import convert_traces

from support import IN_CI

from ..collector_harness import prompt_export

try:
    from promptprism.collector.write import _memory
except ImportError:  # not built
    _memory = None

needs_build = pytest.mark.skipif(_memory is None, reason="write/_memory.pyx is not built")


@pytest.mark.skipif(_memory is not None or not IN_CI, reason="built, or not under CI")
def test_under_ci_the_memory_module_is_built():
    assert _memory is not None, "setup.py did not build promptprism.collector.write._memory"


def _run(script: str) -> dict:
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.splitlines()[-1])


CHURN = """
    import json, resource
    from promptprism.collector.write._memory import keep_freed_memory, kept_bytes

    def churn():
        # ~60 MB of small objects, freed together: CPython's arenas empty out at the end.
        held = [(str(number) * 5, number) for number in range(400_000)]
        del held

    def faults_of(work):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        work()
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
"""


@needs_build
def test_freed_arenas_are_reused_within_the_bound_and_given_back_at_zero():
    found = _run(CHURN + """
    churn()
    default = min(faults_of(churn) for _ in range(3))
    keep_freed_memory(16 << 20, 0)
    churn()  # fills the cache
    kept_after_churn = kept_bytes()
    kept = min(faults_of(churn) for _ in range(3))
    keep_freed_memory(0, 0)
    print(json.dumps({"default": default, "kept": kept, "kept_after_churn": kept_after_churn,
                      "after_zero": kept_bytes()}))
    """)
    # Without the cache every churn faults its arenas in again; with it, up to 16 MiB come back
    # already mapped (~4,000 pages fewer).
    assert found["default"] > 8_000, found
    assert found["default"] - found["kept"] > 3_000, found
    assert 0 < found["kept_after_churn"] <= 16 << 20, found
    assert found["after_zero"] == 0, found


@needs_build
def test_glibc_keeps_its_heap_when_asked():
    found = _run(CHURN + """
    def big():
        blocks = [bytearray(2 << 20) for _ in range(8)]  # 16 MiB in 2 MiB blocks: mmap'ed by default
        del blocks
    big()
    default = min(faults_of(big) for _ in range(3))
    taken = keep_freed_memory(0, 64 << 20)
    big()
    kept = min(faults_of(big) for _ in range(3))
    print(json.dumps({"default": default, "kept": kept, "taken": taken}))
    """)
    assert found["taken"] is True, found  # glibc, as on every machine this project runs on
    assert found["default"] > 3_000 and found["kept"] < found["default"] // 4, found


@needs_build
def test_a_conversion_with_the_memory_kept_is_the_same_conversion(tmp_path):
    payload = tmp_path / "export.bin"
    payload.write_bytes(prompt_export())
    found = _run(f"""
    import json
    from promptprism.collector.write._memory import keep_freed_memory
    from promptprism.collector.write.convert import convert_traces
    keep_freed_memory(64 << 20, 64 << 20)
    payload = open({str(payload)!r}, "rb").read()
    rounds = [convert_traces(payload, "protobuf") for _ in range(3)]
    print(json.dumps([{{name: table.to_pylist() for name, table in converted.tables.tables.items()}}
                      for converted in rounds], default=repr))
    """)
    expected = {name: table.to_pylist() for name, table in convert_traces(payload.read_bytes(), "protobuf")
                .tables.tables.items()}
    expected = json.loads(json.dumps(expected, default=repr))
    assert found == [expected] * 3


@needs_build
def test_the_ingest_workers_keep_their_memory():
    from promptprism.collector.write import workers

    pool = workers.ConversionPool(1)
    try:
        pool.convert("traces", prompt_export(), "protobuf")
        kept = pool._current().submit(_memory.kept_bytes).result(timeout=60)
    finally:
        pool.close()
    assert 0 < kept <= workers.WORKER_KEPT_ARENA_BYTES


@needs_build
def test_the_collector_process_keeps_its_memory_in_every_thread():
    """``app.tune_process`` (the CLI's): an export's payload and tables are received and written by
    the gRPC and sink threads, whose blocks come from glibc's per-thread arenas; a block freed there
    is reused by the next export instead of being faulted in again. Freed CPython arenas are kept too."""
    found = _run(CHURN + """
    import threading
    from promptprism.collector import app

    def in_a_thread(work):
        result = []
        thread = threading.Thread(target=lambda: result.append(work()))
        thread.start()
        thread.join()
        return result[0]

    def export_sized():
        payload = bytes(20 << 20)  # a 512 × 40 export's payload, then its tables' bytes
        tables = [bytearray(3 << 20) for _ in range(3)]
        del payload, tables

    def receive():  # one thread, as one gRPC handler thread receives export after export
        return min(faults_of(export_sized) for _ in range(3))

    receive_default = in_a_thread(receive)
    app.tune_process()
    in_a_thread(export_sized)
    receive_kept = in_a_thread(receive)
    churn()
    print(json.dumps({"default": receive_default, "kept": receive_kept, "arenas": kept_bytes()}))
    """)
    # ~2,300 by default here (glibc trims each thread's heap as the blocks go), none when kept.
    assert found["default"] > 1_000 and found["kept"] < found["default"] // 4, found
    assert 0 < found["arenas"] <= 16 << 20, found

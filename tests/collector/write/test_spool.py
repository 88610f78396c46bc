"""spool: crash-safe files of acknowledged-but-unwritten groups."""

from __future__ import annotations

import pytest

from promptprism.collector.write.rows import build_tables
from promptprism.collector.write.spool import MAGIC, Spool, SpoolCorrupt, SpooledGroup, SpoolFull, decode, encode

from ..write_path_samples import BASE_NS, make_requests


def group(first: int = 0) -> SpooledGroup:
    spans, records = make_requests(first, 3, started_at_ns=BASE_NS)
    return SpooledGroup("f" * 64, [f"batch-{first}"], build_tables(spans, records))


def test_round_trip_keeps_tables_tokens_and_counts():
    original = group()
    copy = decode(encode(original))
    assert copy.token == original.token and copy.batch_tokens == original.batch_tokens
    assert copy.tables.content_keys == original.tables.content_keys
    assert (copy.tables.spans, copy.tables.requests) == (3, 3)
    for name, table in original.tables.tables.items():
        assert copy.tables.tables[name].equals(table), name


def test_files_replay_in_write_order_and_are_removed(tmp_path):
    spool = Spool(tmp_path, max_bytes=10**8, max_files=10)
    paths = [spool.write(group(n)) for n in range(3)]
    assert spool.pending() == paths and spool.depth_files == 3
    assert spool.depth_bytes == sum(path.stat().st_size for path in paths)
    assert spool.read(paths[1]).tables.tables["requests"].column("request_id").to_pylist()[0] == f"{2:016x}"
    spool.remove(paths[0])
    assert spool.pending() == paths[1:]
    # A new process sees the same files.
    assert Spool(tmp_path, max_bytes=10**8, max_files=10).pending() == paths[1:]


def test_a_file_this_process_wrote_is_replayed_from_its_kept_copy_and_forgotten_once_removed(tmp_path):
    spool = Spool(tmp_path, max_bytes=10**8, max_files=10)
    written = group()
    path = spool.write(written)
    path.write_bytes(b"damaged after it was written")  # what the replay reads is the group as written
    assert spool.read(path) is written
    spool.remove(path)
    assert spool.depth_files == 0 and spool._kept_bytes == 0 and not spool._kept


def test_past_the_kept_bound_files_are_read_back_from_disk(tmp_path, monkeypatch):
    from promptprism.collector.write import spool as spool_module

    monkeypatch.setattr(spool_module, "MAX_KEPT_BYTES", len(encode(group())))
    spool = Spool(tmp_path, max_bytes=10**8, max_files=10)
    first, second = group(0), group(1)
    first_path, second_path = spool.write(first), spool.write(second)
    assert spool.read(first_path) is first
    read_back = spool.read(second_path)
    assert read_back is not second and read_back.batch_tokens == second.batch_tokens
    for name, table in second.tables.tables.items():
        assert read_back.tables.tables[name].equals(table), name


def test_a_write_cut_short_is_discarded_at_start(tmp_path):
    spool = Spool(tmp_path, max_bytes=10**8, max_files=10)
    kept = spool.write(group())
    (tmp_path / ".tmp-00000000000000000001-1-00000001.spool").write_bytes(encode(group())[:100])
    reopened = Spool(tmp_path, max_bytes=10**8, max_files=10)
    assert reopened.pending() == [kept]
    assert not list(tmp_path.glob(".tmp-*"))


def test_bounds_raise_spool_full(tmp_path):
    size = len(encode(group()))
    spool = Spool(tmp_path, max_bytes=size * 2, max_files=10)
    spool.write(group())
    spool.write(group())
    with pytest.raises(SpoolFull):
        spool.write(group())
    by_count = Spool(tmp_path / "other", max_bytes=10**9, max_files=1)
    by_count.write(group())
    with pytest.raises(SpoolFull):
        by_count.write(group())


@pytest.mark.parametrize("damage", [
    lambda data: data[:-10],  # truncated
    lambda data: data[:-5] + b"XXXXX",  # body changed
    lambda data: b"NOTSPOOL" + data[8:],  # not ours
    lambda data: MAGIC + b"\xff\xff\xff\xff",  # header length beyond the file
])
def test_damaged_files_are_detected_and_quarantined(tmp_path, damage):
    path = Spool(tmp_path, max_bytes=10**8, max_files=10).write(group())
    path.write_bytes(damage(path.read_bytes()))
    spool = Spool(tmp_path, max_bytes=10**8, max_files=10)  # a later process: the file is all there is
    with pytest.raises(SpoolCorrupt):
        spool.read(path)
    moved = spool.quarantine(path)
    assert moved.parent.name == "corrupt" and spool.pending() == []


def _with_header(header_object) -> bytes:
    """A spool file whose header is valid JSON with a matching checksum but the wrong shape."""
    import hashlib
    import json
    import struct

    body = b""
    if isinstance(header_object, dict):
        header_object = {**header_object, "sha256": hashlib.sha256(body).hexdigest()}
    header = json.dumps(header_object).encode()
    return MAGIC + struct.pack(">I", len(header)) + header + body


@pytest.mark.parametrize("header_object", [
    ["a", "list"],  # not an object
    {"tables": [["requests", 5]]},  # a table past the body, keys missing
    {"tables": "nope", "token": "t"},
])
def test_wrongly_shaped_headers_are_corrupt_not_a_crash(header_object):
    with pytest.raises(SpoolCorrupt):
        decode(_with_header(header_object))


def test_tables_serialized_by_a_worker_are_written_as_they_are_and_others_anew():
    """``serialized`` bytes are used only for the very table object they were made from."""
    from promptprism.collector.write._arrow_ipc import table_to_bytes
    from promptprism.collector.write.spool import checksum

    original, other = group(0), group(10)
    requests, documents = original.tables.tables["requests"], original.tables.tables["request_docs"]
    # For `requests`: the bytes of another group's requests, under this very table object: written as given.
    stand_in = table_to_bytes(other.tables.tables["requests"])
    # For `request_docs`: bytes made for another object (as when the sink filtered a table since): not used.
    stale = table_to_bytes(other.tables.tables["request_docs"])
    original.serialized = {"requests": (requests, stand_in, checksum(stand_in)),
                           "request_docs": (other.tables.tables["request_docs"], stale, checksum(stale))}
    copy = decode(encode(original))
    assert copy.tables.tables["requests"].equals(other.tables.tables["requests"])
    assert copy.tables.tables["request_docs"].equals(documents)


def test_a_file_written_before_per_table_checksums_still_reads():
    """Files of earlier collectors carry one sha256 of the body instead of a CRC per table."""
    import hashlib
    import json
    import struct

    from promptprism.collector.write._arrow_ipc import table_to_bytes

    original = group()
    blobs = [(name, table_to_bytes(table)) for name, table in original.tables.tables.items()]
    body = b"".join(blob for _, blob in blobs)
    header = json.dumps({
        "token": original.token, "batch_tokens": original.batch_tokens,
        "content_keys": [list(key) for key in original.tables.content_keys],
        "spans": original.tables.spans, "requests": original.tables.requests,
        "tables": [[name, len(blob)] for name, blob in blobs], "sha256": hashlib.sha256(body).hexdigest(),
    }).encode()
    data = MAGIC + struct.pack(">I", len(header)) + header + body
    copy = decode(data)
    for name, table in original.tables.tables.items():
        assert copy.tables.tables[name].equals(table), name
    with pytest.raises(SpoolCorrupt):
        decode(data[:-1] + bytes([data[-1] ^ 1]))


def test_tables_read_back_lie_aligned_for_arrow():
    """Read in place from the file's bytes, every buffer of every table is 8-byte aligned."""
    copy = decode(encode(group()))
    for name, table in copy.tables.tables.items():
        for column in table.columns:
            for chunk in column.chunks:
                for buffer in chunk.buffers():
                    assert buffer is None or buffer.address % 8 == 0, name

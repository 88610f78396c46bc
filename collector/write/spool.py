"""The on-disk spool: batches that are acknowledged but not yet in ClickHouse.

When the store is unreachable the sink writes the batch's tables here and
only then acknowledges it; a background thread replays the files into the
store and deletes each one only after its insert succeeded.

One file per written group, crash-safe: written to a temporary name,
fsync'ed, renamed into place, and the directory fsync'ed, so a file under
its final name is complete (a SIGKILL leaves at most a stray temporary,
which was never acknowledged and is removed at start-up). A checksum over
the body catches anything a disk does to it later; such files are moved to
``corrupt/`` and counted, never replayed half-read.

Under load the sink acknowledges batches once they are here and the replay
thread inserts several files at once (one INSERT per table for all of
them). Before such an insert it writes an *intent* (``NAME.intent``: the
insert's dedup token and the files it covers, fsync'ed like a spool file),
and removes it after the files: a restart replays an intent's files together
under the same token, so ClickHouse drops whatever the interrupted insert
already wrote, and nothing is stored twice however the files were grouped.

Layout of a file: ``MAGIC``, a 4-byte big-endian header length, the header
(JSON: tokens, counts, table names and lengths, each table's CRC-32), then
each table as an Arrow IPC stream. Arrow keeps column names, so a spool
written by an older collector loads into a newer schema (missing columns
take their DEFAULTs); files of collectors before the CRCs carry one sha256
of the body instead, and still load.

A table that crossed from a worker process already is an IPC stream with
its CRC (``convert.to_wire``): those bytes are written as they are
(``SpooledGroup.serialized``) instead of serializing the table again in the
collector's process, and a file is written piece by piece, never copied
into one buffer; it is read back without copying its tables out of the
file's bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import pyarrow as pa

from ._arrow_ipc import table_from_bytes, table_to_bytes
from .rows import TableSet, in_todays_layout

MAGIC = b"PPSPOOL1\n"
SUFFIX = ".spool"
INTENT_SUFFIX = ".intent"
TEMPORARY_PREFIX = ".tmp-"
# Arrow's buffer alignment: a table is read in place only from an offset that is a multiple of it.
ALIGNMENT = 8
# A header is a few tokens and table names; anything bigger is a damaged file.
MAX_HEADER_BYTES = 16 * 1024 * 1024
# Groups this process wrote are kept in memory, up to this many bytes of files, until replayed: the
# replay inserts them without reading the files back (~6-12 ms per 16 MB export). The sink's memory
# bound (sink.MAX_PENDING_BYTES); past it, files are read from disk as after a restart.
MAX_KEPT_BYTES = 256 * 1024 * 1024


class SpoolFull(Exception):
    """Writing this group would pass the spool's size bounds."""


class SpoolCorrupt(Exception):
    """A spool file that cannot be read back as written."""


# A table already serialized (by a worker): the table, its Arrow IPC stream bytes, their CRC-32.
Serialized = tuple[pa.Table, bytes, int]


@dataclass
class SpooledGroup:
    token: str  # the group's insert_deduplication_token, reused on replay
    batch_tokens: list[str]
    tables: TableSet
    # By table name: bytes made for that very table object elsewhere (a worker); used only while
    # ``tables`` still holds that object (a table filtered since is serialized again).
    serialized: Mapping[str, Serialized] = field(default_factory=dict)


def checksum(blob) -> int:
    """A table's checksum in a spool file: CRC-32, which catches what a disk does to a file (not an adversary)."""
    return zlib.crc32(blob)


def _fsync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def encode_parts(group: SpooledGroup) -> list[bytes]:
    """The file's bytes as pieces (header, then one Arrow IPC stream per table), to write in turn."""
    names, blobs, checksums = [], [], []
    for name, table in group.tables.tables.items():
        known = group.serialized.get(name)
        if known is not None and known[0] is table:
            blob, crc = known[1], known[2]
        else:
            blob = table_to_bytes(table)
            crc = checksum(blob)
        names.append(name)
        blobs.append(blob)
        checksums.append(crc)
    header = json.dumps({
        "token": group.token,
        "batch_tokens": group.batch_tokens,
        "content_keys": [list(key) for key in group.tables.content_keys],
        "spans": group.tables.spans,
        "requests": group.tables.requests,
        "tables": [[name, len(blob)] for name, blob in zip(names, blobs)],
        "crc32": checksums,
    }).encode("utf-8")
    # Padded with spaces (JSON allows them) so that the tables start 8-byte aligned in the file,
    # as Arrow wants its buffers: read back, they are used where they lie (IPC streams are
    # multiples of 8 bytes long).
    header += b" " * (-(len(MAGIC) + 4 + len(header)) % ALIGNMENT)
    return [MAGIC + struct.pack(">I", len(header)) + header, *blobs]


def encode(group: SpooledGroup) -> bytes:
    return b"".join(encode_parts(group))


def decode(data: bytes) -> SpooledGroup:
    """A spool file's group; its tables point into ``data`` (no copy: a ``bytes`` object's data is
    16-byte aligned, and the tables lie 8-byte aligned within it). Raises SpoolCorrupt."""
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 4:
        raise SpoolCorrupt("not a promptprism spool file")
    (header_length,) = struct.unpack(">I", data[len(MAGIC):len(MAGIC) + 4])
    start = len(MAGIC) + 4
    if header_length > MAX_HEADER_BYTES or start + header_length > len(data):
        raise SpoolCorrupt("header length out of range")
    try:
        header = json.loads(data[start:start + header_length])
    except ValueError as error:
        raise SpoolCorrupt(f"bad header: {error}") from None
    if not isinstance(header, dict):
        raise SpoolCorrupt("bad header: not an object")
    body = memoryview(data)[start + header_length:]
    checksums = header.get("crc32")
    if checksums is None:  # written before per-table CRCs: one sha256 of the body
        if hashlib.sha256(body).hexdigest() != header.get("sha256"):
            raise SpoolCorrupt("body checksum mismatch")
    # A header can be valid JSON with the right checksum and still be wrong in
    # shape; any such fault is this file's alone and must not stop the replay
    # of the files after it, so it is reported as corrupt (moved aside).
    try:
        extents, offset = [], 0
        for name, length in header["tables"]:
            extents.append((str(name), offset, int(length)))
            offset += int(length)
        if offset != len(body):
            raise SpoolCorrupt("the tables do not fill the body")
        if checksums is not None and (not isinstance(checksums, list) or len(checksums) != len(extents)):
            raise SpoolCorrupt("bad header: one checksum per table")
        tables: dict[str, pa.Table] = {}
        for number, (name, offset, length) in enumerate(extents):
            blob = body[offset:offset + length]
            if checksums is not None and checksum(blob) != checksums[number]:
                raise SpoolCorrupt(f"table {number} checksum mismatch")
            if (start + header_length + offset) % ALIGNMENT:  # a file of an earlier collector: copied, aligned
                blob = bytes(blob)
            tables[name] = table_from_bytes(blob)
        return SpooledGroup(
            token=header["token"],
            batch_tokens=list(header["batch_tokens"]),
            tables=TableSet(
                tables=in_todays_layout(tables),  # a file of a collector before migration 040 or 046
                content_keys=[(int(day), str(sha)) for day, sha in header["content_keys"]],
                spans=int(header["spans"]),
                requests=int(header["requests"]),
            ),
        )
    except (KeyError, TypeError, ValueError, pa.ArrowException) as error:
        raise SpoolCorrupt(f"bad header or table: {type(error).__name__}") from None


class Spool:
    """A directory of spool files, oldest first, with size bounds."""

    def __init__(self, directory: str | os.PathLike, *, max_bytes: int, max_files: int):
        self.directory = Path(directory)
        self.corrupt_directory = self.directory / "corrupt"
        self.max_bytes = max_bytes
        self.max_files = max_files
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._sequence = 0
        self._sizes: dict[str, int] = {}
        self._kept: dict[str, SpooledGroup] = {}  # name → the group as written (MAX_KEPT_BYTES)
        self._kept_bytes = 0
        for entry in self.directory.iterdir():
            if entry.name.startswith(TEMPORARY_PREFIX):
                entry.unlink(missing_ok=True)  # a write cut short: never acknowledged
            elif entry.name.endswith(SUFFIX):
                self._sizes[entry.name] = entry.stat().st_size

    @property
    def depth_files(self) -> int:
        with self._lock:
            return len(self._sizes)

    @property
    def depth_bytes(self) -> int:
        with self._lock:
            return sum(self._sizes.values())

    def write(self, group: SpooledGroup) -> Path:
        """Write durably, or raise SpoolFull. Returns once the file is on disk."""
        parts = encode_parts(group)
        size = sum(map(len, parts))
        with self._lock:
            if len(self._sizes) + 1 > self.max_files or sum(self._sizes.values()) + size > self.max_bytes:
                raise SpoolFull(f"spool at {self.directory} is full")
            self._sequence += 1
            # Names sort in write order, across restarts too (wall clock first).
            name = f"{time.time_ns():020d}-{os.getpid()}-{self._sequence:08d}{SUFFIX}"
            self._sizes[name] = size  # reserve before the slow part
        try:
            path = self._write_durably(name, parts)
        except BaseException:
            with self._lock:
                self._sizes.pop(name, None)
            raise
        with self._lock:
            if name in self._sizes and self._kept_bytes + size <= MAX_KEPT_BYTES:
                self._kept[name] = group
                self._kept_bytes += size
        return path

    def oldest_age_seconds(self) -> float:
        """How long ago the oldest pending file was written (names start with the wall-clock time)."""
        with self._lock:
            oldest = min(self._sizes, default=None)
        if oldest is None:
            return 0.0
        try:
            return max(0.0, (time.time_ns() - int(oldest.split("-", 1)[0])) / 1e9)
        except ValueError:  # not a name this module wrote: replay it now
            return float("inf")

    def size_of(self, path: Path) -> int:
        with self._lock:
            return self._sizes.get(path.name, 0)

    # --- intents: several files inserted as one group ----------------------

    def write_intent(self, token: str, paths: list[Path]) -> Path:
        """Record, durably, that ``paths`` are about to be inserted together under ``token``."""
        with self._lock:
            self._sequence += 1
            name = f"{time.time_ns():020d}-{os.getpid()}-{self._sequence:08d}{INTENT_SUFFIX}"
        data = json.dumps({"token": token, "files": [path.name for path in paths]}).encode("utf-8")
        return self._write_durably(name, data)

    def _write_durably(self, name: str, data: bytes | list[bytes]) -> Path:
        """Write ``data`` (or its pieces in turn) as ``name`` all or nothing: a temporary file,
        fsynced, renamed, the directory fsynced."""
        final = self.directory / name
        temporary = self.directory / f"{TEMPORARY_PREFIX}{name}"
        try:
            with open(temporary, "wb") as handle:
                handle.writelines([data] if isinstance(data, bytes) else data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, final)
            _fsync_directory(self.directory)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        return final

    def intents(self) -> list[Path]:
        return sorted(self.directory.glob(f"*{INTENT_SUFFIX}"))

    def read_intent(self, path: Path) -> tuple[str, list[Path]]:
        """The token and the files (those still there) of an intent; raises SpoolCorrupt."""
        try:
            intent = json.loads(path.read_bytes())
            token, names = str(intent["token"]), [str(name) for name in intent["files"]]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise SpoolCorrupt(f"bad intent: {type(error).__name__}") from None
        with self._lock:
            present = [self.directory / name for name in names if name in self._sizes]
        return token, present

    def remove_intent(self, path: Path) -> None:
        path.unlink(missing_ok=True)
        _fsync_directory(self.directory)

    def pending(self) -> list[Path]:
        with self._lock:
            return [self.directory / name for name in sorted(self._sizes)]

    def read(self, path: Path) -> SpooledGroup:
        """The group in a file: as written, when this process wrote it and kept it, else decoded from disk."""
        with self._lock:
            kept = self._kept.get(path.name)
        if kept is not None and path.parent == self.directory:
            return kept
        return decode(path.read_bytes())

    def _forget(self, name: str) -> None:
        with self._lock:
            size = self._sizes.pop(name, 0)
            if self._kept.pop(name, None) is not None:
                self._kept_bytes -= size

    def remove(self, path: Path) -> None:
        self.remove_all([path])

    def remove_all(self, paths: list[Path]) -> None:
        """Remove files replayed together: one directory fsync for all of them (a file that comes back
        after a crash is still named by its group's intent, removed after this, and replayed under
        the same token)."""
        for path in paths:
            path.unlink(missing_ok=True)
        _fsync_directory(self.directory)
        for path in paths:
            self._forget(path.name)

    def quarantine(self, path: Path) -> Path:
        """Move an unreadable or unloadable file aside, out of the replay loop."""
        self.corrupt_directory.mkdir(exist_ok=True)
        target = self.corrupt_directory / path.name
        os.replace(path, target)
        _fsync_directory(self.directory)
        self._forget(path.name)
        return target

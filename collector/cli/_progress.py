"""A one-line "still working" indicator for verbs that can take a while, on a terminal only.

``growth`` and ``cache`` over a big window and ``migrate`` on a remote server
wait on someone else's work with nothing to count, so the line says what is
being waited for and for how long. Piped or redirected, stderr stays quiet
(``demo`` counts its requests itself). Standard library only.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Iterator, TextIO

# Below this a wait needs no indicator; the line appears only after it.
QUIET_SECONDS = 0.5
REFRESH_SECONDS = 0.1
FRAMES = "|/-\\"


@contextlib.contextmanager
def waiting(what: str, stream: TextIO | None = None, *, quiet_seconds: float = QUIET_SECONDS) -> Iterator[None]:
    stream = sys.stderr if stream is None else stream
    if not (hasattr(stream, "isatty") and stream.isatty()):
        yield
        return
    done = threading.Event()
    started = time.monotonic()

    def show() -> None:
        if done.wait(quiet_seconds):
            return
        frame = 0
        while not done.wait(REFRESH_SECONDS):
            stream.write(f"\r{FRAMES[frame % len(FRAMES)]} {what} {time.monotonic() - started:.1f} s")
            stream.flush()
            frame += 1
        stream.write("\r\033[K")  # clear the line before the answer is printed
        stream.flush()

    thread = threading.Thread(target=show, name="progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()

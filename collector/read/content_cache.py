"""Captured text the read side has already read, kept in memory per store.

A `contents` row never changes: its key is (day, hash of the text), so the
text under a key is that text or nothing. The static blocks and tool
definitions every request of a service repeats, and the messages a
conversation's requests share, are read once per day instead of once per
answer (each key read from `contents` costs about a millisecond of CPU on a
1 M-request store). Only text that was found is kept: a key with no row
(content not captured yet) is asked again next time. The cache belongs to
the store object the read side was given, so two stores (or two databases of
one chdb session) never see each other's text, and it goes with the store.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any, Callable, Iterable, Mapping

ContentKey = tuple[str, str]  # (day as YYYY-MM-DD, key of the text in `contents`)

# Characters of text kept per store: a day's static blocks and tools of a few
# dozen services are a few MB; the rest is messages of recently viewed
# conversations. Bounded so a long-running collector's read side stays small
# beside chdb's own caches.
CONTENT_CACHE_CHARACTERS = 32 * 1024 * 1024


class ContentCache:
    """Text by ContentKey, least recently used dropped first past ``limit`` characters. Thread-safe."""

    def __init__(self, limit: int = CONTENT_CACHE_CHARACTERS):
        self.limit = limit
        self.size = 0
        self._texts: OrderedDict[ContentKey, str] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._texts)

    def get_many(self, keys: Iterable[ContentKey]) -> dict[ContentKey, str]:
        found = {}
        with self._lock:
            for key in keys:
                text = self._texts.get(key)
                if text is not None:
                    self._texts.move_to_end(key)
                    found[key] = text
        return found

    def put_many(self, texts: Mapping[ContentKey, str]) -> None:
        with self._lock:
            for key, text in texts.items():
                if len(text) > self.limit:
                    continue
                previous = self._texts.pop(key, None)
                if previous is not None:
                    self.size -= len(previous)
                self._texts[key] = text
                self.size += len(text)
            while self.size > self.limit:
                _, dropped = self._texts.popitem(last=False)
                self.size -= len(dropped)


_CACHES: "weakref.WeakKeyDictionary[Any, ContentCache]" = weakref.WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def cache_of(store: Any) -> ContentCache:
    """The cache of ``store`` (the object the read side queries), made on first use."""
    with _CACHES_LOCK:
        cache = _CACHES.get(store)
        if cache is None:
            cache = _CACHES[store] = ContentCache()
        return cache


def read_through(store: Any, keys: Iterable[ContentKey],
                 fetch: Callable[[Any, list[ContentKey]], Mapping[ContentKey, str]]) -> dict[ContentKey, str]:
    """Text of ``keys`` (those that have a row), from the cache, else from ``fetch(store, missing keys)``."""
    wanted = list(dict.fromkeys(key for key in keys if key[0] and key[1]))
    cache = cache_of(store)
    found = cache.get_many(wanted)
    missing = [key for key in wanted if key not in found]
    if missing:
        fetched = fetch(store, missing)
        cache.put_many(fetched)
        found.update(fetched)
    return found

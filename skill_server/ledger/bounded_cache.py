"""A small thread-safe LRU map for pure functions of stored bytes.

The ledger reads the same newest rows again and again (every history answer, every match
that shows figures). Checking a row's signature is a pure function of the row's exact bytes
and the key, so its result is kept here, keyed by a digest of those bytes: a row changed in
the database has other bytes, misses, and is checked afresh. (Decoded rows are not kept: a
few thousand models are enough objects to make each full garbage collection a visible pause.)
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class BoundedCache(Generic[V]):
    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._items: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: Hashable, value: V) -> None:
        if self.maxsize <= 0:
            return
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.maxsize:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

"""SharedFailureBoard: the FailureBoard of a worker pool, in one shared-memory segment.

The same contract as ``dtorch.runtime.board`` (a party whose group-kernel input failed posts
the failure before it sends anything; every party checks after the kernel), across processes:
the pool creates one anonymous segment, every worker maps it. Each party writes only its own
ring of ``entries`` slots (no lock: one writer per ring): the failure's bytes first, then the
operator id, so a reader that finds the id finds the whole record. Readers scan every ring's
ids at once (numpy; a few microseconds after each group kernel). A record is the codec's
encoding of the ``Failure``; its message is cut to fit a slot.

Example:
    >>> from dtorch.comm.shm import Segment
    >>> from dtorch.ir.report import Failure
    >>> segment = Segment.create(board_bytes(parties=2))
    >>> board = SharedFailureBoard(segment.buffer, parties=2)
    >>> board.post(1, 4, Failure(4, "redistribute_4 (Convert) at m.py:1:1", 3, "KernelError", "x"))
    >>> board.find(4).device, board.find(5)
    (3, None)
    >>> board.close(); segment.close()
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import replace

import numpy as np

from dtorch.errors import DeserializationError
from dtorch.ir.report import Failure
from dtorch.serialization import deserialize, serialize

#: Slots per party: a failure is needed only until every caller of its operator checked.
ENTRIES = 64
#: Bytes per slot: a length (u32) and the encoded failure.
SLOT = 1024
_LENGTH = struct.Struct("<I")


def board_bytes(parties: int, entries: int = ENTRIES) -> int:
    """The size of the segment a board of ``parties`` needs."""
    return parties * entries * (8 + SLOT)


class SharedFailureBoard:
    """A FailureBoard over ``buffer`` (see the module docstring)."""

    def __init__(self, buffer: mmap.mmap, parties: int, entries: int = ENTRIES) -> None:
        count = parties * entries
        if len(buffer) < board_bytes(parties, entries):
            raise ValueError(f"a board of {parties} parties needs {board_bytes(parties)} bytes")
        self._buffer = buffer
        self._ids = np.frombuffer(buffer, dtype=np.int64, count=count)
        self._data = memoryview(buffer)[count * 8 : count * (8 + SLOT)]
        self._entries = entries
        self._cursors = [0] * parties  # only this process's own party's cursor is used

    def post(self, party: int, operator_id: int, failure: Failure) -> None:
        slot = party * self._entries + self._cursors[party] % self._entries
        self._cursors[party] += 1
        record = _fitting(failure)
        start = slot * SLOT
        self._ids[slot] = 0  # invalid while its bytes change
        self._data[start : start + 4] = _LENGTH.pack(len(record))
        self._data[start + 4 : start + 4 + len(record)] = record
        self._ids[slot] = operator_id

    def find(self, operator_id: int) -> Failure | None:
        hits = np.flatnonzero(self._ids == operator_id)
        if hits.size == 0:
            return None
        start = int(hits[0]) * SLOT
        (length,) = _LENGTH.unpack(self._data[start : start + 4])
        try:
            found = deserialize(bytes(self._data[start + 4 : start + 4 + min(length, SLOT - 4)]))
        except DeserializationError:  # overwritten while read (a ring wrapped): still failed
            found = None
        if not isinstance(found, Failure):
            return Failure(
                operator_id,
                f"operator {operator_id}",
                -1,
                "KernelError",
                "an input failed on another worker",
            )
        return found

    def clear(self, party: int) -> None:
        self._ids[party * self._entries : (party + 1) * self._entries] = 0
        self._cursors[party] = 0

    def close(self) -> None:
        """Drop the views of the buffer (the segment's owner unmaps it)."""
        self._data.release()
        del self._ids


def _fitting(failure: Failure) -> bytes:
    """The encoded failure, its message shortened until it fits a slot."""
    record = serialize(failure)
    while len(record) > SLOT - 4:
        keep = max(0, len(failure.message) - (len(record) - SLOT + 4) - 16)
        failure = replace(
            failure, message=failure.message[:keep] + " [...]", operator=failure.operator[:200]
        )
        record = serialize(failure)
    return record

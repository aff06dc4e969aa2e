"""FailureBoard: where the callers of one group kernel learn that it failed elsewhere.

A group kernel (a redistribution) runs on every party that holds one of its devices, and the
parties exchange data. A party whose input shard is a failure still takes part, with zeros,
so that nobody waits for it; it posts the failure on the board first. Every party checks the
board after the kernel and marks its outputs failed with the posted failure, so no output
computed from those zeros escapes. Posting happens before the poster sends anything, and a
party's outputs depend only on what it received, so a party that needs the mark always sees
it (the exchange orders the post before the check).

A party whose kernel itself fails posts its failure too, before its groups tell the peers
waiting for it (``ThreadGroupManager.fail_scope``: the collectives of the operator raise
``PeerFailedError`` on them at once); a peer told so finds the failure here and marks its
outputs with it, so every fetch shows the failing party's own error.

Entries are needed only between the post and the checks of one operator, so the board keeps
a bounded number of recent ones per party (the per-graph record of failures never grows).
This is the in-process board (threads); process mode uses a shared-memory board with the
same methods (``dtorch.runtime.process.board``).

Example:
    >>> from dtorch.ir.report import Failure
    >>> board = LocalFailureBoard()
    >>> board.post(0, 9, Failure(9, "redistribute_9 (Convert) at m.py:2:1", 1, "KernelError", "x"))
    >>> board.find(9).device, board.find(10)
    (1, None)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Protocol

from dtorch.ir.report import Failure

#: Recent failures a board keeps (per party for the shared board, in all for the local one).
BOARD_ENTRIES = 1024


class FailureBoard(Protocol):
    """What the kernel streams of one runner share about failed group-kernel inputs."""

    def post(self, party: int, operator_id: int, failure: Failure) -> None:
        """Party ``party`` had a failed input for the group operator ``operator_id``, or
        the kernel failed there (``failure``: what failed upstream, or the kernel itself)."""

    def find(self, operator_id: int) -> Failure | None:
        """The failure posted for ``operator_id``, if any party posted one."""

    def clear(self, party: int) -> None:
        """Forget what ``party`` posted (a new graph reuses operator ids)."""


class LocalFailureBoard:
    """A FailureBoard for the threads of one process (bounded: oldest entries go first)."""

    def __init__(self, entries: int = BOARD_ENTRIES) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[int, tuple[int, Failure]] = OrderedDict()
        self._limit = entries

    def post(self, party: int, operator_id: int, failure: Failure) -> None:
        with self._lock:
            self._entries.setdefault(operator_id, (party, failure))
            if len(self._entries) > self._limit:
                self._entries.popitem(last=False)

    def find(self, operator_id: int) -> Failure | None:
        with self._lock:
            entry = self._entries.get(operator_id)
        return None if entry is None else entry[1]

    def clear(self, party: int) -> None:
        with self._lock:
            for key in [k for k, (p, _) in self._entries.items() if p == party]:
                del self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)

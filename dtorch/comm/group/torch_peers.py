"""The ranks of a torch.distributed group as processes: who they are, which died, and the
rendezvous file's cleanup on behalf of a rank that was killed.

Each rank publishes its ``ProcessIdentity`` (pid, start time) and its machine with its hello
in the group's rendezvous store (``hello/<rank>``: ``pid:start@machine``); a rank judges only
the peers of its own machine (and pid namespace), whose pids it can look up. The machine is the
``machine_key`` plus the host address the rank binds, so simulated hosts (loopback addresses of
one machine) count as different machines, as real ones would.

A peer on another host: its pid means nothing here. When it dies, the kernel of its host closes
its sockets, so the ranks that exchange with it in the running collective fail at once with
Gloo's "Connection closed by peer" (a CommError naming no pid); each failing rank publishes its
failure in the rendezvous store (``failed/<seq>``), where the ranks still waiting see it at
their next half-second look and fail too. A host that vanishes without closing its sockets
(power, network) is seen only at the comm timeout (CommTimeoutError).

Why the backend looks at them: Gloo tells a rank that a peer died ("Connection closed by peer",
within milliseconds) only when the rank exchanges with that peer in the running collective.
Measured (world 4, rank 3 SIGKILLed while the others wait in an all-reduce): ranks 0 and 2 fail
within ~30 ms, rank 1 keeps waiting for a live rank that failed already, until that rank closes
its group or the comm timeout. So a rank whose collective outlasts the first probe looks at its
peers' processes every half second.

Cleanup: torch's FileStore removes its file in the destructor of its last instance, by a
reference count kept in the file itself; a killed rank never drops its count, so the file would
stay behind. So each rank holds a hard link to the file (``rendezvous.rank_link``) from its
opening until its FileStore is destroyed; then it takes its link away, and those of the ranks it
sees dead, and the rank that leaves the file with no other link removes it. A count kept in the
store itself cannot do this: a FileStore's destructor opens the file again (``O_CREAT``) after
checking that it exists, so a rank removing the file while another's destructor ran between the
two made the file anew, and it stayed. Links go only after their rank's last use of the file.

Example (world size 1: no peers to watch):
    >>> import os, tempfile
    >>> import torch.distributed as dist
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     store = dist.FileStore(os.path.join(tmp, "rdv"), 1)
    ...     store.set("hello/0", hello_text())
    ...     peers = RankPeers.read(store, 0, 1)
    ...     print(peers.dead())
    []
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from typing import Any

from dtorch.comm.group.rendezvous import LOOPBACK, rank_link
from dtorch.comm.process_identity import ProcessIdentity, machine_key

#: A dead rank, as the errors name it: (rank, pid).
DeadRank = tuple[int, int]


def hello_key(rank: int) -> str:
    """The FileStore key where ``rank`` says hello (and who it is)."""
    return f"hello/{rank}"


def machine_of(host_address: str = LOOPBACK) -> str:
    """The machine a rank binding ``host_address`` is on, as hellos name it."""
    return f"{machine_key()}|{host_address}"


def hello_text(host_address: str = LOOPBACK) -> str:
    """This process's hello: ``pid:start@machine``."""
    return f"{ProcessIdentity.of_self().to_text()}@{machine_of(host_address)}"


@dataclass(frozen=True, slots=True)
class RankPeers:
    """The processes of the other ranks of one group that share this rank's machine."""

    rank: int
    world_size: int
    processes: tuple[tuple[int, ProcessIdentity], ...]

    @classmethod
    def read(
        cls, store: Any, rank: int, world_size: int, host_address: str = LOOPBACK
    ) -> RankPeers:
        """The peers on this rank's machine (``machine_of(host_address)``), from their hellos
        in ``store`` (every rank has said hello by now)."""
        here = machine_of(host_address)
        found = []
        for other in range(world_size):
            identity, _, machine = store.get(hello_key(other)).decode().partition("@")
            if other != rank and machine == here:
                found.append((other, ProcessIdentity.from_text(identity)))
        return cls(rank, world_size, tuple(found))

    def dead(self) -> list[DeadRank]:
        """The peers whose process is gone (exited, killed, or its pid reused)."""
        return [(rank, p.pid) for rank, p in self.processes if not p.alive()]

    def dead_within(self, seconds: float) -> list[DeadRank]:
        """``dead()``, looked at for up to ``seconds`` until one is found (a failure that Gloo
        reports may come a moment before the peer's exit is visible)."""
        deadline = time.monotonic() + seconds
        while not (found := self.dead()) and time.monotonic() < deadline:
            time.sleep(0.02)
        return found

    def leave(self, path: str) -> None:
        """Take away the links to the rendezvous file ``path`` of this rank and of the dead
        ranks, once this rank's FileStore is destroyed; the rank that takes the last link away
        removes the file (two ranks that both see none left both try: one finds it gone). A
        rank without a link (a file system without hard links) removes nothing."""
        linked = _removed(rank_link(path, self.rank))
        for rank, _ in self.dead():
            _removed(rank_link(path, rank))
        with contextlib.suppress(FileNotFoundError):
            if linked and os.stat(path).st_nlink == 1:
                os.remove(path)


def _removed(path: str) -> bool:
    """Whether ``path`` was there to remove."""
    try:
        os.remove(path)
    except FileNotFoundError:
        return False
    return True

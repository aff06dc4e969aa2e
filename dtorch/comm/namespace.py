"""Per-instance namespaces: every name dtorch puts on the machine carries an instance id.

Two dtorch programs on one machine must never meet in a store key, a shared-memory segment or a
socket, and nothing of a program may outlive it. A ``CommNamespace`` is the data that makes
this so: an instance id (the spec's ``GlobalCommInstanceId``) and the rules that turn it into
names. The controller creates one namespace per program and hands it (plain data) to its
worker processes, so every process of one program agrees on the names while another program
gets other names. ``secret`` is the program's shared key: 32 random bytes from ``create()``,
which authenticate every message of its network stores (it is never part of a name, nor of the
repr; distribute it as the instance id is distributed, through the program's rendezvous).
``reclaim()`` removes whatever a program left in ``/dev/shm`` (used by a
parent after its children died, and by tests to prove that nothing is left).

Example:
    >>> ns = CommNamespace("demo1")
    >>> ns.shm_name("store", "graph3/op7")
    'dtorch-demo1-store-...'
    >>> CommNamespace("demo1") == ns and CommNamespace.create() != ns
    True
    >>> len(CommNamespace.create().secret), "secret" in repr(CommNamespace("x", b"k" * 32))
    (32, False)
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path

#: Where POSIX shared memory lives on Linux (``shm_open`` opens files here).
SHM_DIR = Path("/dev/shm")

#: Every shared-memory name dtorch creates starts with this.
SHM_PREFIX = "dtorch-"

_INSTANCE_ID = re.compile(r"[A-Za-z0-9_]{1,40}")
#: ``of_process``'s random part, by process id (the one process-wide value it must keep).
_PROCESS_TOKENS: dict[int, str] = {}


@dataclass(frozen=True, slots=True)
class CommNamespace:
    """The communication namespace of one dtorch program: ``instance_id`` plus naming rules.

    ``instance_id`` is 1-40 characters of ``[A-Za-z0-9_]`` (it becomes part of file names).
    ``secret`` (bytes, empty: none) keys the authentication of network stores; it takes part
    in ``==`` like the id but never in ``repr``.
    """

    instance_id: str
    secret: bytes = field(default=b"", repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.instance_id, str) or not _INSTANCE_ID.fullmatch(self.instance_id):
            raise ValueError(
                f"CommNamespace instance_id {self.instance_id!r} is not accepted; "
                "expected 1-40 characters of [A-Za-z0-9_]"
            )
        if not isinstance(self.secret, bytes):
            kind = type(self.secret).__name__
            raise ValueError(f"CommNamespace secret must be bytes, got {kind}")

    @staticmethod
    def create() -> CommNamespace:
        """A fresh namespace, unique on this machine: the pid plus 32 random bits, and a fresh
        32-byte random ``secret``.

        Example:
            >>> CommNamespace.create() != CommNamespace.create()
            True
        """
        return CommNamespace(f"{os.getpid():x}_{secrets.token_hex(4)}", secrets.token_bytes(32))

    @staticmethod
    def of_process() -> CommNamespace:
        """The namespace of this process: its id (the spec's default instance id) and 32
        random bits drawn once per process, so that another user cannot predict its
        shared-memory names and create them first (a refusal of service).

        Threads of one process agree on it without passing anything; worker processes must be
        given their controller's namespace explicitly instead. It has no secret, so a network
        store refuses it.

        Example:
            >>> CommNamespace.of_process() == CommNamespace.of_process()
            True
            >>> CommNamespace.of_process().instance_id.startswith(f"p{os.getpid():x}_")
            True
        """
        pid = os.getpid()
        # one draw per process id: a forked child draws its own; setdefault keeps the first
        # of two racing threads' draws
        token = _PROCESS_TOKENS.get(pid) or _PROCESS_TOKENS.setdefault(pid, secrets.token_hex(4))
        return CommNamespace(f"p{pid:x}_{token}")

    def scoped_key(self, store_key: str) -> str:
        """``store_key`` qualified by this instance (the key of in-process registries)."""
        return f"{self.instance_id}/{store_key}"

    def shm_name(self, kind: str, key: str) -> str:
        """A shared-memory segment name for ``key`` (hashed: keys may hold any character).

        Example:
            >>> CommNamespace("x").shm_name("p", "k").startswith("dtorch-x-p-")
            True
        """
        digest = hashlib.blake2b(key.encode(), digest_size=10).hexdigest()
        return f"{SHM_PREFIX}{self.instance_id}-{kind}-{digest}"

    def leftovers(self) -> list[Path]:
        """The shared-memory files of this namespace that exist now (sorted)."""
        return sorted(SHM_DIR.glob(f"{SHM_PREFIX}{self.instance_id}-*"))

    def reclaim(self) -> list[str]:
        """Unlink every shared-memory file of this namespace; returns the names removed.

        Call it once the processes of the program are gone (it does not ask them first).

        Example:
            >>> CommNamespace.create().reclaim()
            []
        """
        removed = []
        for path in self.leftovers():
            try:
                path.unlink()
            except FileNotFoundError:  # a live participant removed it meanwhile
                continue
            removed.append(path.name)
        return removed

"""ProcessIdentity: which process of this machine a peer is, and whether it still runs.

The stores, promises and collectives between processes record who their peers are, so that a
participant left waiting for a peer that died fails at once, naming it, instead of at the comm
timeout. A pid alone does not name a process for long: once the process is gone the kernel
hands its number to the next one. The pair (pid, start time) does: the start time (clock ticks
after boot, field 22 of ``/proc/<pid>/stat``) of whatever holds the pid later differs from the
one recorded when the peer joined. Reading it is one small file read (~10 µs), so waiters look
at their peers only in the periodic re-checks of a wait that is slow anyway.

A process counts as gone once its stat is missing, shows another start time, a zombie (killed,
not yet reaped) or the exiting flag (set first thing on exit, before the kernel closes the
process's sockets: a Gloo peer that hears "connection closed" already sees the flag).

Pids mean something only inside one pid namespace of one boot: ``machine_key`` names that
scope, so a peer published through a shared file system is judged only by processes that can
see it.

Example:
    >>> me = ProcessIdentity.of_self()
    >>> me.alive(), ProcessIdentity(me.pid, me.start_ticks + 1).alive()
    (True, False)
    >>> ProcessIdentity.from_text(me.to_text()) == me
    True
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: The kernel's PF_EXITING task flag (field 9 of /proc/<pid>/stat).
_PF_EXITING = 0x4

# Fields of /proc/<pid>/stat after the ")" that closes the command name: state is field 3.
_STATE, _FLAGS, _START = 0, 6, 19


def _stat_fields(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` from the state on, or None without such a process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    return fields if len(fields) > _START else None


def _running(fields: list[bytes]) -> bool:
    return fields[_STATE] not in (b"Z", b"X") and not int(fields[_FLAGS]) & _PF_EXITING


@dataclass(frozen=True, slots=True)
class ProcessIdentity:
    """One process of this machine: its ``pid`` and its start time in clock ticks after boot."""

    pid: int
    start_ticks: int

    @classmethod
    def of_self(cls) -> ProcessIdentity:
        """This process (the start time read once per call: a forked child is another)."""
        found = cls.of_pid(os.getpid())
        assert found is not None, "this process has no /proc entry"
        return found

    @classmethod
    def of_pid(cls, pid: int) -> ProcessIdentity | None:
        """The running process ``pid`` now, or None if there is none.

        Example:
            >>> ProcessIdentity.of_pid(os.getpid()) == ProcessIdentity.of_self()
            True
        """
        fields = _stat_fields(pid)
        if fields is None or not _running(fields):
            return None
        return cls(pid, int(fields[_START]))

    def alive(self) -> bool:
        """Whether this very process still runs (not gone, not exiting, its pid not reused)."""
        fields = _stat_fields(self.pid)
        return fields is not None and _running(fields) and int(fields[_START]) == self.start_ticks

    def to_text(self) -> str:
        """``"pid:start_ticks"``, for stores that hold strings."""
        return f"{self.pid}:{self.start_ticks}"

    @classmethod
    def from_text(cls, text: str) -> ProcessIdentity:
        """The identity ``to_text`` wrote."""
        pid, start = text.split(":")
        return cls(int(pid), int(start))


def machine_key() -> str:
    """The scope in which pids of this process mean the same process: boot and pid namespace.

    Example:
        >>> machine_key() == machine_key() != ""
        True
    """
    try:
        with open("/proc/sys/kernel/random/boot_id") as boot:
            boot_id = boot.read().strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return f"unknown-{os.getpid()}"  # then no other process shares it: peers go unjudged
    return f"{boot_id}/{namespace}"

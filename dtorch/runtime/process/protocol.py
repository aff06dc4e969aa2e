"""The messages between a worker pool's controller and its workers, and a worker's start-up
arguments: plain data only.

Controller -> every worker (PUB-SUB, one send for all, ids checked by each subscriber):

======================  =======================================================================
kind                    parts
======================  =======================================================================
``OPEN``                a session starts: the session id (u64) and the controller's options
                        (the codec's encoding of a dict of ``Options`` fields)
``EXECUTE``             the sequence number to report progress for (u64, 0: none), the bitmap
                        of the workers that must decode the batch, its no-hold ids (int64s),
                        then the batch (``encode_batch``: encoded once for every worker)
``RELEASE``             the controller copied a shared value out: worker (u32), token (u64)
``RESET``               the session ends: the session id (u64); each worker finishes its queued
                        work, drops every shard and answers ``RESET_DONE``
``STOP``                close everything, create ``stop_marker`` in the pool's directory, and
                        exit once the controller has removed that directory (or is gone)
======================  =======================================================================

Worker -> controller (PUSH-PULL, the envelope names the sender):

==================  ===========================================================================
``READY``           once, at start-up, after the subscriber connected: the worker's pid (u64)
``REPORT``          one report record (``dtorch.ir.report``), encoded with the codec; then,
                    for a record that settles a promise, the promise's name (UTF-8): a record
                    the controller cannot read fails that promise alone
``RESET_DONE``      the session id (u64)
``END``             sent by the controller to its own puller: a graph's session (u64), its
                    report reader's last message; or nothing, when a worker exits while the
                    pool starts (wakes the pool's wait for READY)
==================  ===========================================================================

Example:
    >>> args = WorkerArgs(1, 2, "cpu", "ipc:///tmp/p.sock", "ipc:///tmp/q.sock", 7, "/tmp/d",
    ...                   "ns1", 4, 3, 5, 1 << 15)
    >>> WorkerArgs.from_json(args.to_json()) == args
    True
    >>> unpack_u64(pack_u64(2**40))
    1099511627776
    >>> stop_marker("/tmp/d", 1)
    '/tmp/d/stopped-1'
"""

from __future__ import annotations

import dataclasses
import json
import os
import struct
from dataclasses import dataclass
from typing import Any

from dtorch.errors import WorkerError

OPEN, EXECUTE, RELEASE, RESET, STOP = b"open", b"execute", b"release", b"reset", b"stop"
READY, REPORT, RESET_DONE, END = b"ready", b"report", b"reset-done", b"end"

_U64 = struct.Struct("<Q")
_RELEASE = struct.Struct("<IQ")

#: How often each side of a stop looks for the other's sign (a marker, a removed directory).
HAND_OVER_POLL_SECONDS = 0.01


def stop_marker(directory: str, index: int) -> str:
    """The file by which worker ``index`` says it stopped and touches nothing any more."""
    return os.path.join(directory, f"stopped-{index}")


def pack_u64(value: int) -> bytes:
    return _U64.pack(value)


def unpack_u64(part: bytes | memoryview) -> int:
    if len(part) != _U64.size:
        raise WorkerError(f"expected an 8-byte integer part, got {len(part)} bytes")
    return int(_U64.unpack(part)[0])


def pack_release(worker: int, token: int) -> bytes:
    return _RELEASE.pack(worker, token)


def unpack_release(part: bytes | memoryview) -> tuple[int, int]:
    if len(part) != _RELEASE.size:
        raise WorkerError(f"a release part is {_RELEASE.size} bytes, got {len(part)}")
    worker, token = _RELEASE.unpack(part)
    return int(worker), int(token)


@dataclass(frozen=True, slots=True)
class WorkerArgs:
    """What one worker process is started with (as JSON on its command line).

    ``index`` of ``workers``; the device kind it runs; the publisher's and the puller's
    addresses; the controller's pid (the worker exits when it is gone); the pool's private
    directory (IPC sockets, rendezvous files; the worker removes it if the controller died);
    the program's comm namespace; torch's intra-op threads; the shared failure board's
    segment (its fd and inode in the controller, and its size); the backend of collectives
    between workers on CPU devices (a ``BackendKind`` value).
    """

    index: int
    workers: int
    device_type: str
    publisher: str
    puller: str
    controller_pid: int
    directory: str
    namespace: str
    threads: int
    board_fd: int
    board_inode: int
    board_size: int
    cpu_backend: str = "store_file"

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerArgs:
        """The arguments in ``text`` (WorkerError naming what is wrong otherwise)."""
        try:
            fields: Any = json.loads(text)
            return cls(**fields)
        except (ValueError, TypeError) as error:
            raise WorkerError(f"bad worker arguments {text[:200]!r}: {error}") from None

"""Shared-memory and wake-up helpers for the file store and the file promise (Linux).

* Named segments are files in ``/dev/shm`` opened with ``os.open`` (that is all ``shm_open``
  does on Linux). We deliberately do not use ``multiprocessing.shared_memory``: its resource
  tracker would unlink a segment when the process that merely attached to it exits, and warn
  about segments that another process owns. Our segments are unlinked by dtorch itself, as soon
  as every participant has opened them.
* Anonymous segments (``memfd_create``) hold tensor bytes: they never have a name, so a killed
  process cannot leave one behind. Another process maps one through ``/proc/<pid>/fd/<fd>``
  while its owner keeps it open; the inode number guards against a recycled descriptor.
* ``WakeSocket`` is an autobound abstract unix datagram socket: it carries one-byte wake-up
  signals only (never data), has no file, and vanishes with its process.
* ``FileLock`` is ``flock`` on a segment's own descriptor (released by the kernel when the
  holder dies), taken without blocking and retried with a short backoff up to a deadline.

Example:
    >>> import torch
    >>> segment = Segment.create(1 << 16)
    >>> view = tensor_view(segment.buffer, 0, torch.float32, (2, 3))
    >>> _ = view.copy_(torch.arange(6.0).reshape(2, 3))
    >>> peer = map_peer(segment.locator())
    >>> tensor_view(peer, 0, torch.float32, (2, 3))[1].tolist()
    [3.0, 4.0, 5.0]
    >>> segment.close()
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import math
import mmap
import os
import select
import socket
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from dtorch.comm.namespace import SHM_DIR
from dtorch.errors import CommError, CommTimeoutError

#: Smallest pooled segment: small tensors share this size class.
MIN_SEGMENT = 1 << 16
#: Free segments a SegmentPool keeps, in bytes, by default: what an idle process holds on to.
FREE_BYTES = 1 << 30

#: A contended ``FileLock`` yields the core this many times before it sleeps: holders keep it
#: for tens of microseconds, and a sleep lasts at least the timer slack (50 us) - with four
#: processes on two cores, small all-gathers spent 0.8 of their 2.5 ms asleep in the backoff.
_LOCK_YIELDS = 20


def _page_round(nbytes: int) -> int:
    return max(mmap.PAGESIZE, -(-nbytes // mmap.PAGESIZE) * mmap.PAGESIZE)


def open_named(name: str, *, create: bool, size: int = 0) -> int:
    """Open (or exclusively create, sized) the named segment ``/dev/shm/<name>``; its fd.

    An existing segment is opened only if it is this user's own private file (see
    ``check_private``): ``/dev/shm`` is writable by every local user and segment names can be
    predicted, so another user could create one first and read or rewrite what is put in it."""
    if create:
        fd = os.open(SHM_DIR / name, os.O_RDWR | os.O_CLOEXEC | os.O_CREAT | os.O_EXCL, 0o600)
        os.ftruncate(fd, size)
        return fd
    fd = os.open(SHM_DIR / name, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        check_private(fd, f"shared segment {SHM_DIR / name}")
    except CommError:
        os.close(fd)
        raise
    return fd


def check_private(fd: int, what: str) -> os.stat_result:
    """``fd``'s status, once it is known to be a regular file of this process's user that no
    other user may read or write (CommError otherwise)."""
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode):
        raise CommError(f"{what} is not a regular file: refused")
    if status.st_uid != os.geteuid():
        raise CommError(
            f"{what} belongs to user id {status.st_uid}, not to this process's user "
            f"({os.geteuid()}): refused (another user may have created it to read or change "
            "this program's data)"
        )
    if status.st_mode & 0o077:
        raise CommError(
            f"{what} has mode {stat.S_IMODE(status.st_mode):o}: other users may read or "
            "write it: refused (dtorch's segments are 600)"
        )
    return status


def unlink_named(name: str) -> bool:
    """Remove the name of a segment (its memory lives on while mapped); False if absent."""
    try:
        os.unlink(SHM_DIR / name)
    except FileNotFoundError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class Locator:
    """Where another process finds an anonymous segment: owner pid, fd, inode and size."""

    pid: int
    fd: int
    inode: int
    size: int


class Segment:
    """An anonymous shared segment owned by this process, mapped read-write."""

    __slots__ = ("buffer", "fd", "inode", "size")

    def __init__(self, fd: int, size: int) -> None:
        self.fd = fd
        self.size = size
        self.inode = os.fstat(fd).st_ino
        self.buffer = mmap.mmap(fd, size)

    @classmethod
    def create(cls, size: int) -> Segment:
        """A new zero-filled segment of ``size`` bytes (rounded up to whole pages)."""
        fd = os.memfd_create("dtorch-tensor", os.MFD_CLOEXEC)
        os.fchmod(fd, 0o600)  # a memfd starts as 777; peers check that it is private
        size = _page_round(size)
        os.ftruncate(fd, size)
        return cls(fd, size)

    def locator(self) -> Locator:
        return Locator(os.getpid(), self.fd, self.inode, self.size)

    def close(self) -> None:
        """Unmap and close; views handed out keep the memory alive until they are freed."""
        release_buffer(self.buffer)
        os.close(self.fd)


def release_buffer(buffer: mmap.mmap) -> None:
    """Unmap ``buffer`` now, or leave it to the garbage collector while tensors still view it."""
    with contextlib.suppress(BufferError):
        buffer.close()


def map_peer(locator: Locator) -> mmap.mmap:
    """Map another process's anonymous segment (read-write, shared, pages pre-faulted)."""
    path = f"/proc/{locator.pid}/fd/{locator.fd}"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except OSError as error:
        raise CommError(
            f"cannot open the shared segment of process {locator.pid} at {path}: {error} "
            "(the process exited, or /proc access to it is not permitted)"
        ) from None
    try:
        if check_private(fd, f"shared segment {path}").st_ino != locator.inode:
            raise CommError(f"{path} is no longer the segment it was (inode changed)")
        return mmap.mmap(fd, locator.size, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE)
    finally:
        os.close(fd)


def tensor_view(
    buffer: mmap.mmap, offset: int, dtype: torch.dtype, shape: tuple[int, ...]
) -> torch.Tensor:
    """A tensor of ``dtype`` and ``shape`` over ``buffer[offset:]``, without copying.

    The tensor holds a ``memoryview`` of ``buffer``, so ``buffer`` cannot be unmapped while
    the tensor lives (``release_buffer`` then leaves it to the last view): ``torch.frombuffer``
    keeps the object it is given but not an export of its buffer, and a tensor over an
    ``mmap`` closed under it would read unmapped memory."""
    numel = math.prod(shape)
    if numel == 0 or dtype.itemsize == 0:
        return torch.empty(shape, dtype=dtype)
    flat = torch.frombuffer(memoryview(buffer), dtype=dtype, count=numel, offset=offset)
    return flat if len(shape) == 1 else flat.view(shape)  # each torch call counts: per exchange


class SegmentPool:
    """Touched segments of this process, reused by size: a copy into a touched buffer runs at
    memory speed, a fresh segment costs a page fault per page (DESIGN.md section 8). One pool
    may serve many stores (and threads): a store opened per operator then still reuses.
    It keeps at most ``max_free`` free segments, none larger than ``max_size`` bytes, of at
    most ``max_bytes`` bytes in all (a segment that would pass a limit is closed on release)."""

    def __init__(
        self, max_free: int = 16, max_size: int | None = None, max_bytes: int = FREE_BYTES
    ) -> None:
        self._lock = threading.Lock()
        self._free: list[Segment] = []
        self._max_free = max_free
        self._max_size = max_bytes if max_size is None else max_size
        self._max_bytes = max_bytes

    def acquire(self, nbytes: int) -> Segment:
        """The smallest free segment that holds ``nbytes``, or a new power-of-two sized one."""
        with self._lock:
            fitting = [s for s in self._free if s.size >= nbytes]
            if fitting:
                best = min(fitting, key=lambda s: s.size)
                self._free.remove(best)
                return best
        return Segment.create(max(MIN_SEGMENT, 1 << max(0, nbytes - 1).bit_length()))

    def release(self, segment: Segment) -> None:
        """Return ``segment`` for reuse (closed instead when the pool is full, or when it is
        larger than the pool keeps)."""
        with self._lock:
            kept = sum(s.size for s in self._free) + segment.size
            fits = segment.size <= self._max_size and kept <= self._max_bytes
            if fits and len(self._free) < self._max_free:
                self._free.append(segment)
                return
        segment.close()

    def close(self) -> None:
        """Close every free segment (segments still in use are closed by their store)."""
        with self._lock:
            free, self._free = self._free, []
        for segment in free:
            segment.close()


class PeerMaps:
    """Mappings of other processes' segments, by locator, least recently used evicted: at most
    ``capacity`` of them and ``max_bytes`` in all (the newest always kept). A mapping holds its
    segment's memory even after the owner closed it (a segment its pool did not keep), so the
    byte bound is what keeps a reader from pinning many closed segments: 32 mappings of closed
    512 MiB segments held 16 GiB."""

    def __init__(self, capacity: int = 32, max_bytes: int = FREE_BYTES) -> None:
        self._maps: OrderedDict[Locator, mmap.mmap] = OrderedDict()
        self._capacity = capacity
        self._max_bytes = max_bytes
        self._bytes = 0

    def get(self, locator: Locator) -> mmap.mmap:
        buffer = self._maps.get(locator)
        if buffer is not None:
            self._maps.move_to_end(locator)
            return buffer
        buffer = self._maps[locator] = map_peer(locator)
        self._bytes += locator.size
        while len(self._maps) > 1 and (
            len(self._maps) > self._capacity or self._bytes > self._max_bytes
        ):
            oldest, mapped = self._maps.popitem(last=False)
            self._bytes -= oldest.size
            release_buffer(mapped)
        return buffer

    def close(self) -> None:
        for buffer in self._maps.values():
            release_buffer(buffer)
        self._maps.clear()
        self._bytes = 0


def poll_ms(timeout_s: float | None) -> int | None:
    """A timeout in seconds as ``poll`` takes it: whole milliseconds, rounded up (a wait
    never ends before its time), never negative; None waits for ever.

    Example:
        >>> poll_ms(0.0001), poll_ms(-1.0), poll_ms(None)
        (1, 0, None)
    """
    return None if timeout_s is None else max(0, math.ceil(timeout_s * 1000))


class WakeSocket:
    """An abstract-namespace datagram socket that only ever carries wake-up bytes."""

    __slots__ = ("address", "poller", "sock")

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        self.sock.bind("")  # Linux autobind: a unique abstract name, no file to clean up
        self.sock.setblocking(False)
        self.address: bytes = self.sock.getsockname()
        # poll, not select: a process with 1024 descriptors open would make select refuse
        self.poller = select.poll()
        self.poller.register(self.sock, select.POLLIN)

    def wait(self, timeout_s: float) -> bool:
        """Block up to ``timeout_s`` for a wake-up; True if one is pending."""
        return bool(self.poller.poll(poll_ms(timeout_s)))

    def drain(self) -> None:
        """Consume the pending wake-ups."""
        with contextlib.suppress(BlockingIOError):
            while True:
                self.sock.recv(64)

    def wake(self, address: bytes) -> None:
        """Send one wake-up; a full queue (one is pending already) or a gone peer is fine."""
        try:
            self.sock.sendto(b"!", address)
        except OSError as error:
            if error.errno not in (errno.EAGAIN, errno.ECONNREFUSED, errno.ENOENT):
                raise

    def fileno(self) -> int:
        return self.sock.fileno()

    def close(self) -> None:
        self.sock.close()


class FileLock:
    """``flock`` on one open file description, with a deadline instead of an endless block."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    @contextlib.contextmanager
    def held(self, deadline: float, what: str) -> Iterator[None]:
        """Hold the lock for the block; ``CommError`` if it cannot be had by ``deadline``."""
        self.acquire(deadline, what)
        try:
            yield
        finally:
            self.release()

    def release(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)

    def acquire(self, deadline: float, what: str) -> None:
        """Take the lock; ``CommTimeoutError`` if it cannot be had by ``deadline``."""
        pause, yields = 1e-5, _LOCK_YIELDS
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise CommTimeoutError(
                        f"the lock of {what} was held by another process past the deadline"
                    ) from None
                if yields:  # a holder preempted on this core runs now; elsewhere it is done soon
                    yields -= 1
                    os.sched_yield()
                    continue
                time.sleep(pause)  # then back off, never spin
                pause = min(pause * 2, 1e-3)

"""Payload files: a magic prefix, then exactly the bytes ``serialize`` returns.

Writing goes to a temporary file beside the target, renamed over it once complete, so a
reader never sees half a file. Reading takes the whole file into one private buffer; decoded
tensors are views of that buffer (nobody else holds it, so no further copy is needed), which
therefore stays in memory while any of them lives. I/O errors keep their OSError type and
name the path.

Example:
    >>> import os, tempfile
    >>> from dtorch.ir.span import Span
    >>> path = os.path.join(tempfile.mkdtemp(), "span.dtorch")
    >>> serialize_to_file(Span("m.py", 3, 1), path)
    >>> deserialize_from_file(path)
    m.py:3:1
    >>> os.remove(path); os.rmdir(os.path.dirname(path))
"""

from __future__ import annotations

import io
import os
import stat
import tempfile
from typing import Any

from dtorch.errors import DeserializationError
from dtorch.serialization.reader import deserialize_value
from dtorch.serialization.wire import HEADER_SIZE, checked_header
from dtorch.serialization.writer import serialize_value

#: The first bytes of every dtorch file (PNG style: a high byte and a newline catch files
#: mangled as text).
FILE_MAGIC = b"\x89DTORCH\n"

PathLike = str | os.PathLike[str]


def _io_error(exc: OSError, action: str, path: PathLike) -> OSError:
    error = type(exc)(
        exc.errno, f"cannot {action} dtorch file {os.fspath(path)!r}: {exc.strerror or exc}"
    )
    error.filename = os.fspath(path)
    return error


def open_regular(path: PathLike, what: str) -> io.BufferedReader:
    """``path`` opened for reading if it is a regular file, else DeserializationError naming
    ``what`` (the kind of file expected). Opened without blocking, then checked: opening a
    named pipe for reading waits for a writer, for ever if none comes.

    Example:
        >>> import os
        >>> open_regular(os.curdir, "a dtorch file")
        Traceback (most recent call last):
        dtorch.errors.DeserializationError: '.' is a directory; expected a dtorch file
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        check_regular(os.fstat(fd), path, what)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def check_regular(status: os.stat_result, path: PathLike, what: str) -> None:
    """DeserializationError unless ``status`` (of ``path``) is a regular file's."""
    if not stat.S_ISREG(status.st_mode):
        kind = "a directory" if stat.S_ISDIR(status.st_mode) else "not a regular file"
        raise DeserializationError(f"{os.fspath(path)!r} is {kind}; expected {what}")


def serialize_to_file(obj: Any, path: PathLike) -> None:
    """Write ``obj`` to ``path`` (replacing it atomically); see ``serialize`` for ``obj``.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "x.dtorch")
        >>> serialize_to_file([1, "two"], path); deserialize_from_file(path)
        [1, 'two']
        >>> os.remove(path); os.rmdir(os.path.dirname(path))
    """
    payload = serialize_value(obj)
    target = os.fspath(path)
    try:
        handle, temporary = tempfile.mkstemp(
            prefix=".dtorch-", dir=os.path.dirname(os.path.abspath(target))
        )
    except OSError as exc:
        raise _io_error(exc, "write", path) from exc
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(FILE_MAGIC)
            out.write(payload)
        os.replace(temporary, target)
    except OSError as exc:
        os.unlink(temporary)
        raise _io_error(exc, "write", path) from exc


def available_memory() -> int | None:
    """The bytes this machine can still hand out without swapping (``MemAvailable`` of
    ``/proc/meminfo``, else the physical memory), or None where neither is known: a bound
    for what a file may make this process allocate.

    Example:
        >>> (available_memory() or 1) > 0
        True
    """
    try:
        with open("/proc/meminfo", "rb") as info:
            for line in info:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def check_room(need: int, what: str) -> None:
    """DeserializationError when ``need`` bytes (for ``what``) exceed ``available_memory``:
    a file's sizes are data, and allocating them unchecked would end in the kernel's
    out-of-memory killer, not an error."""
    room = available_memory()
    if room is not None and need > room:
        raise DeserializationError(
            f"{what} would take {need:,} bytes of memory; this machine has {room:,} available"
        )


def deserialize_from_file(path: PathLike) -> Any:
    """The value stored at ``path`` by ``serialize_to_file``.

    A file that does not start with the dtorch magic is refused with DeserializationError;
    the payload after it is read as ``deserialize`` reads bytes.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "x.dtorch")
        >>> serialize_to_file({"k": (1.5,)}, path); deserialize_from_file(path)
        {'k': (1.5,)}
        >>> os.remove(path); os.rmdir(os.path.dirname(path))
    """
    try:
        with open_regular(path, "a dtorch file (dtorch.serialize_to_file)") as source:
            magic = source.read(len(FILE_MAGIC))
            _check_magic(magic, path)
            size = os.fstat(source.fileno()).st_size - len(FILE_MAGIC)
            head = source.read(HEADER_SIZE)
            _checked_head(head, size, path)  # the sizes it declares, before any is held
            check_room(size, f"{os.fspath(path)!r}: its payload")
            buffer = bytearray(size)
            buffer[:HEADER_SIZE] = head
            got = HEADER_SIZE + source.readinto(memoryview(buffer)[HEADER_SIZE:])
    except OSError as exc:
        raise _io_error(exc, "read", path) from exc
    if got != len(buffer):
        raise DeserializationError(f"{os.fspath(path)!r} changed size while being read")
    try:
        return deserialize_value(buffer, alias_tensors=True)
    except DeserializationError as exc:
        raise type(exc)(f"{os.fspath(path)!r}: {exc}") from None


def _checked_head(head: bytes, size: int, path: PathLike) -> None:
    try:
        checked_header(head, size)
    except DeserializationError as exc:
        raise type(exc)(f"{os.fspath(path)!r}: {exc}") from None


def _check_magic(magic: bytes, path: PathLike) -> None:
    if magic != FILE_MAGIC:
        raise DeserializationError(
            f"{os.fspath(path)!r} is not a dtorch file: it starts with {magic!r}, expected "
            f"{FILE_MAGIC!r} (files written by dtorch.serialize_to_file)"
        )

"""IpcDirectory: where the controller's unix sockets live, and how they are kept private.

An ``ipc://`` socket is a file. Its directory is made with ``tempfile.mkdtemp`` (mode 0700,
owned by this user), so only processes of this user can reach a socket in it: that is how the
IPC sockets are authenticated (zmq itself checks nothing on ipc). Every address has a random
suffix, so two sockets never share a path: libzmq's ipc bind silently unlinks an existing
socket file of the same path and takes the address over. libzmq leaves the socket file
behind when its socket closes; ``close`` removes the directory with every file in it, and a
``weakref.finalize`` does the same when the object is collected or the interpreter exits (in
the process that made it: not in a child made by ``os.fork``).

Example:
    >>> ipc = IpcDirectory()
    >>> address = ipc.address("publisher")
    >>> address.startswith("ipc://" + ipc.path + "/publisher-") and address.endswith(".sock")
    True
    >>> oct(os.stat(ipc.path).st_mode & 0o777)
    '0o700'
    >>> ipc.close(); os.path.exists(ipc.path)
    False
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import tempfile
import weakref

from dtorch.errors import TransportError

#: A unix socket path holds at most this many bytes (``sun_path`` is 108, with the final NUL).
MAX_SOCKET_PATH = 107
_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def _remove(path: str, owner_pid: int) -> None:
    if os.getpid() == owner_pid:  # a child made by os.fork leaves its parent's sockets alone
        shutil.rmtree(path, ignore_errors=True)


class IpcDirectory:
    """A private directory for ipc socket files; see the module docstring.

    ``parent`` is the directory to make it in (default: ``tempfile.gettempdir()``).
    """

    __slots__ = ("__weakref__", "_finalizer", "_path")

    def __init__(self, parent: str | None = None) -> None:
        self._path = tempfile.mkdtemp(prefix="dtorch-ipc-", dir=parent)
        self._finalizer = weakref.finalize(self, _remove, self._path, os.getpid())

    def __repr__(self) -> str:
        return f"IpcDirectory({self._path!r}{', closed' if self.closed else ''})"

    def __enter__(self) -> IpcDirectory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def path(self) -> str:
        """The directory's path."""
        return self._path

    @property
    def closed(self) -> bool:
        """Whether the directory has been removed."""
        return not self._finalizer.alive

    def address(self, name: str) -> str:
        """A fresh ``ipc://<path>/<name>-<random>.sock`` address in this directory.

        ``name`` (letters, digits, ``_.-``) says what the socket is for. TransportError if the
        path would exceed the 107 bytes a unix socket path holds (choose a shorter name or a
        shorter TMPDIR), or if the directory is closed.

        Example:
            >>> with IpcDirectory() as ipc:
            ...     ipc.address("pull") != ipc.address("pull")
            True
        """
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise TransportError(f"an ipc socket name is letters, digits and '_.-', got {name!r}")
        if self.closed:
            raise TransportError(f"{self!r} is closed: no new addresses in it")
        path = os.path.join(self._path, f"{name}-{secrets.token_hex(4)}.sock")
        size = len(os.fsencode(path))
        if size > MAX_SOCKET_PATH:
            raise TransportError(
                f"the ipc socket path {path!r} is {size} bytes; a unix socket path holds at most "
                f"{MAX_SOCKET_PATH}: use a shorter name or a shorter temp dir (TMPDIR)"
            )
        return f"ipc://{path}"

    def close(self) -> None:
        """Remove the directory and every socket file in it; idempotent."""
        self._finalizer()

"""IpcDirectory: private (0700), unique addresses within the unix path limit, and removed on
close, on garbage collection and at interpreter exit, socket files included."""

from __future__ import annotations

import gc
import os
import stat
import subprocess
import sys
import tempfile

import pytest

from dtorch.errors import TransportError
from dtorch.transport import IpcDirectory, Puller
from dtorch.transport.ipc import MAX_SOCKET_PATH

pytestmark = pytest.mark.timeout(60)


def test_private_directory_in_the_temp_dir(ipc):
    info = os.stat(ipc.path)
    assert stat.S_IMODE(info.st_mode) == 0o700
    assert info.st_uid == os.getuid()
    assert os.path.dirname(ipc.path) == tempfile.gettempdir()
    assert os.path.basename(ipc.path).startswith("dtorch-ipc-")


def test_addresses_are_unique_and_well_formed(ipc):
    addresses = {ipc.address("pub") for _ in range(100)}
    assert len(addresses) == 100
    for address in addresses:
        assert address.startswith(f"ipc://{ipc.path}/pub-") and address.endswith(".sock")


@pytest.mark.parametrize("name", ["", "a/b", "../up", "sp ace", 3])
def test_bad_names_are_refused(ipc, name):
    with pytest.raises(TransportError, match="letters, digits"):
        ipc.address(name)


def test_too_long_a_path_is_refused_clearly(ipc):
    room = MAX_SOCKET_PATH - len(os.fsencode(ipc.path)) - len("/-12345678.sock")
    assert len(ipc.address("n" * room)) == len("ipc://") + MAX_SOCKET_PATH
    with pytest.raises(TransportError, match=r"is 108 bytes; a unix socket path holds at most 107"):
        ipc.address("n" * (room + 1))


def test_close_removes_the_directory_and_its_socket_files():
    ipc = IpcDirectory()
    Puller(ipc.address("pull")).close()
    assert os.listdir(ipc.path)  # libzmq left the socket file
    ipc.close()
    ipc.close()
    assert ipc.closed and not os.path.exists(ipc.path)
    with pytest.raises(TransportError, match="closed"):
        ipc.address("late")


def test_a_collected_directory_is_removed():
    ipc = IpcDirectory()
    path = ipc.path
    del ipc
    gc.collect()
    assert not os.path.exists(path)


def test_a_directory_left_open_is_removed_at_exit():
    code = "from dtorch.transport.ipc import IpcDirectory; d = IpcDirectory(); print(d.path)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    path = done.stdout.strip()
    assert path.startswith(os.path.join(tempfile.gettempdir(), "dtorch-ipc-"))
    assert not os.path.exists(path)


def test_parent_directory(tmp_path):
    with IpcDirectory(parent=str(tmp_path)) as ipc:
        assert os.path.dirname(ipc.path) == str(tmp_path)
    assert os.listdir(tmp_path) == []

"""This machine's TCP sockets as the kernel lists them (/proc/net/tcp and tcp6): what tests
read to prove a port is listened on only where it should be, or closed with its connections."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

#: The kernel's state codes the tests ask about.
LISTEN, ESTABLISHED = "0A", "01"


class TcpSocket(NamedTuple):
    local_address: str  # hex, as the kernel writes it (127.0.0.2 is 0200007F)
    local_port: int
    remote_port: int
    state: str
    inode: int  # the socket's inode: /proc/<pid>/fd links name it (``own_inodes``)


def tcp_sockets() -> list[TcpSocket]:
    """Every TCP socket of the machine, IPv4 and IPv6."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as file:
            for line in file.readlines()[1:]:
                fields = line.split()
                local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
                address, port = local.split(":")
                remote_port = int(remote.split(":")[1], 16)
                found.append(TcpSocket(address, int(port, 16), remote_port, state, int(inode)))
    return found


def own_inodes(pid: int | None = None) -> set[int]:
    """The inodes of this process's sockets (of process ``pid``'s, if given): sockets of other
    processes (another test's listener on 127.0.0.3 may get the same port number) are not
    this test's."""
    found = set()
    for fd in Path(f"/proc/{pid or 'self'}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            found.add(int(target[len("socket:[") : -1]))
    return found

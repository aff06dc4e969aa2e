"""This machine's TCP sockets as the kernel lists them (/proc/net/tcp and tcp6): what tests
read to prove a port is listened on only where it should be, or closed with its connections."""

from __future__ import annotations

from typing import NamedTuple

#: The kernel's state codes the tests ask about.
LISTEN, ESTABLISHED = "0A", "01"


class TcpSocket(NamedTuple):
    local_address: str  # hex, as the kernel writes it (127.0.0.2 is 0200007F)
    local_port: int
    remote_port: int
    state: str


def tcp_sockets() -> list[TcpSocket]:
    """Every TCP socket of the machine, IPv4 and IPv6."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as file:
            for line in file.readlines()[1:]:
                local, remote, state = line.split()[1:4]
                address, port = local.split(":")
                remote_port = int(remote.split(":")[1], 16)
                found.append(TcpSocket(address, int(port, 16), remote_port, state))
    return found

"""What one spawned process does in the multi-host group tests: a caller posing as a host.

Each process plays one caller on a simulated host (a loopback address, 127.0.0.2 or
127.0.0.3): its ThreadGroupManager binds that address and meets the other callers through the
test's ``TCPStore`` (served on 127.0.0.1), or through FileStore files when the job names no
store. ``run_host_job`` returns, per group, the backend chosen, the outputs of its calls, and
the addresses of the TCP listeners the process opened for the group (``listening_addresses``).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch

from dtorch.comm.namespace import CommNamespace

#: The calls of one group: (collective, keyword arguments, {rank: input} of the held ranks).
Calls = list[tuple[str, dict[str, Any], dict[int, torch.Tensor]]]


@dataclass
class HostJob:
    """One caller: its devices, its host, the groups it creates and the calls it makes."""

    namespace: CommNamespace
    callers: list[list[int]]  # device ids per caller (process)
    hosts: list[int]  # the host index of each caller
    caller: int  # which caller this process is
    host_address: str | None  # the address it binds (None: the manager's default)
    store_port: int | None  # the test's TCPStore on 127.0.0.1 (None: FileStore files)
    groups: list[tuple[list[int], Calls]] = field(default_factory=list)  # (device ids, calls)
    rendezvous_dir: str | None = None
    timeout_s: float = 20.0
    ready_file: str | None = None  # created once the groups exist (a caller killed on purpose)
    linger_s: float = 0.0  # sleep after the calls, before closing


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # an fd closed meanwhile
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    return inodes


def _ipv4(hex_address: str) -> str:
    packed = bytes.fromhex(hex_address)
    return ".".join(str(b) for b in reversed(packed))


def listening_addresses(pid: int) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket of process ``pid`` in the LISTEN state (IPv6
    listeners are reported by their hex address: no test here expects one)."""
    inodes, found = _socket_inodes(pid), set()
    for table, decode in (("tcp", _ipv4), ("tcp6", str)):
        with open(f"/proc/{pid}/net/{table}") as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and inode in inodes:  # 0A: TCP_LISTEN
                    address, port = local.split(":")
                    found.add((decode(address), int(port, 16)))
    return found


@contextlib.contextmanager
def _manager(job: HostJob) -> Iterator[Any]:
    import torch.distributed as dist

    from dtorch.comm.group import CommTopology, ThreadGroupManager
    from dtorch.options import GlobalOption

    store = None
    if job.store_port is not None:
        timeout = timedelta(seconds=job.timeout_s)
        store = dist.TCPStore("127.0.0.1", job.store_port, is_master=False, timeout=timeout)
    topology = CommTopology.processes_holding(job.callers, hosts=job.hosts)
    manager = ThreadGroupManager(
        topology,
        namespace=job.namespace,
        rendezvous_dir=job.rendezvous_dir,
        rendezvous_store=store,
        host_address=job.host_address,
    )
    with GlobalOption.override(comm_timeout_second=job.timeout_s), manager:
        yield manager


def run_host_job(job: HostJob) -> list[tuple[str, list[Any], set[tuple[str, int]]]]:
    """Run ``job``: per group it takes part in, (backend kind, outputs, new listeners)."""
    from group_harness import COLLECTIVES

    mine = set(job.callers[job.caller])
    results = []
    with _manager(job) as manager:
        for device_ids, calls in job.groups:
            if not mine & set(device_ids):
                continue
            before = listening_addresses(os.getpid())
            group = manager.get_group("cpu", device_ids, mine)
            outputs = [COLLECTIVES[name](group, inputs, **kw) for name, kw, inputs in calls]
            opened = listening_addresses(os.getpid()) - before
            results.append((group.backend_kind.value, outputs, opened))
        if job.ready_file is not None:
            Path(job.ready_file).touch()
        time.sleep(job.linger_s)
    return results


def failure_of_host_job(job: HostJob, hold_s: float) -> tuple[str, str, float, float]:
    """Run the calls of ``job``'s one group until one fails: the error's class name and
    message, the moment it came and the moment the manager was closed (CLOCK_MONOTONIC); the
    group stays open ``hold_s`` after the error."""
    from group_harness import COLLECTIVES

    from dtorch.errors import CommError

    ((device_ids, calls),) = job.groups
    kind, message, at = "no error", "", 0.0
    with _manager(job) as manager:
        group = manager.get_group("cpu", device_ids, job.callers[job.caller])
        try:
            for name, kw, inputs in calls:
                COLLECTIVES[name](group, inputs, **kw)
        except CommError as error:
            kind, message, at = type(error).__name__, str(error), time.monotonic()
            time.sleep(hold_s)
    return kind, message, at, time.monotonic()

"""Who holds which devices, and which backend a group gets from that (spec 2.1: by topology).

A runner lays its devices out over *callers*: threads of one process (thread mode, possibly
several logical devices per thread) or processes (process mode). ``CommTopology`` is that
layout as data; every caller of a program builds its ThreadGroupManager from the same one, so
all callers agree on each group's backend and store participants without communicating.

Backend choice for one group, from the callers that hold its devices:

* one caller holds every rank -> the same-device backend with no store (direct compute);
* callers are threads of this process -> the same-device backend over a memory store;
* processes, one rank each, CPU (or CUDA on separate GPUs) -> torch.distributed (Gloo / NCCL);
* processes holding several ranks, or CUDA ranks sharing one GPU
  (``DTORCH_DTENSOR_IN_SAME_DEVICE``) -> the same-device backend over a file store.

Hosts: each caller sits on a host (``hosts``: an index per caller, all 0 by default: one
machine). A group whose callers span hosts has no shared files or memory, so it gets
torch.distributed when every caller holds one rank (Gloo / NCCL connect over TCP), else the
same-device backend over the network store (``STORE_NETWORK``); a group whose callers all sit on
one host keeps the choice above.

Gloo authenticates nobody: whoever reaches a rank's interface can connect to its listener.
``cpu_gloo=False`` keeps CPU groups of processes off it: a group on one host then runs over the
file store's shared memory, a group spanning hosts over the network store (HMAC on every
message, a password at the handshake). A cluster's workers take that by default
(``dtorch.cluster.MainNode.set_address(..., cpu_collectives=)``); CUDA groups keep NCCL.

Example:
    >>> topology = CommTopology.threads([[0, 2], [1, 3]])
    >>> topology.group_callers((0, 1, 2))
    ((0, 2), (1,))
    >>> choose_backend(topology, "cpu", ((0, 2), (1,)))
    <BackendKind.STORE_MEMORY: 'store_memory'>
    >>> choose_backend(CommTopology.one_device_per_process([0, 1]), "cpu", ((0,), (1,)))
    <BackendKind.TORCH_DISTRIBUTED: 'torch_distributed'>
    >>> two_hosts = CommTopology.processes_holding([[0, 1], [2, 3]], hosts=[0, 1])
    >>> ids = (0, 1, 2, 3)
    >>> callers, hosts = two_hosts.group_callers(ids), two_hosts.group_hosts(ids)
    >>> choose_backend(two_hosts, "cpu", callers, hosts)
    <BackendKind.STORE_NETWORK: 'store_network'>
    >>> no_gloo = CommTopology.one_device_per_process([0, 1], cpu_gloo=False)
    >>> choose_backend(no_gloo, "cpu", ((0,), (1,)))
    <BackendKind.STORE_FILE: 'store_file'>
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dtorch.errors import CommError
from dtorch.options import GlobalOption


class BackendKind(enum.Enum):
    """The backends a group can run on."""

    TORCH_DISTRIBUTED = "torch_distributed"
    STORE_MEMORY = "store_memory"
    STORE_FILE = "store_file"
    STORE_NETWORK = "store_network"


@dataclass(frozen=True, slots=True)
class CommTopology:
    """The device ids each caller holds; ``processes`` when callers are separate processes;
    ``hosts`` the host index of each caller (empty: every caller on host 0); ``cpu_gloo``
    whether CPU groups of one-rank processes may run on Gloo (see the module doc)."""

    callers: tuple[tuple[int, ...], ...]
    processes: bool = False
    stride: int = 0  # > 0: caller i holds every device d with d % stride == i (open-ended)
    hosts: tuple[int, ...] = ()
    cpu_gloo: bool = True

    def __post_init__(self) -> None:
        self._check_hosts()
        if self.stride:
            if self.callers or self.stride < 1:
                raise CommError("CommTopology: a striped layout has a positive stride, no lists")
            return
        self._check_callers()

    def _check_hosts(self) -> None:
        if not self.hosts:
            return
        count = self.stride or len(self.callers)
        bad = [h for h in self.hosts if isinstance(h, bool) or not isinstance(h, int) or h < 0]
        if bad or len(self.hosts) != count:
            raise CommError(
                f"CommTopology: hosts are one int >= 0 per caller ({count}), got {self.hosts}"
            )
        if not self.processes and len(set(self.hosts)) > 1:
            raise CommError("CommTopology: threads of one process sit on one host")

    def _check_callers(self) -> None:
        seen: set[int] = set()
        for caller in self.callers:
            if not caller:
                raise CommError(f"CommTopology: every caller holds a device, got {self.callers}")
            for device in caller:
                if isinstance(device, bool) or not isinstance(device, int) or device < 0:
                    raise CommError(f"CommTopology: device ids are ints >= 0, got {device!r}")
                if device in seen:
                    raise CommError(f"CommTopology: device {device} is held by two callers")
                seen.add(device)

    @classmethod
    def threads(cls, callers: Iterable[Iterable[int]]) -> CommTopology:
        """Callers are threads of this process, each holding the listed devices."""
        return cls(tuple(tuple(c) for c in callers), processes=False)

    @classmethod
    def processes_holding(
        cls, callers: Iterable[Iterable[int]], *, hosts: Iterable[int] = (), cpu_gloo: bool = True
    ) -> CommTopology:
        """Callers are processes, each holding the listed devices; caller i sits on host
        ``hosts[i]`` (default: all on this machine)."""
        layout = tuple(tuple(c) for c in callers)
        return cls(layout, processes=True, hosts=tuple(hosts), cpu_gloo=cpu_gloo)

    @classmethod
    def striped(
        cls,
        num_callers: int,
        *,
        processes: bool = False,
        hosts: Iterable[int] = (),
        cpu_gloo: bool = True,
    ) -> CommTopology:
        """Logical devices of any id: caller ``d % num_callers`` holds ``d``. The callers are
        threads of this process (thread mode), or processes (a worker pool) with
        ``processes=True``, caller i on host ``hosts[i]``.

        Example:
            >>> CommTopology.striped(2).group_callers((4, 5, 6))
            ((0, 2), (1,))
            >>> CommTopology.striped(4, processes=True, hosts=[0, 0, 1, 1]).host_of(2)
            1
        """
        return cls((), processes, num_callers, tuple(hosts), cpu_gloo)

    @classmethod
    def one_device_per_process(
        cls, device_ids: Iterable[int], *, hosts: Iterable[int] = (), cpu_gloo: bool = True
    ) -> CommTopology:
        """Process mode: one worker process per device (process i on host ``hosts[i]``)."""
        return cls.processes_holding([[d] for d in device_ids], hosts=hosts, cpu_gloo=cpu_gloo)

    def host_of(self, caller: int) -> int:
        """The host index of caller ``caller`` (0 when the topology names no hosts)."""
        return self.hosts[caller] if self.hosts else 0

    def group_callers(self, device_ids: Sequence[int]) -> tuple[tuple[int, ...], ...]:
        """The ranks of ``device_ids`` each caller holds, callers ordered by their first rank."""
        return tuple(ranks for _, ranks in self._group_parts(device_ids))

    def group_hosts(self, device_ids: Sequence[int]) -> tuple[int, ...]:
        """The host of each caller of the group, in ``group_callers`` order.

        Example:
            >>> CommTopology.processes_holding([[5], [6], [7]], hosts=[1, 0, 1]).group_hosts([7, 6])
            (1, 0)
        """
        return tuple(self.host_of(caller) for caller, _ in self._group_parts(device_ids))

    def _group_parts(self, device_ids: Sequence[int]) -> list[tuple[int, tuple[int, ...]]]:
        """(caller index, ranks held) for every caller of the group, by first rank."""
        if self.stride:
            owner = {d: d % self.stride for d in device_ids}
        else:
            owner = {d: i for i, caller in enumerate(self.callers) for d in caller}
        stray = [d for d in device_ids if d not in owner]
        if stray:
            raise CommError(
                f"devices {stray} of group {list(device_ids)} are held by no caller of the "
                f"topology (callers: {[list(c) for c in self.callers]})"
            )
        parts: dict[int, list[int]] = {}
        for rank, device in enumerate(device_ids):
            parts.setdefault(owner[device], []).append(rank)
        return sorted(((c, tuple(p)) for c, p in parts.items()), key=lambda part: part[1])


def choose_backend(
    topology: CommTopology,
    device_kind: str,
    callers: tuple[tuple[int, ...], ...],
    hosts: Sequence[int] = (),
) -> BackendKind:
    """The backend of a group whose ranks the ``callers`` hold, caller i on host ``hosts[i]``
    (``topology.group_hosts``; empty: one host); see the module doc."""
    if not topology.processes or len(callers) == 1:
        return BackendKind.STORE_MEMORY
    if device_kind == "cpu" and not topology.cpu_gloo:  # no unauthenticated listener
        return BackendKind.STORE_NETWORK if len(set(hosts)) > 1 else BackendKind.STORE_FILE
    if len(set(hosts)) > 1:
        return _across_hosts(device_kind, callers)
    if device_kind == "cuda" and GlobalOption.get_dtensor_in_same_device():
        return BackendKind.STORE_FILE
    if all(len(c) == 1 for c in callers):
        return BackendKind.TORCH_DISTRIBUTED
    return BackendKind.STORE_FILE


def _across_hosts(device_kind: str, callers: tuple[tuple[int, ...], ...]) -> BackendKind:
    # ranks sharing a GPU cannot each have their own NCCL rank: they go through the store
    if device_kind == "cuda" and GlobalOption.get_dtensor_in_same_device():
        return BackendKind.STORE_NETWORK
    if all(len(c) == 1 for c in callers):
        return BackendKind.TORCH_DISTRIBUTED
    return BackendKind.STORE_NETWORK

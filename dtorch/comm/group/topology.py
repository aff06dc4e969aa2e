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

Example:
    >>> topology = CommTopology.threads([[0, 2], [1, 3]])
    >>> topology.group_callers((0, 1, 2))
    ((0, 2), (1,))
    >>> choose_backend(topology, "cpu", ((0, 2), (1,)))
    <BackendKind.STORE_MEMORY: 'store_memory'>
    >>> choose_backend(CommTopology.one_device_per_process([0, 1]), "cpu", ((0,), (1,)))
    <BackendKind.TORCH_DISTRIBUTED: 'torch_distributed'>
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


@dataclass(frozen=True, slots=True)
class CommTopology:
    """The device ids each caller holds; ``processes`` when callers are separate processes."""

    callers: tuple[tuple[int, ...], ...]
    processes: bool = False
    stride: int = 0  # > 0: caller i holds every device d with d % stride == i (open-ended)

    def __post_init__(self) -> None:
        if self.stride:
            if self.callers or self.stride < 1:
                raise CommError("CommTopology: a striped layout has a positive stride, no lists")
            return
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
    def processes_holding(cls, callers: Iterable[Iterable[int]]) -> CommTopology:
        """Callers are processes of this machine, each holding the listed devices."""
        return cls(tuple(tuple(c) for c in callers), processes=True)

    @classmethod
    def striped(cls, num_callers: int, *, processes: bool = False) -> CommTopology:
        """Logical devices of any id: caller ``d % num_callers`` holds ``d``. The callers are
        threads of this process (thread mode), or processes (a worker pool) with
        ``processes=True``.

        Example:
            >>> CommTopology.striped(2).group_callers((4, 5, 6))
            ((0, 2), (1,))
        """
        return cls((), processes=processes, stride=num_callers)

    @classmethod
    def one_device_per_process(cls, device_ids: Iterable[int]) -> CommTopology:
        """Process mode: one worker process per device."""
        return cls(tuple((d,) for d in device_ids), processes=True)

    def group_callers(self, device_ids: Sequence[int]) -> tuple[tuple[int, ...], ...]:
        """The ranks of ``device_ids`` each caller holds, callers ordered by their first rank."""
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
        return tuple(sorted(tuple(p) for p in parts.values()))


def choose_backend(
    topology: CommTopology, device_kind: str, callers: tuple[tuple[int, ...], ...]
) -> BackendKind:
    """The backend of a group whose ranks the ``callers`` hold (see the module doc)."""
    if not topology.processes or len(callers) == 1:
        return BackendKind.STORE_MEMORY
    if device_kind == "cuda" and GlobalOption.get_dtensor_in_same_device():
        return BackendKind.STORE_FILE
    if all(len(c) == 1 for c in callers):
        return BackendKind.TORCH_DISTRIBUTED
    return BackendKind.STORE_FILE

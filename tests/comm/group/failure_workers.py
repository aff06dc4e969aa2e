"""One caller failing in a collective, for the failure tests (threads and spawned processes).

``inject`` makes a caller's next collective on a group fail at one point of the exchange:
``publish`` (its ``src_set`` fails, as a shared-memory allocation can), ``read`` (its
``dest_get`` fails) or ``compute`` (allocating its outputs fails, after it received every peer's
tensor). Threads over the memory store meet in one ``combine`` for a small collective: there
``publish`` and ``read`` make the arrival fail, and ``compute`` makes the caller arrive last, so
that it is the one computing everyone's outputs. ``run_failure_job`` is one caller of such a
scenario as a pool job (file store across processes); ``run_gloo_scope_job`` one rank of a Gloo
group whose peer fails between collectives of a runtime scope.
"""

from __future__ import annotations

import errno
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

#: The points of an exchange where ``inject`` makes a caller fail.
POINTS = ("publish", "read", "compute")

#: What the injected failure says (every peer's error must carry it).
INJECTED = "Cannot allocate memory (injected)"


def injected_error(*args: Any, **kwargs: Any) -> Any:
    raise OSError(errno.ENOMEM, INJECTED)


def inject(group: Any, point: str) -> Callable[[], None]:
    """Make this caller's collectives on ``group`` fail at ``point``; returns the undo."""
    from dtorch.comm.store.memory import MemoryTensorStore

    backend = group._backend
    store = backend._store
    meets = isinstance(store, MemoryTensorStore)
    if point == "compute":
        empty = backend._empty
        backend._empty = injected_error
        if meets:
            store.combine = _arriving_last(store)
        return lambda: (setattr(backend, "_empty", empty), _undo(store, ["combine"] * meets))
    names = [{"publish": "src_set", "read": "dest_get_many"}[point]] + ["combine"] * meets
    for name in names:
        setattr(store, name, injected_error)  # an attribute of this participant only
    return lambda: _undo(store, names)


def _undo(store: Any, names: list[str]) -> None:
    for name in names:
        delattr(store, name)


def _arriving_last(store: Any) -> Callable[..., Any]:
    """``store.combine``, entered only once every other participant waits in the meeting."""
    real = store.combine

    def combine(key: str, tensors: Any, finish: Any) -> Any:
        wait_to_arrive_last(store, key)
        return real(key, tensors, finish)

    return combine


def wait_to_arrive_last(store: Any, key: str, timeout_s: float = 10.0) -> None:
    """Wait until every other participant of the memory ``store`` waits in ``key``'s meeting
    (at most ``timeout_s``; the caller's combine then goes on regardless)."""
    shared, deadline = store._state(), time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with shared.lock:
            meeting = shared.meetings.get(key)
            if meeting is not None and len(meeting.arrived) == store.world_size - 1:
                return
        time.sleep(0.001)


def leftovers(group: Any) -> list[str]:
    """The keys of the group's store still set, and this participant's segments in use (a
    network store's keys seen from its rank 0, which serves them)."""
    from dtorch.comm.store.base import Deadline
    from dtorch.comm.store.memory import MemoryTensorStore
    from dtorch.comm.store.network import NetworkTensorStore

    store = group._backend._store
    if isinstance(store, MemoryTensorStore):
        return list(store._state().slots) + list(store._state().meetings)
    if isinstance(store, NetworkTensorStore):
        assert store._coordinator is not None, "ask rank 0"
        return list(store._coordinator._slots)
    with store._txn(Deadline()) as state:
        keys = list(state.slots)
    return keys + [f"segment of {key}" for key in store._in_use]


def call(collective: str, group: Any, held: list[int], world: int) -> Any:
    """One collective of the scenarios, for the ranks ``held`` (the last rank fails)."""
    inputs = {r: torch.full((4,), float(r + 1)) for r in held}
    if collective == "all_gather":
        return group.all_gather(inputs, dim=0)
    if collective == "all_reduce":
        return group.all_reduce(inputs)
    if collective == "all_reduce_split":  # large: reduce-scatter, then all-gather
        return group.all_reduce({r: torch.full((1 << 18,), float(r + 1)) for r in held})
    src = world - 1 if collective == "broadcast_from_failing" else 0
    return group.broadcast(inputs, src=src)


def expected_output(collective: str, world: int) -> list[float]:
    """What ``call`` gives every rank, by torch on the full tensors (the scenarios' oracle for
    a caller that finished its collective although a peer failed)."""
    inputs = [torch.full((4,), float(r + 1)) for r in range(world)]
    if collective == "all_gather":
        return torch.cat(inputs).tolist()
    if collective == "all_reduce":
        return torch.stack(inputs).sum(0).tolist()
    if collective == "all_reduce_split":
        return torch.full((1 << 18,), float(sum(range(1, world + 1)))).tolist()
    return inputs[world - 1 if collective == "broadcast_from_failing" else 0].tolist()


def outputs(result: dict[int, torch.Tensor]) -> dict[int, list[float]]:
    return {r: t.tolist() for r, t in result.items()}


def gather_after(group: Any, held: list[int]) -> dict[int, list[float]]:
    """The collective that must work after the failure: an all-gather of each rank's id.
    Then the caller waits until its readers have finished with what it published (a file
    store drops such keys later, see ``release_exchange``), so that whatever the store still
    holds afterwards was left behind by the failure."""
    out = group.all_gather({r: torch.full((2,), float(r)) for r in held}, dim=0)
    store = group._backend._store
    if store is not None:
        store.flush()
    return {r: t.tolist() for r, t in out.items()}


@dataclass
class FailureJob:
    """One caller process: its ranks, whether it fails, where, in which collective."""

    namespace: str
    callers: list[list[int]]  # device ids per caller
    device_ids: list[int]
    held: list[int]
    collective: str
    point: str | None  # None: this caller does not fail
    timeout_s: float = 60.0


def run_failure_job(job: FailureJob) -> tuple[Any, ...]:
    """The caller's outcome (error class name and message, or "ok" and its outputs), how long
    the failed collective took, the all-gather after it, and what its store still holds at
    the end."""
    from dtorch.comm.group import CommTopology, ThreadGroupManager
    from dtorch.comm.namespace import CommNamespace
    from dtorch.options import GlobalOption

    world = len(job.device_ids)
    with (
        GlobalOption.override(comm_timeout_second=job.timeout_s),
        ThreadGroupManager(
            CommTopology.processes_holding(job.callers), namespace=CommNamespace(job.namespace)
        ) as manager,
    ):
        group = manager.get_group("cpu", job.device_ids, [job.device_ids[r] for r in job.held])
        undo = inject(group, job.point) if job.point else lambda: None
        start = time.monotonic()
        kind, message = "ok", ""
        try:
            message = str(outputs(call(job.collective, group, job.held, world)))
        except Exception as error:
            kind, message = type(error).__name__, str(error)
        elapsed = time.monotonic() - start
        undo()
        after = gather_after(group, job.held)
        group.barrier()  # every caller is done with the all-gather's keys
        return kind, message, elapsed, after, leftovers(group)


@dataclass
class GlooScopeJob:
    """One rank of a Gloo group; ``fail``: it fails in the runtime scope before the
    collective its peer waits in."""

    namespace: str
    device_ids: list[int]
    rank: int
    rendezvous_dir: str
    fail: bool
    timeout_s: float = 20.0


def run_gloo_scope_job(job: GlooScopeJob) -> dict[str, Any]:
    """Scope 1 fails (one rank raises before the all-reduce the other waits in); scope 2 is
    refused on the broken group; after ``reset`` (both ranks) scope 3's all-reduce works."""
    from dtorch.comm.group import BackendKind, CommTopology, ThreadGroupManager
    from dtorch.comm.namespace import CommNamespace
    from dtorch.options import GlobalOption

    found: dict[str, Any] = {}
    with (
        GlobalOption.override(comm_timeout_second=job.timeout_s),
        ThreadGroupManager(
            CommTopology.processes_holding([[d] for d in job.device_ids]),
            namespace=CommNamespace(job.namespace),
            backend=BackendKind.TORCH_DISTRIBUTED,
            rendezvous_dir=job.rendezvous_dir,
        ) as manager,
    ):
        group = manager.get_group("cpu", job.device_ids, [job.device_ids[job.rank]])
        ones = {job.rank: torch.ones(2)}
        start = time.monotonic()
        found["first"] = _outcome(manager, 1, lambda: _fail_or(job.fail, group, ones))
        found["elapsed"] = time.monotonic() - start
        found["refused"] = _outcome(manager, 2, lambda: group.all_reduce(ones))
        manager.reset()
        found["after"] = group.all_reduce(ones)[job.rank].tolist()
    return found


def _fail_or(fail: bool, group: Any, ones: dict[int, torch.Tensor]) -> Any:
    if fail:
        injected_error()
    return group.all_reduce(ones)


def _outcome(manager: Any, scope: int, body: Callable[[], Any]) -> tuple[str, str]:
    try:
        with manager.scope(scope):
            body()
    except Exception as error:
        return type(error).__name__, str(error)
    return "ok", ""

"""ThreadGroupManager: creates and caches each caller's ThreadGroups, destroys them in order.

A runner owns one manager (no module-level singleton) built from its ``CommTopology`` and the
program's ``CommNamespace``; one manager may serve all threads of a runner. Groups are keyed by
(device kind, device ids in rank order) - any number of devices - and the caller is named by
the devices it holds (``local_device_ids``; devices outside the group are ignored), so each
caller gets its own handle on a shared group. Creating a group is a rendezvous with the group's
other callers (a store's construction barrier, or a process group's connect), so every caller
of a group must create it; the lock is never held while waiting. ``close()`` destroys every
group in one deterministic order (sorted keys), the same in every process, so collective
libraries that tear down collectively (NCCL) never deadlock.

Scopes: the runtime runs each group kernel in ``scope(operator id, on_failure)``; the groups
name their exchanges after the calling thread's scope. When a collective of the scope fails
on this caller, or the kernel raises anywhere inside it, ``fail_scope`` calls ``on_failure``
(the runtime records the failure, so a peer that hears of it finds the record) and aborts the
scope on every group of the manager, so peers waiting for this caller in any collective of
the operator stop within a second instead of at the comm timeout. ``reset()`` repairs every
group once every caller is idle (a worker handed to a new graph); scope names carry the
number of resets so far, so nothing of an earlier graph's scopes can reach a later one.

Rendezvous: on one machine, in FileStore files of ``rendezvous_dir``; with a
``rendezvous_store`` (a c10d store every host reaches, e.g. a client of the controller's
rendezvous store), under one prefix per group in it, which groups spanning hosts need. The
caller's listeners (Gloo, the network store's rank 0) bind ``host_address``, loopback by
default.

Example:
    >>> import torch
    >>> manager = ThreadGroupManager(CommTopology.threads([[0, 1, 2, 3]]))
    >>> group = manager.get_group("cpu", [2, 3], [0, 1, 2, 3])
    >>> group.ranks, manager.get_group("cpu", (2, 3), [2, 3]) is group
    ((0, 1), True)
    >>> manager.close()
"""

from __future__ import annotations

import contextlib
import hashlib
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from types import TracebackType
from typing import Any

from dtorch.comm.group.backend import GroupBackend, GroupInfo
from dtorch.comm.group.buffers import BufferPool
from dtorch.comm.group.group import ThreadGroup
from dtorch.comm.group.rendezvous import LOOPBACK, GroupRendezvous, open_network_store
from dtorch.comm.group.same_device import SameDeviceBackend, StoreOpener
from dtorch.comm.group.topology import BackendKind, CommTopology, choose_backend
from dtorch.comm.group.torch_dist import TorchDistBackend
from dtorch.comm.namespace import CommNamespace
from dtorch.comm.store import StoreKind, TensorStore, open_store
from dtorch.errors import CommError
from dtorch.ir.device import check_device_kind
from dtorch.options import GlobalOption

#: (device kind, device ids in rank order): the identity of a group.
GroupKey = tuple[str, tuple[int, ...]]

_Callers = tuple[tuple[int, ...], ...]

#: What a scope's failure is told as: ``on_failure(error) -> message`` (the runtime records it).
FailureHook = Callable[[BaseException], str]


@dataclass(slots=True)
class _Scope:
    """The calling thread's scope: its name, its failure hook, and its message once failed."""

    name: str
    on_failure: FailureHook | None
    failed: str | None = None


def group_name(key: GroupKey) -> str:
    """A short, file-name-safe name of a group (its ids hashed: groups may be large)."""
    kind, ids = key
    digest = hashlib.blake2b(",".join(map(str, ids)).encode(), digest_size=8).hexdigest()
    return f"group-{kind}-{len(ids)}-{digest}"


class ThreadGroupManager:
    """Creates, caches and destroys ThreadGroups for the callers of one runner.

    ``topology`` is the runner's device layout; ``namespace`` keeps two programs apart (it is
    required in process mode, where every process must pass the program's namespace);
    ``backend`` forces one backend for every group of more than one caller (tests,
    benchmarks); ``rendezvous_dir`` holds the torch.distributed FileStore files (default: the
    system temp dir); ``rendezvous_store`` (any ``torch.distributed.Store`` shared by every
    caller) replaces those files, and is needed by groups whose callers sit on different
    hosts; ``host_address`` is the interface of this caller's host that its listeners bind.
    """

    def __init__(
        self,
        topology: CommTopology,
        *,
        namespace: CommNamespace | None = None,
        backend: BackendKind | None = None,
        rendezvous_dir: str | None = None,
        rendezvous_store: Any = None,
        host_address: str | None = None,
    ) -> None:
        if namespace is None and topology.processes:
            raise CommError(
                "ThreadGroupManager: process topologies need the program's CommNamespace "
                "(every process must pass the same one)"
            )
        self._topology = topology
        self._namespace = namespace or CommNamespace.of_process()
        self._backend = backend
        self._rendezvous_dir = rendezvous_dir or tempfile.gettempdir()
        self._rendezvous_store = rendezvous_store
        self._host = host_address or LOOPBACK
        #: Recycled memory for large collective outputs (and the Convert kernel's), shared by
        #: every caller of this manager; cleared by close().
        self.buffers = BufferPool()
        self._lock = threading.Lock()
        self._groups: dict[tuple[GroupKey, tuple[int, ...]], ThreadGroup] = {}
        self._closed = False
        self._local = threading.local()  # .scope: the calling thread's _Scope, or absent
        self._resets = 0
        self._active: dict[str, int] = {}  # scope name -> callers inside it (for abandon)
        self._abandoned: str | None = None  # why every scope fails now (abandon)

    # --- scopes -------------------------------------------------------------------------

    @contextlib.contextmanager
    def scope(self, tag: object, on_failure: FailureHook | None = None) -> Iterator[None]:
        """Run the block's collectives in the scope ``tag`` (the runtime: an operator id, the
        same on every caller); an exception leaving the block fails the scope.

        Example:
            >>> import torch
            >>> with ThreadGroupManager(CommTopology.threads([[0, 1]])) as manager:
            ...     with manager.scope(7):
            ...         name = manager.current_scope()
            ...     name, manager.current_scope()
            ('7.0', '')
        """
        local = self._local
        outer = getattr(local, "scope", None)
        name = f"{tag}.{self._resets}"
        local.scope = _Scope(name, on_failure)
        self._enter(name)
        try:
            yield
        except BaseException as error:
            self.fail_scope(error)
            raise
        finally:
            self._leave(name)
            local.scope = outer

    def _enter(self, name: str) -> None:
        with self._lock:
            if self._abandoned is not None:  # entered after abandon: the peers are gone
                raise CommError(self._abandoned)
            self._active[name] = self._active.get(name, 0) + 1

    def _leave(self, name: str) -> None:
        with self._lock:
            left = self._active.pop(name, 1) - 1
            if left:
                self._active[name] = left

    def abandon(self, message: str) -> None:
        """Fail every collective in flight and every later one with ``message``: a close
        that drops queued work, a cluster that lost a worker (the peer a caller waits for
        may never come). The peers are told first (``abort``); then this caller stops
        waiting where a told peer could not answer (``give_up``: a coordinator that is gone).
        """
        with self._lock:
            self._abandoned = message
            names = list(self._active)
            groups = list(self._groups.values())
        for group in groups:
            for name in names:
                with contextlib.suppress(CommError):  # a closed store: nobody waits there
                    group.abort(name, message)
        for group in groups:
            group.give_up()

    def current_scope(self) -> str:
        """The calling thread's scope ("": none)."""
        scope = getattr(self._local, "scope", None)
        return "" if scope is None else scope.name

    def fail_scope(self, error: BaseException) -> None:
        """A collective of the calling thread's scope failed here (or the block raised):
        ``on_failure`` first, then the scope is aborted on every group; once per scope."""
        scope: _Scope | None = getattr(self._local, "scope", None)
        if scope is None or scope.failed is not None:
            return
        message = scope.failed = f"{type(error).__name__}: {error}"
        if scope.on_failure is not None:
            try:
                message = scope.failed = scope.on_failure(error)
            except Exception as hook_error:  # the peers must hear of it all the same
                message = f"{message} (and recording it failed: {hook_error!r})"
        with self._lock:
            groups = list(self._groups.values())
        for group in groups:
            with contextlib.suppress(CommError):  # a closed store: nobody there to tell
                group.abort(scope.name, message)

    def reset(self) -> None:
        """Make every group fit for the next graph, in the destroy order; every caller of
        every group must be idle and resetting too (the runtime: a worker handed to a new
        graph). Later scopes carry the new reset count.

        Groups on shared memory between processes are closed (each holds descriptors in
        every worker: kept for good, a pool serving graph after graph over new device sets
        ran out of descriptors); the next graph opens those it uses again, which costs a
        store's opening, a millisecond. Every caller closes the same ones, since a group's
        backend kind is the same for all its callers. The others are repaired
        (``ThreadGroup.reset``): a Gloo group's connections are slow to make again."""
        with self._lock:
            self._check_open()
            self._resets += 1
            ordered = sorted(self._groups.items())  # keys are unique: groups never compared
            for key, group in ordered:
                if group.backend_kind in _REOPENED:
                    del self._groups[key]  # closed below, opened again on first use
        _on_each([group for _, group in ordered], _reset_or_close, "resetting")

    def get_group(
        self, device_kind: str, device_ids: Sequence[int], local_device_ids: Iterable[int]
    ) -> ThreadGroup:
        """This caller's handle on the group of ``device_ids`` (created on first use).

        ``local_device_ids`` are the devices the calling thread or process holds; those in
        the group become its ranks.
        """
        key: GroupKey = (check_device_kind(device_kind), _check_ids(device_ids))
        ranks = _held_ranks(key, local_device_ids)
        with self._lock:
            self._check_open()
            group = self._groups.get((key, ranks))
        if group is not None:
            return group
        group = self._create(key, ranks)
        with self._lock:
            if self._closed:
                group.close()
                self._check_open()
            return self._groups.setdefault((key, ranks), group)

    def _check_open(self) -> None:
        if self._closed:
            raise CommError("ThreadGroupManager is closed")

    def _create(self, key: GroupKey, ranks: tuple[int, ...]) -> ThreadGroup:
        callers = self._topology.group_callers(key[1])
        if ranks not in callers:
            mine = next(c for c in callers if ranks[0] in c)
            raise CommError(
                f"group {key[0]}{list(key[1])}: this caller passed devices at ranks "
                f"{list(ranks)}, but the topology gives the caller of rank {ranks[0]} the "
                f"ranks {list(mine)}"
            )
        kind = self._backend_kind(key, callers)
        info = GroupInfo(key[0], key[1], ranks)
        return ThreadGroup(info, _OPENERS[kind](self, key, info, callers), kind)

    def _backend_kind(self, key: GroupKey, callers: _Callers) -> BackendKind:
        hosts = self._topology.group_hosts(key[1])
        if len(set(hosts)) > 1 and self._rendezvous_store is None:
            raise CommError(
                f"group {key[0]}{list(key[1])} spans hosts {sorted(set(hosts))}: its callers "
                "meet through a rendezvous store shared by the hosts "
                "(ThreadGroupManager(..., rendezvous_store=...)), not files of one machine"
            )
        if self._backend is not None and len(callers) > 1:
            return self._backend
        return choose_backend(self._topology, key[0], callers, hosts)

    def _store_opener(self, kind: StoreKind, key: GroupKey) -> StoreOpener:
        name, namespace = group_name(key), self._namespace

        def opener(world_size: int, rank: int) -> TensorStore:
            return open_store(kind, name, world_size, rank, namespace=namespace)

        return opener

    def _network_opener(self, key: GroupKey) -> StoreOpener:
        name, namespace, rendezvous = group_name(key), self._namespace, self._rendezvous(key)

        def opener(world_size: int, rank: int) -> TensorStore:
            timeout = timedelta(seconds=GlobalOption.get_comm_timeout_second())
            return open_network_store(rendezvous, name, namespace, world_size, rank, timeout)

        return opener

    def _rendezvous(self, key: GroupKey) -> GroupRendezvous:
        """Where the callers of ``key`` meet: a file here, or a prefix of the shared store."""
        name = f"dtorch-{self._namespace.instance_id}-{group_name(key)}"
        if self._rendezvous_store is not None:
            return GroupRendezvous.in_store(name, self._rendezvous_store, self._host)
        return GroupRendezvous.in_directory(name, self._rendezvous_dir, self._host)

    def close(self) -> None:
        """Destroy every group, sorted by (kind, device ids, ranks); idempotent."""
        with self._lock:
            self._closed = True
            groups = [self._groups[k] for k in sorted(self._groups)]
            self._groups.clear()
        self.buffers.clear()
        _on_each(groups, ThreadGroup.close, "closing")

    def __enter__(self) -> ThreadGroupManager:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _check_ids(device_ids: Sequence[int]) -> tuple[int, ...]:
    ids = tuple(device_ids)
    bad = [d for d in ids if isinstance(d, bool) or not isinstance(d, int) or d < 0]
    if not ids or bad or len(set(ids)) != len(ids):
        raise CommError(
            f"device_ids {list(ids)} are not accepted; expected a non-empty sequence of "
            f"distinct ints >= 0 (rank order)"
        )
    return ids


def _held_ranks(key: GroupKey, local_device_ids: Iterable[int]) -> tuple[int, ...]:
    local = set(local_device_ids)
    ranks = tuple(r for r, d in enumerate(key[1]) if d in local)
    if not ranks:
        raise CommError(
            f"group {key[0]}{list(key[1])}: the caller holds none of its devices "
            f"(local_device_ids {sorted(local)})"
        )
    return ranks


def _open_torch(
    manager: ThreadGroupManager, key: GroupKey, info: GroupInfo, callers: _Callers
) -> GroupBackend:
    return TorchDistBackend(info, manager._rendezvous(key), manager)


def _open_same_device(
    store_kind: StoreKind,
    manager: ThreadGroupManager,
    key: GroupKey,
    info: GroupInfo,
    callers: _Callers,
) -> GroupBackend:
    opener = manager._store_opener(store_kind, key)
    return SameDeviceBackend(info, callers, opener, manager.buffers.empty, manager)


def _open_network(
    manager: ThreadGroupManager, key: GroupKey, info: GroupInfo, callers: _Callers
) -> GroupBackend:
    opener = manager._network_opener(key)
    return SameDeviceBackend(info, callers, opener, manager.buffers.empty, manager)


#: How each backend kind is built for one caller of one group.
_OPENERS: dict[
    BackendKind,
    Callable[[ThreadGroupManager, GroupKey, GroupInfo, _Callers], GroupBackend],
] = {
    BackendKind.TORCH_DISTRIBUTED: _open_torch,
    BackendKind.STORE_MEMORY: partial(_open_same_device, StoreKind.MEMORY),
    BackendKind.STORE_FILE: partial(_open_same_device, StoreKind.FILE),
    BackendKind.STORE_NETWORK: _open_network,
}


#: Backends a reset closes rather than repairs (``ThreadGroupManager.reset``).
_REOPENED = frozenset({BackendKind.STORE_FILE})


def _reset_or_close(group: ThreadGroup) -> None:
    """A group of a closing backend kind is closed (the manager forgot it), the rest reset."""
    if group.backend_kind in _REOPENED:
        group.close()
    else:
        group.reset()


def _on_each(groups: list[ThreadGroup], action: Callable[[ThreadGroup], None], what: str) -> None:
    """``action`` on every group, the rest first when one fails; then one CommError saying
    ``what`` failed, from the first error."""
    errors: list[Exception] = []
    for group in groups:
        try:
            action(group)
        except Exception as error:  # the other groups still need it
            errors.append(error)
    if errors:
        raise CommError(f"{what} {len(errors)} group(s) failed: {errors}") from errors[0]

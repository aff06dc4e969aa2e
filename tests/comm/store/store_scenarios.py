"""Per-rank bodies of the store tests, importable by spawned workers (threads use them too).

Each function opens one participant and returns plain data; the oracle is torch on the full
tensor, rebuilt from a seed in whichever process checks it.
"""

from __future__ import annotations

import secrets
import socket
import sys
import threading
import time

import torch

from dtorch.comm.namespace import CommNamespace
from dtorch.comm.store import StoreKind, TensorStore, open_store
from dtorch.comm.store.base import Deadline, KeysTimeoutError
from dtorch.comm.store.file import FileTensorStore
from dtorch.comm.store.memory import MemoryTensorStore
from dtorch.comm.store.network import NetworkTensorStore
from dtorch.errors import CommError, CommTimeoutError
from dtorch.ir.dtypes import dtype_code
from dtorch.options import GlobalOption
from tests.comm.seeded_tensors import make_tensor


def stack_names(thread: threading.Thread) -> set[str]:
    """The names of the functions on ``thread``'s stack now (seen from outside)."""
    frame = sys._current_frames().get(thread.ident or -1)
    names = set()
    while frame is not None:
        names.add(frame.f_code.co_name)
        frame = frame.f_back
    return names


def free_port() -> int:
    """A TCP port that was free a moment ago on the loopback interface."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def with_endpoint(kind: str) -> str:
    """``kind`` as the scenarios take it: ``network`` gets a fresh port and a fresh program
    secret, ``network@PORT@SECRET_HEX`` (plain data, so spawned ranks get both)."""
    return f"network@{free_port()}@{secrets.token_hex(32)}" if kind == "network" else kind


def open_for(kind: str, ns_id: str, key: str, world: int, rank: int) -> TensorStore:
    """Open ``kind`` (``memory``, ``file`` or ``network@PORT@SECRET_HEX``) in namespace
    ``ns_id``."""
    name, port, secret = [*kind.split("@"), "", ""][:3]
    endpoint = f"tcp://127.0.0.1:{port}" if port else None
    namespace = CommNamespace(ns_id, bytes.fromhex(secret))
    return open_store(StoreKind(name), key, world, rank, namespace=namespace, endpoint=endpoint)


def allreduce(kind: str, ns_id: str, key: str, world: int, rank: int, rounds: int) -> list:
    """The spec's same-device all-reduce, ``rounds`` times with reset in between."""
    results = []
    with open_for(kind, ns_id, key, world, rank) as store:
        for round_index in range(rounds):
            mine = make_tensor(dtype_code(torch.float32), (33,), 100 * round_index + rank)
            results.append(allreduce_once(store, mine).tolist())
            store.reset()
    return results


def expected_allreduce(world: int, rounds: int) -> list:
    """The oracle of ``allreduce``: torch's sum of every rank's tensor, per round."""
    code = dtype_code(torch.float32)
    return [
        sum(make_tensor(code, (33,), 100 * i + r) for r in range(world)).tolist()
        for i in range(rounds)
    ]


def exchanges(kind: str, ns_id: str, key: str, world: int, rank: int, rounds: int) -> list:
    """``rounds`` all-to-all exchanges closed by ``end_exchange`` (keys unique per round, no
    reset), then one spec round with reset on the same store: every rank's sum per round, and
    last the number of slots left once every participant ended them (``held_slots``). Rank 0
    is slow now and then, so the others run ahead into the next round and would overwrite a
    segment recycled too early."""
    results: list = []
    with open_for(kind, ns_id, key, world, rank) as store:
        for i in range(rounds):
            mine = make_tensor(dtype_code(torch.float32), (33,), 100 * i + rank)
            store.src_set(f"x#{i}/{rank}", mine, get_count=world - 1)
            others = [r for r in range(world) if r != rank]
            if rank == 0 and i % 7 == 0:
                time.sleep(0.01)
            total = mine + sum(store.dest_get(f"x#{i}/{r}") for r in others)
            store.end_exchange([f"x#{i}/{r}" for r in others], [f"x#{i}/{rank}"])
            results.append(total.tolist())
        store.barrier()  # every participant's end_exchange has returned
        left = held_slots(store)
        store.barrier()  # and nobody set a key of the next round before everyone counted
        last = make_tensor(dtype_code(torch.float32), (33,), 100 * rounds + rank)
        results.append(allreduce_once(store, last).tolist())
        store.reset()
    return [*results, left]


def held_slots(store: TensorStore) -> int | None:
    """How many keys the store still holds (memory and file stores, and rank 0 of a network
    store, which serves it; None for the other ranks of a network store). Test-only: it reads
    the stores' internals."""
    if isinstance(store, NetworkTensorStore):
        coordinator = store._coordinator
        return None if coordinator is None else len(coordinator._slots)
    if isinstance(store, MemoryTensorStore):
        return sum(slot.tensor is not None for slot in store._shared.slots.values())  # type: ignore[union-attr]
    if isinstance(store, FileTensorStore):
        with store._txn(Deadline()) as state:
            return len(state.slots)
    return None


def expected_exchanges(world: int, rounds: int) -> list:
    """The oracle of ``exchanges`` without its slot count: torch's sum of every rank's
    tensor, per round."""
    return expected_allreduce(world, rounds + 1)


def allreduce_once(store: TensorStore, mine: torch.Tensor) -> torch.Tensor:
    """The spec's all-reduce through one store: rank 0 sums every rank's tensor and sets the
    result for the others (the caller resets the store before the next round)."""
    rank, world = store.rank, store.world_size
    store.src_set(str(rank), mine, get_count=1)
    if rank == 0:
        total = store.dest_get("0").clone()
        store.dest_finish_get("0")
        for other in range(1, world):
            total += store.dest_get(str(other))
            store.dest_finish_get(str(other))
    store.src_wait_until_get_finished(str(rank))
    if rank == 0:
        store.src_set("result", total, get_count=world - 1)
        store.src_wait_until_get_finished("result")
        return total
    total = store.dest_get("result").clone()
    store.dest_finish_get("result")
    return total


def hand_over_rank(store: TensorStore, rank: int) -> int | None:
    """Participant ``rank % 2`` of a two-participant store: the even one sets its ``rank``
    under "k", the odd one returns what it reads there (isolation tests: who met whom)."""
    if rank % 2 == 0:
        store.src_set("k", torch.tensor([rank]), 1)
        store.src_wait_until_get_finished("k")
        return None
    value = int(store.dest_get("k"))
    store.dest_finish_get("k")
    return value


def broadcast_check(
    kind: str, ns_id: str, key: str, world: int, rank: int, code: int, shape: tuple, seed: int
) -> bool:
    """Rank 0 sets one tensor for all others (a transposed view: non-contiguous input); the
    consumers compare what they got with the tensor rebuilt from the seed."""
    expected = make_tensor(code, shape, seed)
    with open_for(kind, ns_id, key, world, rank) as store:
        if rank == 0:
            source = expected.T.contiguous().T if expected.dim() == 2 else expected
            store.src_set("t", source, get_count=world - 1)
            store.src_wait_until_get_finished("t")
            return True
        got = store.dest_get("t")
        ok = got.dtype == expected.dtype and got.shape == expected.shape
        ok = ok and torch.equal(got, expected)
        store.dest_finish_get("t")
        return ok


def gather_check(kind: str, ns_id: str, key: str, world: int, rank: int) -> list | None:
    """Every rank sets its piece; rank 0 gathers all pieces (get_count 1 each)."""
    with open_for(kind, ns_id, key, world, rank) as store:
        piece = torch.full((rank + 1,), float(rank))
        store.src_set(f"piece{rank}", piece, 1)
        gathered = None
        if rank == 0:
            parts = []
            for other in range(world):
                parts.append(store.dest_get(f"piece{other}").clone())
                store.dest_finish_get(f"piece{other}")
            gathered = torch.cat(parts).tolist()
        store.src_wait_until_get_finished(f"piece{rank}")
        store.barrier()
        return gathered


def wait_times_out(kind: str, ns_id: str, key: str, world: int, rank: int, timeout_s: float):
    """Rank 0 expects 2 consumers of one key; only rank 1 comes. Returns rank 0's error text.

    Only rank 0 shortens the timeout (``override`` is process-wide: one thread at a time)."""
    with open_for(kind, ns_id, key, world, rank) as store:
        store.barrier()
        if rank == 0:
            store.src_set("k", torch.ones(2), get_count=2)
            try:
                with GlobalOption.override(comm_timeout_second=timeout_s):
                    store.src_wait_until_get_finished("k")
            except CommTimeoutError as error:
                return str(error)
            return "no timeout"
        if rank == 1:
            store.dest_get("k")
            store.dest_finish_get("k")
        time.sleep(timeout_s * 2)  # stay open while rank 0 times out
        return None


def get_many(kind: str, ns_id: str, key: str, world: int, rank: int, late_s: float):
    """Rank 0 reads every other rank's key at once; the last rank sets its key ``late_s``
    after the others. Rank 0 returns the values in the order it asked (last rank first)."""
    with open_for(kind, ns_id, key, world, rank) as store:
        store.barrier()
        if rank:
            if rank == world - 1:
                time.sleep(late_s)
            store.src_set(f"x/{rank}", torch.full((2,), float(rank)), get_count=1)
            store.end_exchange((), (f"x/{rank}",))
            return None
        keys = [f"x/{r}" for r in reversed(range(1, world))]
        got = [t.tolist() for t in store.dest_get_many(keys)]
        store.end_exchange(keys, ())
        return got


def get_many_times_out(kind: str, ns_id: str, key: str, world: int, rank: int, timeout_s: float):
    """Rank 0 reads a key rank 1 set and one nobody sets; returns what its error says and the
    keys it names as never set."""
    with open_for(kind, ns_id, key, world, rank) as store:
        store.barrier()
        if rank == 1:
            store.src_set("y/set", torch.ones(1), get_count=1)
        if rank:
            time.sleep(timeout_s * 2)  # stay open while rank 0 times out
            return None
        try:
            with GlobalOption.override(comm_timeout_second=timeout_s):
                store.dest_get_many(["y/set", "y/never"])
        except KeysTimeoutError as error:
            return str(error), error.keys
        return "no timeout", ()


def open_with_timeout(kind: str, ns_id: str, key: str, world: int, rank: int, timeout_s: float):
    """Open a store whose other ranks never come; returns the error text."""
    with GlobalOption.override(comm_timeout_second=timeout_s):
        try:
            open_for(kind, ns_id, key, world, rank).close()
        except CommTimeoutError as error:
            return str(error)
        return "opened"


def hold_open(kind: str, ns_id: str, key: str, world: int, rank: int, nbytes: int) -> None:
    """Open, set a large tensor for rank 0, then sleep until killed (the SIGKILL test)."""
    with open_for(kind, ns_id, key, world, rank) as store:
        store.src_set("big", torch.ones(nbytes // 4), get_count=1)
        time.sleep(600)


def open_and_sleep(kind: str, ns_id: str, key: str, world: int, rank: int) -> None:
    """Open, then sleep until killed (a participant that dies while the others wait on it)."""
    with open_for(kind, ns_id, key, world, rank):
        time.sleep(600)


def take_and_sleep(kind: str, ns_id: str, key: str, world: int, rank: int) -> None:
    """Open, read "k" and sleep until killed without finishing it (a dead consumer)."""
    with open_for(kind, ns_id, key, world, rank) as store:
        store.dest_get("k")
        time.sleep(600)


def barrier_until_error(kind: str, ns_id: str, key: str, world: int, rank: int) -> tuple:
    """Open, then wait in a barrier (comm timeout 60 s) that a dead member never reaches:
    the error's class name, message and peers, and the seconds the barrier took."""
    with open_for(kind, ns_id, key, world, rank) as store:
        start = time.monotonic()
        try:
            with GlobalOption.override(comm_timeout_second=60):
                store.barrier()
        except CommError as error:
            peers = getattr(error, "peers", ())
            return type(error).__name__, str(error), peers, time.monotonic() - start
        return "no error", "", (), time.monotonic() - start

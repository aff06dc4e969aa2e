"""Chunk-wise collectives on a store whose reads move bytes (the network store, between
hosts): each rank's chunk r is published for rank r's caller alone, so a reduce-scatter, an
all-to-all and the first round of a large all-reduce move each byte once instead of every
caller reading every whole tensor (``SameDeviceBackend._addressed``).

Threads pose as the callers [[0], [1, 2], [3]] of one network store (the backend is forced;
the rendezvous is a HashStore). Outputs equal torch's on the full tensors, uneven chunks
included; what each caller reads is exactly the chunks of the ranks it holds; a peer whose
tensor does not fit fails every caller at once, and the group goes on working.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.distributed as dist

from dtorch.comm.group import BackendKind, CommTopology, ThreadGroupManager
from dtorch.comm.namespace import CommNamespace
from dtorch.comm.store.network import NetworkTensorStore
from dtorch.errors import CommError
from dtorch.options import GlobalOption
from tests.thread_runner import on_threads

pytestmark = pytest.mark.timeout(60)

LAYOUT = [[0], [1, 2], [3]]
WORLD = 4


def _inputs(shape: tuple[int, ...], seed: int, sizes: tuple[int, ...] = (), dim: int = 0):
    """Every rank's tensor (``sizes``: each rank's length along ``dim``), from one seed."""
    generator = torch.Generator().manual_seed(seed)
    tensors = []
    for rank in range(WORLD):
        own = list(shape)
        if sizes:
            own[dim] = sizes[rank]
        tensors.append(torch.randn(own, generator=generator))
    return tensors


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """(key, bytes) of every value a network store participant reads."""
    seen: list[tuple[str, int]] = []
    lock = threading.Lock()
    original = NetworkTensorStore.dest_get

    def counted(self: NetworkTensorStore, key: str) -> torch.Tensor:
        value = original(self, key)
        with lock:
            seen.append((key, value.numel() * value.element_size()))
        return value

    monkeypatch.setattr(NetworkTensorStore, "dest_get", counted)
    return seen


def _run(fn: Callable[[Any, list[int]], Any]) -> list[Any]:
    """``fn(group, held)`` on one thread per caller of ``LAYOUT``, over one network store."""
    topology = CommTopology.threads(LAYOUT)
    manager = ThreadGroupManager(
        topology,
        namespace=CommNamespace.create(),
        backend=BackendKind.STORE_NETWORK,
        rendezvous_store=dist.HashStore(),
    )
    with GlobalOption.override(comm_timeout_second=30), manager:
        groups = {}

        def caller(held: list[int]) -> Any:
            group = groups.setdefault(tuple(held), manager.get_group("cpu", range(WORLD), held))
            assert group.backend_kind is BackendKind.STORE_NETWORK
            return fn(group, held)

        return on_threads(LAYOUT, caller)


def _outputs(results: list[dict[int, torch.Tensor]]) -> dict[int, torch.Tensor]:
    return {rank: value for result in results for rank, value in result.items()}


@pytest.mark.parametrize("shape", [(7, 3), (4, 6), (2, 5)], ids=["uneven", "even", "empty-chunks"])
@pytest.mark.parametrize("op", ["sum", "max"])
def test_reduce_scatter_matches_torch_and_reads_only_its_chunks(shape, op, reads) -> None:
    tensors = _inputs(shape, 1)
    results = _run(lambda g, held: g.reduce_scatter({r: tensors[r] for r in held}, 0, op))
    whole = torch.stack(tensors).sum(0) if op == "sum" else torch.stack(tensors).amax(0)
    expected = list(torch.chunk(whole, WORLD, 0)) + [whole[:0]] * WORLD  # empty ones too
    got = _outputs(results)
    for rank in range(WORLD):
        torch.testing.assert_close(got[rank], expected[rank], rtol=0, atol=0)
    chunk = [c.numel() * 4 for c in expected[:WORLD]]
    held_by = {r: c for c in LAYOUT for r in c}
    wanted = sum(chunk[r] * (WORLD - len(held_by[r])) for r in range(WORLD))
    assert sum(n for _, n in reads) == wanted, reads  # whole tensors would be 2-3x this
    assert all("/for" in key for key, _ in reads)


def test_all_to_all_with_uneven_sources_matches_torch(reads) -> None:
    sizes = (2, 2, 2, 1)  # torch.chunk rows of 7; 5 columns become chunks 2, 2, 1, 0
    tensors = _inputs((0, 5), 2, sizes, 0)
    results = _run(lambda g, held: g.all_to_all({r: tensors[r] for r in held}, 0, 1, sum(sizes)))
    whole = torch.cat(tensors, 0)
    got = _outputs(results)
    for rank, piece in enumerate(torch.chunk(whole, WORLD, 1)):
        torch.testing.assert_close(got[rank], piece, rtol=0, atol=0)
    assert got[3].shape == (7, 0)  # 5 columns in torch.chunk pieces of 2: none left for rank 3
    assert reads and all("/for" in key for key, _ in reads)


def test_a_large_all_reduce_reads_chunks_then_gathers(reads) -> None:
    tensors = _inputs((1 << 18,), 3)
    results = _run(lambda g, held: g.all_reduce({r: tensors[r] for r in held}))
    whole = torch.stack(tensors).sum(0)
    for rank, value in _outputs(results).items():
        torch.testing.assert_close(value, whole, msg=f"rank {rank}")
    first_round = sum(n for key, n in reads if "/for" in key)
    assert first_round == (1 << 18) * 4 // WORLD * (3 + 2 + 2 + 3)  # chunk x remote ranks


@pytest.mark.parametrize("collective", ["reduce_scatter", "all_to_all"])
def test_a_peer_whose_tensor_does_not_fit_fails_everyone_at_once(collective: str) -> None:
    def fn(group: Any, held: list[int]) -> tuple[str, float, dict[int, torch.Tensor]]:
        rows = 5 if held == [3] else 4  # the last caller's tensor is longer
        started = time.monotonic()
        try:
            if collective == "reduce_scatter":
                group.reduce_scatter({r: torch.ones(rows, 8) for r in held}, 0)
            else:
                group.all_to_all({r: torch.ones(8, rows) for r in held}, 0, 1)
            message = "no error"
        except CommError as error:
            message = str(error)
        elapsed = time.monotonic() - started
        after = group.reduce_scatter({r: torch.full((8,), float(r)) for r in held}, 0)
        return message, elapsed, after

    results = _run(fn)
    for message, elapsed, _ in results:
        assert elapsed < 5 and message != "no error", (elapsed, message)
        assert "expected torch.float32" in message or "another caller failed" in message
    assert any("rank 3 sent rank" in message for message, _, _ in results)
    after = _outputs([result for _, _, result in results])
    for rank in range(WORLD):
        torch.testing.assert_close(after[rank], torch.full((2,), 6.0))


def test_a_large_all_reduce_refuses_a_peer_of_another_shape_with_as_many_elements() -> None:
    """The flattened chunks of a [512, 512] and a [1024, 256] tensor fit alike: the shapes
    travel beside them, and a mismatch fails every caller, as the whole tensors' check did."""

    def fn(group: Any, held: list[int]) -> str:
        shape = (1024, 256) if held == [3] else (512, 512)
        try:
            group.all_reduce({r: torch.ones(shape) for r in held})
        except CommError as error:
            return str(error)
        return "no error"

    messages = _run(fn)
    assert all(m != "no error" for m in messages), messages
    assert any("rank 3 passed torch.float32 [1024, 256]" in m for m in messages), messages

"""torch's default dtype in integer-to-float promotions, on every runner.

``torch.set_default_dtype(torch.float64)`` makes ``int / 2`` and ``sqrt(int)`` float64 in
torch. dtorch infers the result dtype when the operator is recorded, with the recording
process's default; the devices must compute in that dtype even where their own default
differs (a worker process keeps float32; a stream may run after the program changed the
default back). Creation follows the graph's default dtype (``graph.default_dtype``), not
torch's, as DTorch's does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

import dtorch
from dtorch import Replicate, Shard

#: name, fn(module, x) of an int64 x: each a promotion torch's default dtype decides.
_PROMOTIONS: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("true division by an int", lambda m, x: x / 3),
    ("true division of two int tensors", lambda m, x: x / (x + 7)),
    ("times a float", lambda m, x: x * 0.1),
    ("float minus", lambda m, x: 0.1 - x),
    ("power by a float", lambda m, x: x**0.5),
    ("sqrt", lambda m, x: x.sqrt()),
    ("exp", lambda m, x: m.exp(x)),
    ("sigmoid", lambda m, x: m.sigmoid(x)),
    ("where with a float branch", lambda m, x: m.where(x > 2, x, 0.1)),
    ("where with two float numbers", lambda m, x: m.where(x > 2, 0.3, 0.1)),
    ("clamp by a float", lambda m, x: x.clamp(0.5, 2.7)),
]


@pytest.fixture
def float64_default() -> Iterator[None]:
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


@pytest.mark.parametrize(("name", "fn"), _PROMOTIONS, ids=[c[0] for c in _PROMOTIONS])
def test_a_float64_default_makes_float64_results_on_every_device(
    name: str, fn: Callable[[Any, Any], Any], graph: dtorch.Graph, float64_default: None
) -> None:
    full = torch.arange(6)
    want = fn(torch, full)
    assert want.dtype == torch.float64  # the claim, on torch
    for placements in ([Shard(0)], [Replicate()]):
        mesh = dtorch.init_device_mesh("cpu", 2)
        x = dtorch.from_torch(full, device_mesh=mesh, placements=placements)
        got = fn(dtorch, x)
        assert got.dtype == torch.float64, name
        assert torch.equal(got.to_torch(), want), (name, placements)


def test_results_keep_the_dtype_of_their_recording_after_the_default_changes(
    graph: dtorch.Graph,
) -> None:
    full = torch.arange(6)
    x = dtorch.from_torch(full, device_mesh=dtorch.init_device_mesh("cpu", 2))
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        ys = [x / 3 for _ in range(50)]  # recorded now, run whenever the devices get there
    finally:
        torch.set_default_dtype(before)
    want = full.to(torch.float64) / 3
    for y in ys:
        assert y.dtype == torch.float64
        assert torch.equal(y.to_torch(), want)


def test_creation_follows_the_graph_default_dtype(
    graph: dtorch.Graph, float64_default: None
) -> None:
    assert dtorch.zeros(2).dtype == graph.default_dtype == torch.float32
    with graph.dtype_guard(torch.float64):
        assert dtorch.zeros(2).dtype == torch.float64


def test_a_traced_program_keeps_the_recorded_dtypes(
    graph: dtorch.Graph, float64_default: None
) -> None:
    """A replay's fast path (direct torch callables) computed int-to-float promotions in the
    devices' default dtype; such operators take the general kernel."""
    full = torch.arange(6)
    x = dtorch.from_torch(
        full, device_mesh=dtorch.init_device_mesh("cpu", 2), placements=[Shard(0)]
    )
    program = dtorch.trace(lambda t: (t / 3).sqrt() + t * 0.1, x)
    got, want = program(x), (full / 3).sqrt() + full * 0.1
    assert got.dtype == want.dtype == torch.float64
    assert torch.equal(got.to_torch(), want)

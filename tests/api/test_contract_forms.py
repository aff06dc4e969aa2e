"""Call forms of API.md's names that DTorch and DTensor programs write: ``Partial("sum")``,
placements from the text errors print, ``MemoryStats.find`` by ``torch.device``, and the
default dtype refused where torch's ``set_default_dtype`` refuses it."""

from __future__ import annotations

import pytest
import torch

import dtorch
from dtorch.errors import GraphError, PlacementError


def test_partial_takes_dtensors_sum_spelling() -> None:
    assert dtorch.Partial("sum") == dtorch.Partial(reduce_op="sum") == dtorch.Partial()
    assert hash(dtorch.Partial("sum")) == hash(dtorch.Partial())
    assert repr(dtorch.Partial("sum")) == "Partial(sum)"
    with pytest.raises(PlacementError, match=r"Partial\('max'\): dtorch's Partial is a sum"):
        dtorch.Partial("max")


def test_placements_read_the_text_errors_print() -> None:
    assert dtorch.Placement("S(0)") == dtorch.Shard(0)
    assert dtorch.Placement("S(-1)") == dtorch.Shard(-1)
    assert dtorch.Placement("S1") == dtorch.Shard(1)
    with pytest.raises(PlacementError, match="not a placement"):
        dtorch.Placement("S(x)")


def test_memory_stats_find_takes_a_device(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    t = dtorch.ones(4, device_mesh=mesh, graph=graph)
    stats = graph.get_memory_stats(mesh)
    assert stats.find(torch.device("cpu", 1)) is stats.find(1)
    assert stats.find(t.device) is stats.find(0)  # cpu device 0 prints as torch.device("cpu")
    with pytest.raises(KeyError, match="no device 5"):
        stats.find(torch.device("cpu", 5))


def test_the_default_dtype_is_a_floating_one(graph: dtorch.Graph) -> None:
    with pytest.raises(TypeError):
        torch.set_default_dtype(torch.int32)
    with (
        pytest.raises(GraphError, match="must be a floating dtype"),
        graph.dtype_guard(torch.int32),
    ):
        pass
    with graph.dtype_guard(torch.float64):
        assert dtorch.randn(2, graph=graph).dtype == torch.float64
    assert graph.default_dtype == torch.float32

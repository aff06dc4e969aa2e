"""``copy.copy``, ``copy.deepcopy`` and ``pickle`` of dtorch tensors, parameters, modules and
graphs, as torch users write them: a shallow copy shares the value (either handle may go
first), a deep copy owns a copy of it, pickling says what to do instead."""

from __future__ import annotations

import copy
import gc
import pickle

import pytest
import torch

import dtorch
from tests.api.ops_harness import S0, place

pytestmark = pytest.mark.timeout(60)


def _sharded(graph: dtorch.Graph) -> tuple[torch.Tensor, dtorch.Tensor]:
    full = torch.arange(8.0).view(4, 2)
    return full, place(full, dtorch.init_device_mesh("cpu", 2), [S0], graph)


@pytest.mark.parametrize("drop", ["copy", "original"])
def test_a_shallow_copy_shares_the_value_and_either_may_go_first(
    drop: str, graph: dtorch.Graph
) -> None:
    """Dropping a ``copy.copy`` freed the original's value (the copy took over its handle's
    ownership), and the graph failed for good ("the runner failed to take a batch")."""
    full, t = _sharded(graph)
    shallow = copy.copy(t)
    assert type(shallow) is type(t) and shallow.placements == [S0]
    kept = t if drop == "copy" else shallow
    if drop == "copy":
        del shallow
    else:
        del t
    gc.collect()
    assert torch.equal(kept.to_torch(), full)
    kept.add_(1)  # shared: an in-place write is the value's
    assert torch.equal(kept.to_torch(), full + 1)
    assert (dtorch.ones(2, graph=graph) + 1).tolist() == [2.0, 2.0]


def test_a_deep_copy_owns_a_copy_of_the_value(graph: dtorch.Graph) -> None:
    full, t = _sharded(graph)
    deep = copy.deepcopy(t)
    deep.mul_(2)
    assert torch.equal(t.to_torch(), full) and torch.equal(deep.to_torch(), full * 2)
    assert deep.placements == t.placements and deep.graph is graph
    del t
    gc.collect()
    assert torch.equal(deep.to_torch(), full * 2)


def test_parameters_and_modules_deep_copy_as_in_torch(graph: dtorch.Graph) -> None:
    """``copy.deepcopy(model)`` (torch's common pattern: an EMA model, a frozen reference)
    raised "cannot pickle '_Guards' object"."""
    with graph.as_default():
        model = dtorch.nn.Linear(3, 2)
    frozen = dtorch.nn.Parameter(dtorch.ones(2, graph=graph), requires_grad=False)
    twin = copy.deepcopy(model)
    assert type(twin.weight) is dtorch.nn.Parameter and twin.weight.requires_grad
    assert torch.equal(twin.weight.to_torch(), model.weight.to_torch())
    twin.weight.zero_()
    assert model.weight.to_torch().abs().sum() > 0  # its own value
    assert copy.copy(frozen).requires_grad is False
    assert copy.deepcopy(frozen).requires_grad is False
    assert copy.deepcopy(graph) is graph and copy.copy(graph) is graph


def test_pickling_a_tensor_or_a_graph_says_what_to_do(graph: dtorch.Graph) -> None:
    _, t = _sharded(graph)
    with pytest.raises(TypeError, match=r"cannot be pickled.*pickle t\.to_torch\(\)"):
        pickle.dumps(t)
    with pytest.raises(TypeError, match=r"a dtorch\.Graph cannot be pickled"):
        pickle.dumps(graph)
    assert pickle.loads(pickle.dumps(t.to_torch())).shape == (4, 2)

"""Bad arguments get a clear dtorch error naming what was wrong and what is accepted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import dtorch
from dtorch.errors import MeshError, PlacementError, ShapeError


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda g: dtorch.zeros("a", graph=g), ShapeError, "non-negative ints"),
        (lambda g: dtorch.zeros(2.5, graph=g), ShapeError, "non-negative ints"),
        (lambda g: dtorch.ones(2, dtype="float32", graph=g), TypeError, "torch.dtype"),
        (lambda g: dtorch.randn(2, generator="x", graph=g), TypeError, "torch.Generator"),
        (lambda g: dtorch.full((2,), "x", graph=g), TypeError, "fill_value must be a number"),
        (lambda g: dtorch.ones(2, graph=g).to("tpu"), MeshError, "accepted"),
        (lambda g: dtorch.zeros(3, device="gpu", graph=g), MeshError, "accepted"),
        (lambda g: dtorch.ones(2, device_mesh="cpu", graph=g), MeshError, "DeviceMesh"),
        (
            lambda g: dtorch.ones(2, placements=[dtorch.Shard(0)] * 2, graph=g),
            PlacementError,
            "1-D mesh",
        ),
        (lambda g: dtorch.ones(3, graph=g).view(2, 2), ShapeError, "invalid for input of size 3"),
        (lambda g: dtorch.ones(3, graph=g)[5], IndexError, "out of bounds"),
        (lambda g: dtorch.ones(2, graph=g) + "a", TypeError, "dtorch.Tensor or a number"),
        (lambda g: dtorch.ones(2, graph=g).sum(dim=5), IndexError, r"sum: dimension 5 .* -1 to 0"),
        (lambda g: dtorch.ones(2, 3, graph=g).transpose(0, -3), IndexError, "transpose: dimension"),
        (lambda g: dtorch.cat([dtorch.ones(2, graph=g)], dim=1), IndexError, "cat: dimension 1"),
        (lambda g: dtorch.ones(2, 2, graph=g).softmax(2), IndexError, "softmax: dimension 2"),
        (lambda g: dtorch.randint(5, 2, (3,), graph=g), ValueError, "randint: low must be less"),
        (
            lambda g: dtorch.from_torch(torch.eye(2).to_sparse(), graph=g),
            ValueError,
            r"from_torch: .*sparse_coo.*to_dense\(\)",
        ),
        (
            lambda g: dtorch.from_torch(torch.empty(2, device="meta"), graph=g),
            ValueError,
            "from_torch: .*meta",
        ),
    ],
)
def test_bad_arguments_raise_clearly(
    call: Callable[[dtorch.Graph], Any], error: type[Exception], message: str, graph: dtorch.Graph
) -> None:
    with pytest.raises(error, match=message):
        call(graph)
    assert dtorch.ones(2, graph=graph).tolist() == [1.0, 1.0]  # the graph is unharmed


_T = torch.ones(2, 2)


@pytest.mark.parametrize(
    ("name", "call"),
    [
        ("conv2d", lambda x: dtorch.nn.functional.conv2d(x.view(1, 1, 2, 2), _T.view(1, 1, 2, 2))),
        ("embedding", lambda x: dtorch.nn.functional.embedding(x.long(), _T)),
        ("layer_norm", lambda x: dtorch.nn.functional.layer_norm(x, [2], torch.ones(2))),
        ("linear", lambda x: dtorch.nn.functional.linear(x, _T)),
        ("matmul", lambda x: dtorch.matmul(x, _T)),
        (
            "scaled_dot_product_attention",
            lambda x: dtorch.nn.functional.scaled_dot_product_attention(x, _T, x),
        ),
        ("batch_norm", lambda x: dtorch.nn.functional.batch_norm(x, torch.zeros(2), x[0])),
    ],
)
def test_torch_tensor_operands_refused_by_name(
    name: str, call: Callable[[dtorch.Tensor], Any], graph: dtorch.Graph
) -> None:
    """A torch tensor where an operator takes a dtorch tensor: a TypeError naming the operator,
    what it got and how to convert it (not an AttributeError from inside dtorch)."""
    x = dtorch.ones(2, 2, graph=graph)
    with pytest.raises(
        TypeError, match=rf"{name}: .*dtorch\.Tensor.* got torch\.Tensor.*from_torch"
    ):
        call(x)
    assert dtorch.ones(2, graph=graph).tolist() == [1.0, 1.0]

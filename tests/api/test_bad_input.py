"""Bad arguments get a clear dtorch error naming what was wrong and what is accepted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import dtorch
from dtorch.errors import MeshError, ParamError, PlacementError, ScalarError, ShapeError


def _nested() -> torch.Tensor:
    import warnings

    with warnings.catch_warnings():  # torch calls its strided nested tensors a prototype
        warnings.simplefilter("ignore", UserWarning)
        return torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])


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
        (
            lambda g: dtorch.from_torch(_nested(), graph=g),
            ValueError,
            r"from_torch: a nested .*to_padded_tensor",
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


_BIG = 2**64


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda g: dtorch.ones(3, graph=g)[::_BIG], ParamError, f"getitem: index holds {_BIG}"),
        (lambda g: dtorch.ones(1, graph=g).expand(_BIG), ParamError, f"expand: shape holds {_BIG}"),
        (lambda g: dtorch.ones(1, graph=g).repeat(_BIG), ParamError, "repeat: repeats holds"),
        (
            lambda g: dtorch.ones(3, graph=g).repeat_interleave(2**63),
            ParamError,
            f"repeat_interleave: repeats holds {2**63}, beyond the int64s",
        ),
        (
            lambda g: dtorch.ones(0, graph=g).repeat_interleave(_BIG),
            ParamError,
            f"repeat_interleave: repeats holds {_BIG}",
        ),
        (lambda g: dtorch.ones(3, graph=g).chunk(_BIG), ParamError, f"chunk: chunks holds {_BIG}"),
        (
            lambda g: dtorch.ones(3, graph=g).repeat(2**62),
            ShapeError,
            rf"repeat: output shape \[{3 * 2**62}\] has a size beyond 2\*\*63-1",
        ),
        (lambda g: dtorch.zeros(2**63, graph=g), ShapeError, r"zeros: shape .* beyond 2\*\*63-1"),
        (lambda g: dtorch.full((3,), _BIG, graph=g), ScalarError, f"full: {_BIG} is beyond"),
        (lambda g: dtorch.full((3,), -(2**63) - 1, graph=g), ScalarError, f"full: {-(2**63) - 1}"),
        (
            lambda g: dtorch.arange(_BIG - 3, _BIG, dtype=torch.float64, graph=g),
            ScalarError,
            f"arange: {_BIG} is beyond",
        ),
    ],
)
def test_ints_beyond_64_bits_raise_at_the_call(
    call: Callable[[dtorch.Graph], Any], error: type[Exception], message: str, graph: dtorch.Graph
) -> None:
    """torch takes sizes, steps and counts as int64s, and numbers as int64s or uint64s; it
    refuses others at once, and so does dtorch (they could not reach worker processes)."""
    with pytest.raises(error, match=message):
        call(graph)
    assert dtorch.ones(2, graph=graph).tolist() == [1.0, 1.0]  # the graph is unharmed
    assert dtorch.full((1,), _BIG - 1, dtype=torch.uint64, graph=graph).tolist() == [_BIG - 1]

"""``linear_cross_entropy`` and ``nn.LinearCrossEntropyLoss`` against torch's: torch's
reference form (``cross_entropy(linear(...))``), its K-dimensional weights, biases, class
probabilities, ``ignore_index`` None, label smoothing and reductions, on a batch sharded on dp
and on a head sharded on its classes (vocab-parallel: the logits are never gathered)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import dtorch
import dtorch.nn.functional as DF
from dtorch.errors import ParamError, ShapeError
from tests.api.ops_harness import S0, R, place

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(29)
_X = torch.randn(6, 4, generator=_G)
_W = torch.randn(7, 4, generator=_G)
_B = torch.randn(7, generator=_G)
_T = torch.tensor([0, 6, -100, 3, 3, 1])


@pytest.mark.parametrize(("x", "w"), [(R, R), (S0, R), (R, S0)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_against_torch(x, w, reduction: str, smoothing: float, graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", 2)
    kw: dict[str, Any] = {"reduction": reduction, "label_smoothing": smoothing}
    got = DF.linear_cross_entropy(
        place(_X, mesh, [x], graph), place(_W, mesh, [w], graph), _T,
        linear_bias=place(_B, mesh, [w], graph), **kw,
    )  # fmt: skip
    want = F.linear_cross_entropy(_X, _W, _T, linear_bias=_B, **kw)
    torch.testing.assert_close(got.to_torch(), want)


def test_k_dimensional_weights_and_probabilities(graph: dtorch.Graph) -> None:
    w, b = torch.randn(5, 3, 4, generator=_G), torch.randn(5, 3, generator=_G)
    target = torch.randint(0, 5, (6, 3), generator=_G)
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = place(_X, mesh, [S0], graph)
    got = DF.linear_cross_entropy(x, place(w, mesh, [R], graph), target,
                                  linear_bias=place(b, mesh, [R], graph))  # fmt: skip
    torch.testing.assert_close(got.to_torch(), F.linear_cross_entropy(_X, w, target, linear_bias=b))
    probabilities = torch.softmax(torch.randn(6, 7, generator=_G), 1)
    got = torch.nn.functional.linear_cross_entropy(x, place(_W, mesh, [R], graph), probabilities)
    torch.testing.assert_close(got.to_torch(), F.linear_cross_entropy(_X, _W, probabilities))


_REFUSALS: list[tuple[str, Callable[[Any, Any, Any], Any], type[Exception], str]] = [
    ("3-d input", lambda f, x, w: f(x[None], w, _T[:1]), ShapeError, "dimensionality 1 or 2"),
    ("1-d weight", lambda f, x, w: f(x, w[0], _T), ShapeError, "at least 2"),
    ("features", lambda f, x, w: f(x, w[:, :3], _T), ShapeError, "in_features"),
    ("bias", lambda f, x, w: f(x, w, _T, linear_bias=w[0]), ShapeError, "linear_bias shape"),
    ("ignore with probabilities", lambda f, x, w: f(x, w, torch.zeros(6, 7), ignore_index=1),
     ParamError, "ignore_index cannot be specified"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "call", "error", "text"), _REFUSALS, ids=[r[0] for r in _REFUSALS]
)
def test_refusals(case, call, error, text, graph) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(RuntimeError, match=text):
        call(F.linear_cross_entropy, _X, _W)
    mesh = dtorch.init_device_mesh("cpu", 2)
    x, w = place(_X, mesh, [R], graph), place(_W, mesh, [R], graph)
    with pytest.raises(error, match=text):
        call(DF.linear_cross_entropy, x, w)


def test_the_layer_is_torchs(graph: dtorch.Graph) -> None:
    kw: dict[str, Any] = {"bias": True, "out_features": (2,), "label_smoothing": 0.1}
    torch.manual_seed(3)
    theirs = torch.nn.LinearCrossEntropyLoss(4, 3, **kw)
    torch.manual_seed(3)
    ours = dtorch.nn.LinearCrossEntropyLoss(4, 3, **kw)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    target = torch.randint(0, 3, (6, 2), generator=_G)
    with torch.no_grad():
        want = theirs(_X, target)
    torch.testing.assert_close(ours(dtorch.tensor(_X), target).to_torch(), want)
    loaded = dtorch.nn.LinearCrossEntropyLoss(4, 3, **kw)
    loaded.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(loaded(dtorch.tensor(_X), target).to_torch(), want)
    with pytest.raises(ParamError, match="label_smoothing to be in range"):
        dtorch.nn.LinearCrossEntropyLoss(4, 3, label_smoothing=2.0)

"""torch.nn.functional's activation forms against torch: ``leaky_relu(negative_slope)``,
``elu(alpha)`` on every layout (shards kept, Partial refused), ``inplace=`` of ``silu``,
``leaky_relu`` and ``elu``, ``gelu(approximate=)``, and ``softmax``/``log_softmax`` with
torch's signature (``dim``, ``_stacklevel``, ``dtype``, the legacy ``dim=None``); 1-D, 2-D and
3-D meshes, even and uneven, thread and process mode."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import dtorch
import dtorch.nn.functional as DF
from dtorch.errors import PlacementError
from tests.api.ops_harness import (
    ALL_MESHES,
    S0,
    S1,
    P,
    R,
    expect_refusal,
    limit_for,
    place,
    run_api,
)

pytestmark = pytest.mark.timeout(120)

_X = torch.randn((5, 3), generator=torch.Generator().manual_seed(3)) * 2
_TABLE = {(R,): R, (S0,): S0, (S1,): S1}

_CASES: list[tuple[str, Callable[..., Any], Callable[..., Any]]] = [
    ("leaky_relu", DF.leaky_relu, F.leaky_relu),
    ("leaky_relu", lambda t: DF.leaky_relu(t, 0.2), lambda x: F.leaky_relu(x, 0.2)),
    ("elu", DF.elu, F.elu),
    ("elu", lambda t: DF.elu(t, alpha=0.5), lambda x: F.elu(x, alpha=0.5)),
]


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("name", "call", "ref"), _CASES)
def test_activations_every_layout(  # type: ignore[no-untyped-def]
    name, call, ref, mesh_shape, graph
) -> None:
    run_api(
        graph, name, call, [_X], mesh_shape, [ref(_X)], table=_TABLE,
        limit=limit_for(mesh_shape, n_d=10), exact=name == "leaky_relu",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("call", "ref"),
    [
        (lambda t: DF.silu(t, inplace=True), lambda x: F.silu(x, inplace=True)),
        (lambda t: DF.leaky_relu(t, 0.3, True), lambda x: F.leaky_relu(x, 0.3, True)),
        (lambda t: DF.elu(t, 2.0, inplace=True), lambda x: F.elu(x, 2.0, inplace=True)),
        (lambda t: DF.relu(t, inplace=True), lambda x: F.relu(x, inplace=True)),
    ],
)
def test_inplace(call: Callable[..., Any], ref: Callable[..., Any], graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 3))
    x = _X.clone()
    t = place(x, mesh, [S1, S0], graph)
    assert call(t) is t and t.placements == [S1, S0]
    assert ref(x) is x
    torch.testing.assert_close(t.to_torch(), x)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.int64])
def test_dtypes(dtype: torch.dtype, graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 3)
    x = (_X * 3).to(dtype)
    t = place(x, mesh, [S0], graph)
    for _, call, ref in _CASES:
        try:
            want = ref(x)
        except RuntimeError as error:
            expect_refusal(lambda call=call: call(t), error)
            continue
        out = call(t)
        assert out.dtype == want.dtype
        torch.testing.assert_close(out.to_torch(), want)


def test_gelu_approximate_and_refusal(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2, 2))
    t = place(_X, mesh, [S0, R, S1], graph)
    torch.testing.assert_close(
        DF.gelu(t, approximate="tanh").to_torch(), F.gelu(_X, approximate="tanh")
    )
    with pytest.raises(ValueError, match="approximate"):
        DF.gelu(t, approximate="erf")
    with pytest.raises(PlacementError, match=r"^elu: got \(S\(0\), P\).*accepted"):
        DF.elu(place(_X, dtorch.init_device_mesh("cpu", (2, 2)), [S0, P], graph))


def test_softmax_signature(graph: dtorch.Graph) -> None:
    """torch's ``(input, dim=None, _stacklevel=3, dtype=None)``, keyword and positional."""
    mesh = dtorch.init_device_mesh("cpu", (2, 3))
    x3 = torch.randn((4, 5, 6), generator=torch.Generator().manual_seed(1))
    t = place(x3, mesh, [S1, R], graph)
    for fn, ref in ((DF.softmax, F.softmax), (DF.log_softmax, F.log_softmax)):
        torch.testing.assert_close(
            fn(t, -1, 3, torch.float64).to_torch(), ref(x3, -1, 3, torch.float64)
        )
        torch.testing.assert_close(
            fn(t, dim=2, _stacklevel=5).to_torch(), ref(x3, dim=2, _stacklevel=5)
        )
        t0 = place(x3, mesh, [S1, dtorch.Shard(2)], graph)
        with pytest.warns(UserWarning):
            want = ref(x3)  # torch's legacy implicit dim: 0 for a 3-D input
        torch.testing.assert_close(fn(t0).to_torch(), want)

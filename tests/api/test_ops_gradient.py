"""``dtorch.gradient`` (and ``torch.gradient`` on dtorch tensors) against torch on the full
tensor, bit for bit: uniform spacings and sample coordinates, edge orders 1 and 2, on 1-D,
2-D and 3-D meshes; a dim the derivative is taken along must be whole (a shard is refused),
the others keep their shards, and a Partial stays Partial. Refusals are torch's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import dtorch
from dtorch.errors import DimError, ParamError, ShapeError
from tests.api.ops_harness import ALL_MESHES, S0, S1, S2, P, R, limit_for, place, run_api

pytestmark = pytest.mark.timeout(120)

_G = torch.Generator().manual_seed(3)
_FULL = torch.randn(5, 4, 6, generator=_G)


def _coordinates(n: int) -> torch.Tensor:
    return torch.cumsum(torch.rand(n, generator=_G) + 0.25, 0)


#: (keywords, the dims they differentiate along, whether a Partial is taken: not with
#: coordinates and edge order 1, whose end differences are divided by a coordinate tensor).
_CASES: list[tuple[dict[str, Any], tuple[int, ...], bool]] = [
    ({}, (0, 1, 2), True),
    ({"dim": 1}, (1,), True),
    ({"dim": (0, 2), "spacing": 0.5, "edge_order": 2}, (0, 2), True),
    ({"dim": [-1], "spacing": [3]}, (2,), True),
    ({"dim": (2, 0), "spacing": [_coordinates(6), _coordinates(5)]}, (2, 0), False),
    ({"dim": 1, "spacing": [_coordinates(4)], "edge_order": 2}, (1,), True),
    ({"spacing": (1.5, 2, 0.25)}, (0, 1, 2), True),
    ({"spacing": torch.tensor(0.25), "dim": 0}, (0,), True),
]


def _table(dims: tuple[int, ...], partial: bool) -> dict[tuple[Any, ...], Any]:
    table: dict[tuple[Any, ...], Any] = {(R,): R, (P,): P} if partial else {(R,): R}
    table.update({(s,): s for d, s in enumerate((S0, S1, S2)) if d not in dims})
    return table


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(
    ("kw", "dims", "partial"), _CASES, ids=[str(i) for i in range(len(_CASES))]
)
def test_gradient_equals_torch(kw, dims, partial, mesh_shape, graph) -> None:  # type: ignore[no-untyped-def]
    want = torch.gradient(_FULL, **kw)
    run_api(
        graph,
        "gradient",
        lambda t: torch.gradient(t, **kw),
        [_FULL],
        mesh_shape,
        list(want),
        table=_table(dims, partial),
        limit=limit_for(mesh_shape, n_d=8),
    )


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.int64, torch.int32])
@pytest.mark.parametrize("edge_order", [1, 2])
def test_dtypes_as_torch(dtype: torch.dtype, edge_order: int, graph: dtorch.Graph) -> None:
    full = (torch.randn(4, 5, generator=_G) * 8).to(dtype)
    t = place(full, dtorch.init_device_mesh("cpu", 2), [S0], graph)
    spacings: list[Any] = [1, 2, 0.75]
    if dtype != torch.float16:  # torch's coordinates arithmetic has no half kernels here
        spacings.append([torch.arange(5) * 2 + 1])
    for spacing in spacings:
        want = torch.gradient(full, spacing=spacing, dim=1, edge_order=edge_order)
        (got,) = dtorch.gradient(t, spacing=spacing, dim=1, edge_order=edge_order)
        assert got.dtype == want[0].dtype and got.placements == [S0]
        assert torch.equal(got.to_torch(), want[0]), spacing


def test_dtorch_coordinates_and_a_dtorch_0d_spacing(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    coords = _coordinates(6)
    t = place(_FULL[0], mesh, [S0], graph)
    (got,) = dtorch.gradient(t, spacing=[place(coords, mesh, [R], graph)], dim=1)
    assert torch.equal(got.to_torch(), torch.gradient(_FULL[0], spacing=[coords], dim=1)[0])
    got_all = dtorch.gradient(place(_FULL[0], mesh, [R], graph), spacing=dtorch.tensor(0.5))
    for g, w in zip(got_all, torch.gradient(_FULL[0], spacing=0.5), strict=True):
        assert torch.equal(g.to_torch(), w)


def test_a_0d_input_has_no_derivatives(graph: dtorch.Graph) -> None:
    assert dtorch.gradient(dtorch.tensor(2.0)) == torch.gradient(torch.tensor(2.0)) == ()


def _namespace(t: Any) -> Any:
    # torch's own argument parser refuses some calls before a dtorch tensor is looked at
    return torch if isinstance(t, torch.Tensor) else dtorch


_REFUSALS: list[tuple[str, Callable[[Any], Any], type[Exception], str]] = [
    ("edge order 3", lambda t: torch.gradient(t, edge_order=3), ParamError, "edge_order=1"),
    ("too short", lambda t: torch.gradient(t[:2], edge_order=2), ShapeError, "at least"),
    ("spacing length", lambda t: torch.gradient(t, spacing=[1.0]), ShapeError,
     "since dim argument was not given"),
    ("spacing and dim", lambda t: torch.gradient(t, spacing=[1.0, 2.0], dim=0), ShapeError,
     "same length"),
    ("2-d coordinates", lambda t: torch.gradient(t, spacing=[torch.ones(4, 1)], dim=1),
     ShapeError, "one dimension"),
    ("repeated dim", lambda t: torch.gradient(t, dim=(1, 1)), ShapeError, "multiple times"),
    ("dim out of range", lambda t: torch.gradient(t, dim=2), DimError, "out of range"),
    ("a str spacing", lambda t: torch.gradient(t, spacing="a"), TypeError, "spacing"),
    ("a number beside a tensor",
     lambda t: _namespace(t).gradient(t, spacing=[1.0, torch.arange(4.0)]), TypeError,
     "all numbers or all"),
    ("0-d tensors in a list", lambda t: torch.gradient(t, spacing=[torch.tensor(1.0)], dim=0),
     ShapeError, "0 dimensions"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "call", "error", "text"), _REFUSALS, ids=[r[0] for r in _REFUSALS]
)
def test_refusals_as_torch(case, call, error, text, graph) -> None:  # type: ignore[no-untyped-def]
    full = torch.randn(3, 4, generator=_G)
    with pytest.raises((RuntimeError, IndexError, TypeError)):
        call(full)
    with pytest.raises(error, match=text):
        call(place(full, dtorch.init_device_mesh("cpu", 2), [R], graph))


def test_coordinates_of_a_dim_of_two(graph: dtorch.Graph) -> None:
    full, coords = torch.tensor([[1.0, 3.0], [2.0, -1.0]]), torch.tensor([0.0, 0.5])
    (got,) = dtorch.gradient(place(full, dtorch.init_device_mesh("cpu", 2), [S0], graph),
                             spacing=[coords], dim=1)  # fmt: skip
    assert torch.equal(got.to_torch(), torch.gradient(full, spacing=[coords], dim=1)[0])


def test_uint8_is_refused_as_torch(graph: dtorch.Graph) -> None:
    full = torch.tensor([1, 2, 4], dtype=torch.uint8)
    with pytest.raises(RuntimeError, match="does not support uint8") as theirs:
        torch.gradient(full)
    with pytest.raises(RuntimeError, match=str(theirs.value)):
        torch.gradient(dtorch.tensor(full))

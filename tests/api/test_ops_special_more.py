"""torch.special's Bessel and Airy functions of one tensor and its functions of two (``zeta``,
``xlog1py``, ``gammainc``/``gammaincc`` and ``torch.igamma``/``igammac``, the orthogonal
polynomials) through ``dtorch.special`` and through ``torch.special.*`` on dtorch tensors,
against torch on the full tensors: torch's kernel runs on every shard, so values are torch's
bit for bit; shards are kept (two tensors broadcast as ``add`` does) and a Partial is refused
(none is linear). Dtypes and refusals are torch's."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import dtorch
from dtorch.errors import PlacementError
from tests.api.ops_harness import (
    ALL_MESHES,
    S0,
    S1,
    P,
    R,
    compare,
    elementwise_table,
    expect_refusal,
    limit_for,
    place,
    run_api,
)

pytestmark = pytest.mark.timeout(120)

_G = torch.Generator().manual_seed(11)

_UNARY = (
    "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0",
    "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
    "spherical_bessel_j0", "airy_ai",
)  # fmt: skip
_POLYNOMIALS = (
    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
    "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
    "laguerre_polynomial_l", "legendre_polynomial_p",
)  # fmt: skip
_BINARY = ("zeta", "xlog1py", "gammainc", "gammaincc", *_POLYNOMIALS)


def _positive(*shape: int) -> torch.Tensor:
    # inside every function's domain (the K Bessels and zeta's q want x > 0)
    return torch.rand(shape, generator=_G) * 3 + 0.1


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize("name", _UNARY)
def test_unary_layouts(name: str, mesh_shape: tuple[int, ...], graph: dtorch.Graph) -> None:
    full = _positive(5, 3)
    want = getattr(torch.special, name)(full)
    run_api(
        graph,
        name,
        getattr(torch.special, name),
        [full],
        mesh_shape,
        [want],
        table={(R,): R, (S0,): S0, (S1,): S1},
        limit=limit_for(mesh_shape, n_d=8),
    )


#: (first input, second input): a degree tensor of ints for the polynomials, a column that
#: broadcasts along rows for the others.
def _pair(name: str) -> tuple[torch.Tensor, torch.Tensor]:
    if name in _POLYNOMIALS:
        return torch.rand(5, 3, generator=_G) * 2 - 0.5, torch.randint(0, 6, (5, 1), generator=_G)
    return _positive(5, 3), _positive(5, 1)


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize("name", _BINARY)
def test_binary_layouts(name: str, mesh_shape: tuple[int, ...], graph: dtorch.Graph) -> None:
    a, b = _pair(name)
    want = getattr(torch.special, name)(a, b)
    run_api(
        graph,
        name,
        getattr(torch.special, name),
        [a, b],
        mesh_shape,
        [want],
        table=elementwise_table([a.shape, b.shape]),
        limit=limit_for(mesh_shape, n_d=8),
    )


@pytest.mark.parametrize("name", ["zeta", "xlog1py", *_POLYNOMIALS])
def test_a_number_on_either_side(name: str, graph: dtorch.Graph) -> None:
    a, _ = _pair(name)
    t = place(a, dtorch.init_device_mesh("cpu", 2), [S0], graph)
    fn = getattr(torch.special, name)
    for number in (3, 2.5):
        if name in _POLYNOMIALS and isinstance(number, float):
            continue  # torch's polynomials take an integral degree number only as an int
        compare(fn(t, number).to_torch(), fn(a, number), True, f"{name}(t, {number})")
    if name in _POLYNOMIALS:  # a number x: the tensor is then the degrees
        degrees = torch.arange(5)
        got = fn(0.5, place(degrees, dtorch.init_device_mesh("cpu", 2), [S0], graph))
        compare(got.to_torch(), fn(0.5, degrees), True, name)
        return
    for number in (1.5, 2):
        compare(fn(number, t).to_torch(), fn(number, a), True, f"{name}({number}, t)")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (torch.float64, torch.float64),
        (torch.float32, torch.float64),
        (torch.int64, torch.float32),
        (torch.int32, torch.int64),
    ],
)
@pytest.mark.parametrize("name", [*_BINARY, *_UNARY])
def test_dtypes_as_torch(name: str, a: torch.dtype, b: torch.dtype, graph: dtorch.Graph) -> None:
    x, y = (_positive(4, 3) * 2).to(a), (_positive(4, 3) * 2).to(b)
    mesh = dtorch.init_device_mesh("cpu", 2)
    fn = getattr(torch.special, name)
    args = (x,) if name in _UNARY else (x, y)
    try:
        want = fn(*args)
    except (RuntimeError, TypeError) as error:
        expect_refusal(lambda: fn(*(place(v, mesh, [S0], graph) for v in args)), error)
        return
    got = fn(*(place(v, mesh, [S0], graph) for v in args))
    compare(got.to_torch(), want, True, name)


@pytest.mark.parametrize(("theirs", "ours"), [("igamma", "gammainc"), ("igammac", "gammaincc")])
def test_igamma_is_gammainc(theirs: str, ours: str, graph: dtorch.Graph) -> None:
    a, b = _positive(4, 3), _positive(4, 3)
    mesh = dtorch.init_device_mesh("cpu", 2)
    x, y = place(a, mesh, [S0], graph), place(b, mesh, [R], graph)
    for got in (getattr(dtorch, theirs)(x, y), getattr(torch, theirs)(x, y)):
        assert got.placements == [S0]
        compare(got.to_torch(), getattr(torch.special, ours)(a, b), True, theirs)


@pytest.mark.parametrize("call", [dtorch.special.gammainc, dtorch.igammac])
def test_incomplete_gamma_takes_no_number(call: Any, graph: dtorch.Graph) -> None:
    t = place(_positive(4), dtorch.init_device_mesh("cpu", 2), [S0], graph)
    with pytest.raises(TypeError, match=r"other must be a tensor, got float"):
        call(t, 2.0)
    with pytest.raises(TypeError, match=r"input must be a tensor, got int"):
        call(2, t)


def test_a_partial_is_refused_naming_the_call(graph: dtorch.Graph) -> None:
    t = place(_positive(4), dtorch.init_device_mesh("cpu", 2), [P], graph)
    with pytest.raises(PlacementError, match=r"^bessel_y0: got \(P,\)"):
        dtorch.special.bessel_y0(t)
    with pytest.raises(PlacementError, match=r"^hermite_polynomial_h: got \(P,\)"):
        torch.special.hermite_polynomial_h(t, 2)


@pytest.mark.parametrize(
    "name", ["zeta", "xlog1py", "chebyshev_polynomial_v", "legendre_polynomial_p"]
)
def test_a_python_number_is_torchs_number(name: str, graph: dtorch.Graph) -> None:
    """A float beside a float64 tensor is a double, and beside a float16 0-d tensor keeps
    float16 (or torch's refusal of it), as torch's number forms take it, not a float32 0-d
    tensor."""
    fn = getattr(torch.special, name)
    y = torch.tensor([3.0, 0.5, 8.4], dtype=torch.float64)
    t = place(y, dtorch.init_device_mesh("cpu", 2), [S0], graph)
    for number in (1.1, 1e30):
        compare(fn(t, number).to_torch(), fn(y, number), True, f"{name}(t, {number})")
        compare(fn(number, t).to_torch(), fn(number, y), True, f"{name}({number}, t)")
    half = torch.tensor(0.75, dtype=torch.float16)
    try:
        want = fn(half, 3.0)
    except NotImplementedError as error:
        expect_refusal(lambda: fn(dtorch.tensor(half), 3.0), error)
        return
    got = fn(dtorch.tensor(half), 3.0)
    assert got.dtype == want.dtype == torch.float16
    compare(got.to_torch(), want, True, name)


def test_special_round_refuses_integers_as_torch(graph: dtorch.Graph) -> None:
    full = torch.tensor([1.234, -2.5, 0.5])
    t = place(full, dtorch.init_device_mesh("cpu", 2), [S0], graph)
    compare(torch.special.round(t, decimals=2).to_torch(), torch.special.round(full, decimals=2),
            True, "round")  # fmt: skip
    with pytest.raises(NotImplementedError):
        torch.special.round(torch.tensor([1, 2]))
    with pytest.raises(NotImplementedError, match="round_vml_cpu"):
        torch.special.round(dtorch.tensor([1, 2]))
    assert torch.round(dtorch.tensor([1, 2])).tolist() == [1, 2]  # torch.round takes them

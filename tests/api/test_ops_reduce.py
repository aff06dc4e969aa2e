"""Reductions (``sum mean prod max min any all argmax argmin``, with dims and keepdim; ``max``
and ``min`` over a dim returning values and indices) and ``softmax``/``log_softmax`` through
the public API against torch, on 1-D, 2-D and 3-D meshes, even and uneven shards: every layout
on 1-D meshes (a seeded sample on the larger ones), output placements (summing a sharded dim
gives Partial; max/min/any/all/prod/arg* give Replicate, combining the devices' blocks;
softmax keeps it, all-reducing each row's maximum and sum) and the rejections."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import dtorch
import dtorch.nn.functional as DF
from dtorch import Placement
from dtorch.errors import PlacementError, ShapeError
from tests.api.ops_harness import (
    ALL_MESHES,
    S0,
    S1,
    P,
    R,
    Shard,
    Table,
    choices,
    expect_refusal,
    limit_for,
    place,
    run_api,
)

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(55)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(55)


def reduce_table(
    ndim: int, dims: tuple[int, ...] | None, keepdim: bool, linear: bool
) -> dict[tuple[Any, ...], Any]:
    """One mesh dim: a shard of a kept dim stays (at its new index); a shard of a reduced dim
    gives Partial for the linear reductions and Replicate for the others (the devices combine
    their blocks' results); a Partial input stays Partial for the linear ones and is refused
    by the others."""
    reduced = set(range(ndim)) if dims is None else {d % ndim for d in dims}
    table: dict[tuple[Any, ...], Any] = {(R,): R}
    for d in range(ndim):
        if d not in reduced:
            table[(Shard(d),)] = Shard(d if keepdim else d - sum(r < d for r in reduced))
        else:
            table[(Shard(d),)] = P if linear else R
    return {**table, (P,): P} if linear else table


def _amax(x: torch.Tensor, dims: Any, keepdim: bool) -> torch.Tensor:
    return torch.amax(x, dims if dims is not None else tuple(range(x.ndim)), keepdim=keepdim)


def _amin(x: torch.Tensor, dims: Any, keepdim: bool) -> torch.Tensor:
    return torch.amin(x, dims if dims is not None else tuple(range(x.ndim)), keepdim=keepdim)


def _prod(x: torch.Tensor, dims: Any, keepdim: bool) -> torch.Tensor:
    for d in sorted(d % x.ndim for d in (dims if dims is not None else range(x.ndim)))[::-1]:
        x = torch.prod(x, d, keepdim=keepdim)
    return x


def _values(method: str) -> Callable[..., Any]:
    """``max()``/``min()`` of everything, or the values of ``max(dim)``/``min(dim)``."""

    def call(t: Any, dims: Any, keepdim: bool) -> Any:
        if dims is None:
            return getattr(t, method)()
        return getattr(t, method)(dims[0], keepdim=keepdim).values

    return call


def _call(method: str) -> Callable[..., Any]:
    def call(t: Any, dims: Any, keepdim: bool) -> Any:
        if dims is None and not keepdim:
            return getattr(t, method)()
        return getattr(t, method)(dims, keepdim=keepdim)

    return call


def _torch(fn: Callable[..., Any]) -> Callable[..., Any]:
    def ref(x: torch.Tensor, dims: Any, keepdim: bool) -> torch.Tensor:
        if dims is None:
            return fn(x) if not keepdim else fn(x, tuple(range(x.ndim)), keepdim=True)
        return fn(x, dims, keepdim=keepdim)

    return ref


def _arg(fn: Callable[..., Any]) -> Callable[..., Any]:
    def ref(x: torch.Tensor, dims: Any, keepdim: bool) -> torch.Tensor:
        return fn(x, dims if dims is None else dims[0], keepdim=keepdim)

    return ref


def _argcall(method: str) -> Callable[..., Any]:
    def call(t: Any, dims: Any, keepdim: bool) -> Any:
        return getattr(t, method)(None if dims is None else dims[0], keepdim=keepdim)

    return call


#: name, dtorch call (t, dims, keepdim), torch reference, input kind, linear, exact.
_REDUCTIONS: list[tuple[str, Callable[..., Any], Callable[..., Any], str, bool, bool]] = [
    ("sum", _call("sum"), _torch(torch.sum), "float", True, False),
    ("mean", _call("mean"), _torch(torch.mean), "float", True, False),
    ("prod", _call("prod"), _prod, "int", False, True),
    ("max", _values("max"), _amax, "float", False, True),
    ("min", _values("min"), _amin, "float", False, True),
    ("any", _call("any"), _torch(torch.any), "bool", False, True),
    ("all", _call("all"), _torch(torch.all), "bool", False, True),
    ("argmax", _argcall("argmax"), _arg(torch.argmax), "float", False, True),
    ("argmin", _argcall("argmin"), _arg(torch.argmin), "float", False, True),
]


def _input(kind: str) -> torch.Tensor:
    if kind == "bool":
        return torch.rand((5, 3, 4), generator=_G) > 0.2
    if kind == "int":
        return torch.randint(-2, 3, (5, 3, 4), generator=_G)
    return torch.randn((5, 3, 4), generator=_G)


_DIMS_1D = [None, (0,), (1,), (-1,), (0, 2)]
_DIMS_ND = [None, (1,), (0, 2)]


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("name", "call", "ref", "kind", "linear", "exact"), _REDUCTIONS)
def test_reduction_every_layout(  # type: ignore[no-untyped-def]
    name, call, ref, kind, linear, exact, mesh_shape, graph
) -> None:
    x = _input(kind)
    one_d = len(mesh_shape) == 1
    for dims in _DIMS_1D if one_d else _DIMS_ND:
        if name.startswith("arg") and dims is not None and len(dims) > 1:
            continue
        one_dim = name in ("prod", "max", "min")  # torch takes one dim (or none) there
        if one_dim and dims is not None and len(dims) > 1:
            continue
        for keepdim in (False, True) if dims is not None or not one_dim else (False,):
            table = reduce_table(x.ndim, dims, keepdim, linear)
            run_api(
                graph, name, lambda t, d=dims, k=keepdim: call(t, d, k), [x], mesh_shape,
                [ref(x, dims, keepdim)], table=table, exact=exact,
                limit=limit_for(mesh_shape, n_d=6), seed=hash((dims, keepdim)) % 97,
            )  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int8, torch.float32])
def test_any_all_over_no_dim_reduce_nothing(dtype: torch.dtype, graph: dtorch.Graph) -> None:
    """torch 2.13: ``any``/``all`` over an empty list of dims give each element's truth
    (uint8 stays uint8), where ``sum`` over one reduces every dim."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x = torch.tensor([[1, 0, 3], [0, 0, 2]]).to(dtype)
    for placements in ([dtorch.Shard(0), dtorch.Shard(1)], [dtorch.Replicate()] * 2):
        t = place(x, mesh, placements, graph)
        for got, want in (
            (t.any(()), x.any(())),
            (t.all(dim=[]), x.all(dim=[])),
            (dtorch.any(t, ()), torch.any(x, ())),
            (torch.all(t, []), torch.all(x, [])),
        ):
            assert got.dtype == want.dtype and got.placements == placements
            assert torch.equal(got.to_torch(), want)


def test_summing_a_sharded_dim_gives_partial(graph: dtorch.Graph) -> None:
    """``sum``/``mean`` of a sharded dim are Partial (mean divides by the global size), on
    uneven shards; the functions ``dtorch.sum``/``dtorch.mean`` too."""
    mesh = dtorch.init_device_mesh("cpu", (2, 3))
    x = torch.randn((7, 5), generator=_G)
    t = place(x, mesh, [S0, S1], graph)
    for out, want, placements in (
        (t.sum(0), x.sum(0), [P, S0]),
        (dtorch.sum(t, 1), x.sum(1), [S0, P]),
        (t.mean(), x.mean(), [P, P]),
        (dtorch.mean(t, dim=(0, 1), keepdim=True), x.mean((0, 1), keepdim=True), [P, P]),
        (t.sum(dim=-1, keepdim=True), x.sum(-1, keepdim=True), [S0, P]),
    ):
        assert out.placements == placements and out.shape == want.shape
        torch.testing.assert_close(out.to_torch(), want)


def test_functions_and_values_indices(graph: dtorch.Graph) -> None:
    """``dtorch.max/min/any/all/argmax/argmin``; ``max(dim)`` gives (values, indices) like
    torch, both keeping the shards of the other dims."""
    mesh = dtorch.init_device_mesh("cpu", (3, 2))
    x = torch.randn((4, 7), generator=_G)
    t = place(x, mesh, [S1, R], graph)
    values, indices = t.max(0)
    assert values.placements == indices.placements == [S0, R]
    want = x.max(0)
    assert torch.equal(values.to_torch(), want.values)
    assert torch.equal(indices.to_torch(), want.indices)
    low = dtorch.min(t, dim=0, keepdim=True)
    assert torch.equal(low.indices.to_torch(), x.min(0, keepdim=True).indices)
    assert torch.equal(low.values.to_torch(), x.min(0, keepdim=True).values)
    whole = place(x, mesh, [R, R], graph)
    for out, ref in (
        (dtorch.max(whole), x.max()), (dtorch.min(whole.T), x.min()),
        (dtorch.argmax(t, 0), x.argmax(0)), (dtorch.argmin(t, dim=0), x.argmin(0)),
        (dtorch.any(t > 1, 0), (x > 1).any(0)), (dtorch.all(t < 2, dim=0), (x < 2).all(0)),
        (dtorch.any(whole > 1), (x > 1).any()), (dtorch.all(whole < 5), (x < 5).all()),
    ):  # fmt: skip
        assert torch.equal(out.to_torch(), ref)
    assert dtorch.argmax(t, 0).placements == [S0, R]


_DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.bool]


@pytest.mark.parametrize("dtype", _DTYPES, ids=str)
def test_reduction_dtypes(dtype: torch.dtype, graph: dtorch.Graph) -> None:
    """Result dtypes and values of every reduction on every dtype (sum of ints and bools is
    int64, mean of ints is refused like torch), over a sharded dim where linear."""
    mesh = dtorch.init_device_mesh("cpu", 3)
    x = (torch.randn((7, 4), generator=_G) * 3).to(dtype)
    if dtype == torch.bool:
        x = torch.rand((7, 4), generator=_G) > 0.5
    for name, call, ref, _, linear, _ in _REDUCTIONS:
        t = place(x, mesh, [S0 if linear else S1], graph)
        try:
            want = ref(x, (0,), False)
        except RuntimeError as error:
            expect_refusal(lambda call=call, t=t: call(t, (0,), False).to_torch(), error)
            continue
        out = call(t, (0,), False)
        assert out.dtype == want.dtype, name
        assert out.placements == [P if linear else S0], name
        torch.testing.assert_close(out.to_torch(), want, msg=name)


def test_sum_and_mean_dtype_argument(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 4)
    x = torch.randint(-5, 5, (6, 3), generator=_G, dtype=torch.int32)
    t = place(x, mesh, [S0], graph)
    for out, want in (
        (t.sum(0, dtype=torch.float64), x.sum(0, dtype=torch.float64)),
        (t.float().mean(0, dtype=torch.float64), x.float().mean(0, dtype=torch.float64)),
        (t.sum(), x.sum()),
    ):
        assert out.dtype == want.dtype and out.placements == [P]
        torch.testing.assert_close(out.to_torch(), want)


def test_a_partial_sum_converting_to_a_nonlinear_dtype_is_refused(graph: dtorch.Graph) -> None:
    """Parts converted one by one (float to int, bool to int64) do not sum to the converted
    sum, so such a sum of a Partial input is refused; a sharded reduced dim still gives P."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.tensor([[0.6, 0.7], [1.2, -0.4]])
    partial = place(x, mesh, [R], graph).view([P])  # holds 2 * x
    flags = place(x > 1, mesh, [P], graph)
    for call in (lambda: partial.sum(1, dtype=torch.int32), flags.sum):
        with pytest.raises(PlacementError, match="conversion to the result dtype is not linear"):
            call()
    torch.testing.assert_close(partial.sum(1).to_torch(), (2 * x).sum(1))
    sharded = place(x, mesh, [S0], graph).sum(0, dtype=torch.int32)
    assert sharded.placements == [P]
    torch.testing.assert_close(sharded.to_torch(), x.sum(0, dtype=torch.int32))


def _softmax_table(ndim: int) -> Table:
    """One mesh dim: every shard stays, the softmax dim's too (its rows' maxima and sums are
    all-reduced); no Partial."""
    return {(p,): p for p in choices(ndim, partial=False)}


_SOFTMAX: list[tuple[str, Callable[..., Any], Callable[..., Any]]] = [
    ("softmax", lambda t, d: t.softmax(d), lambda x, d: x.softmax(d)),
    ("softmax", dtorch.softmax, torch.softmax),
    ("softmax", lambda t, d: DF.softmax(t, dim=d), lambda x, d: F.softmax(x, dim=d)),
    ("log_softmax", lambda t, d: t.log_softmax(d), lambda x, d: x.log_softmax(d)),
    ("log_softmax", DF.log_softmax, F.log_softmax),
]


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("name", "call", "ref"), _SOFTMAX)
def test_softmax_every_layout(  # type: ignore[no-untyped-def]
    name, call, ref, mesh_shape, graph
) -> None:
    x = torch.randn((5, 3, 4), generator=_G) * 3
    for dim in (0, 1, -1):
        run_api(
            graph, name, lambda t, d=dim: call(t, d), [x], mesh_shape, [ref(x, dim)],
            table=_softmax_table(3), exact=False, limit=limit_for(mesh_shape, n_d=8),
            seed=dim,
        )  # fmt: skip


def test_softmax_dtypes(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x = torch.randn((6, 5), generator=_G)
    t = place(x, mesh, [S0, S0], graph)
    for out, want in (
        (t.softmax(1, dtype=torch.float64), x.softmax(1, dtype=torch.float64)),
        (t.bfloat16().softmax(-1), x.bfloat16().softmax(-1)),
        (t.double().log_softmax(1), x.double().log_softmax(1)),
    ):
        assert out.dtype == want.dtype and out.placements == [S0, S0]
        torch.testing.assert_close(out.to_torch(), want)


@pytest.mark.parametrize(
    ("mesh_shape", "placements"),
    [((3,), [S1]), ((2, 2), [S1, S1]), ((2, 2), [S0, S1]), ((2, 1, 2), [S1, R, S0])],
)
def test_softmax_over_a_sharded_dim_special_values(
    mesh_shape: tuple[int, ...], placements: list[Placement], graph: dtorch.Graph
) -> None:
    """The split softmax against torch's on rows of -inf (a device's whole block, or the
    whole row: NaN as torch), NaN, huge values and 0 entries on a device (4 columns over 3
    devices), in float32, float16, bfloat16, float64 and with ``dtype=``."""
    x = torch.randn((4, 4), generator=_G) * 30
    x[0, :2] = -math.inf
    x[1] = -math.inf
    x[2, 3] = math.nan
    x[3] = torch.tensor([1e4, -1e4, 1e4, 3.0])
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        t = place(x.to(dtype), mesh, placements, graph)
        for got, want in (
            (t.softmax(1), x.to(dtype).softmax(1)),
            (t.log_softmax(-1), x.to(dtype).log_softmax(-1)),
            (t.softmax(1, dtype=torch.float64), x.to(dtype).softmax(1, dtype=torch.float64)),
        ):
            assert got.dtype == want.dtype and got.placements == placements
            torch.testing.assert_close(got.to_torch(), want, equal_nan=True)


def test_softmax_over_a_sharded_dim_casts_to_dtype_first_and_softmin_too(
    graph: dtorch.Graph,
) -> None:
    """``dtype=`` narrower than the input rounds the input first, as torch (1e5 is inf in
    float16: NaN rows; 100.3 is 100.5 in bfloat16); ``softmin`` splits as ``softmax``."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.tensor([[1e5, 0.0, 1.0, 2.0], [100.3, 100.0, 0.0, 1.0]])
    t = place(x, mesh, [S1], graph)
    for dtype in (torch.float16, torch.bfloat16):
        for got, want in (
            (t.log_softmax(1, dtype=dtype), x.log_softmax(1, dtype=dtype)),
            (t.softmax(-1, dtype=dtype), x.softmax(-1, dtype=dtype)),
            (
                place(x.long(), mesh, [S1], graph).softmax(1, dtype=dtype),
                x.long().softmax(1, dtype=dtype),
            ),
        ):
            assert got.dtype == want.dtype
            torch.testing.assert_close(got.to_torch(), want, equal_nan=True)
    y = torch.randn((3, 5), generator=_G)
    for dim in (0, 1):
        got = DF.softmin(place(y, mesh, [Shard(dim)], graph), dim)
        assert got.placements == [Shard(dim)]
        torch.testing.assert_close(got.to_torch(), F.softmin(y, dim))


def test_softmax_over_a_sharded_dim_replays_and_refuses_partial(graph: dtorch.Graph) -> None:
    """A traced program replays the split softmax; a Partial input is refused."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.randn((3, 8), generator=_G)
    program = dtorch.trace(lambda t: t.log_softmax(1) * 2, place(x, mesh, [S1], graph))
    for scale in (1.0, -3.0):
        got = program(place(x * scale, mesh, [S1], graph))
        torch.testing.assert_close(got.to_torch(), (x * scale).log_softmax(1) * 2)
    with pytest.raises(PlacementError, match="A softmax is not linear"):
        place(x, mesh, [P], graph).softmax(1)


def test_rejections(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.randn((4, 3), generator=_G)
    t = place(x, mesh, [S0], graph)
    p, ints = place(x, mesh, [P], graph), place(x.round().int(), mesh, [P], graph)
    with pytest.raises(PlacementError) as info:
        p.max(0)
    text = str(info.value)
    assert text.startswith("max: got (P,) on mesh (2,); accepted per mesh dimension: R -> R")
    assert "are not linear: redistribute a Partial input to Replicate first" in text
    for name, call in (
        ("max", p.max),
        ("min", lambda: p.min(dim=0)),
        ("argmax", p.argmax),
        ("argmin", lambda: p.argmin(0)),
        ("any", lambda: ints.any(0)),
        ("all", ints.all),
        ("prod", lambda: p.prod(0)),
        ("amax", lambda: p.amax(1)),
    ):
        with pytest.raises(PlacementError, match=rf"^{name}: got \(P,\).*accepted"):
            call()
    p = place(x, mesh, [P], graph)
    for name, call in (
        ("softmax", lambda: p.softmax(1)),
        ("log_softmax", lambda: p.log_softmax(0)),
    ):
        with pytest.raises(PlacementError, match=rf"^{name}: got \(P,\).*accepted"):
            call()
    with pytest.raises(PlacementError, match=r"^max: got \(P,\).*accepted"):
        p.max(1)
    assert p.sum(1).placements == [P]
    with pytest.raises((ShapeError, IndexError), match="out of range"):
        t.sum(2)
    with pytest.raises(TypeError, match=r"^argmax\(\): argument 'dim' must be int"):
        t.argmax((0, 1))  # type: ignore[arg-type]  # torch's TypeError
    with pytest.raises(TypeError, match=r"^max: dim must be an int"):
        t.max((0, 1))  # torch.max takes no tuple of dims either


_EMPTY_REFUSED: list[tuple[str, Callable[[Any], Any]]] = [
    ("max(0)", lambda t: t.max(0)),
    ("min(dim=-2, keepdim)", lambda t: t.min(dim=-2, keepdim=True)),
    ("argmax(0)", lambda t: t.argmax(0)),
    ("argmin(0, keepdim)", lambda t: t.argmin(0, keepdim=True)),
    ("max()", lambda t: t.max()),
    ("min()", lambda t: t.min()),
    ("argmax()", lambda t: t.argmax()),
    ("argmin()", lambda t: t.argmin()),
]
_EMPTY_ALLOWED: list[tuple[str, Callable[[Any], Any]]] = [
    ("max(1)", lambda t: t.max(1).values),
    ("min(1) indices", lambda t: t.min(1).indices),
    ("argmax(1)", lambda t: t.argmax(1)),
    ("sum(0)", lambda t: t.sum(0)),
    ("sum()", lambda t: t.sum()),
    ("mean(0)", lambda t: t.mean(0)),
    ("prod(0)", lambda t: t.prod(0)),
    ("any(0)", lambda t: (t > 0).any(0)),
    ("all()", lambda t: (t > 0).all()),
    ("amax(1)", lambda t: t.amax(1)),
    ("prod()", lambda t: t.prod()),
]


@pytest.mark.parametrize("mesh_shape", [(2,), (2, 2)])
def test_reductions_over_an_empty_dim(mesh_shape: tuple[int, ...], graph: dtorch.Graph) -> None:
    """Where torch refuses a reduction over a dim of size 0 (max/min/argmax/argmin), dtorch
    refuses at the call with an error of torch's type (IndexError; max()/min() of an empty
    tensor: torch's RuntimeError is a ShapeError, as dtorch's other shape errors) and torch's
    message; sum/mean/prod/any/all (and any reduction over a non-empty dim) give torch's
    values, on a replicated input and on one sharded on dim 1."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    x = torch.zeros(0, 3)
    for placements in ([R] * len(mesh_shape), [Shard(1)] * len(mesh_shape)):
        t = place(x, mesh, placements, graph)
        for _, call in _EMPTY_REFUSED:
            with pytest.raises((IndexError, RuntimeError)) as want:
                call(x)
            error = IndexError if want.type is IndexError else ShapeError
            with pytest.raises(error, match=re.escape(str(want.value)[:40])):
                call(t)
        for name, call in _EMPTY_ALLOWED:
            want_value, got = call(x), call(t)
            assert got.shape == want_value.shape, name
            torch.testing.assert_close(got.to_torch(), want_value, equal_nan=True)

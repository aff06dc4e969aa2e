"""torch's aliases, stacking functions and small operators of ``dtorch.api.ops.aliases_more``
and ``aliases_create`` through the public API against torch on the full tensors: a seeded
sample of layouts (even and uneven shards, Partial included) on 1-D, 2-D and 3-D meshes,
several dtypes; the in-place forms written back into the tensor; torch's refusals refused
at the call. Every test runs in thread and process mode (the ``graph`` fixture)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import dtorch
from dtorch.errors import PlacementError
from dtorch.ir.placement import format_placements
from tests.api.ops_harness import S0, S1, R, limit_for, place, run_api

pytestmark = pytest.mark.timeout(60)

MESHES = ((2,), (3,), (2, 3), (2, 2, 2))
_G = torch.Generator().manual_seed(11)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(11)


def _rand(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    if dtype.is_floating_point:
        return torch.randn(shape, generator=_G).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=_G).bool()
    return torch.randint(-5, 6, shape, generator=_G).to(dtype)


def _run(graph: Any, name: str, fn: Callable[..., Any], fulls: list[torch.Tensor], want: Any,
         mesh_shape: tuple[int, ...], limit: int = 12, exact: bool = True) -> None:  # fmt: skip
    """``fn`` on a sample of layouts of ``fulls``: torch's ``want`` wherever it is accepted;
    a refusal names ``name``, the placements got and what is accepted."""
    wants = list(want) if isinstance(want, tuple) else [want]
    limit = min(limit, limit_for(mesh_shape, n_d=6))
    accepted = run_api(graph, name, _named(name, fn), fulls, mesh_shape, wants, table=None,
                       exact=exact, limit=limit)  # fmt: skip
    assert accepted, f"{name}: no layout accepted on {mesh_shape}"


def _named(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, whose refusals must name ``name`` (a composite's part says what it accepts)."""

    def run(*inputs: dtorch.Tensor) -> Any:
        try:
            return fn(*inputs)
        except PlacementError as error:
            text = str(error)
            assert "accepted" in text, text
            given = ", ".join(format_placements(t.placements) for t in inputs)
            raise PlacementError(f"{name}: {text} (inputs {given})") from error

    return run


# --- stacking ---------------------------------------------------------------------------------
_STACKS = {
    "hstack": (dtorch.hstack, torch.hstack),
    "vstack": (dtorch.vstack, torch.vstack),
    "row_stack": (dtorch.row_stack, torch.vstack),
    "dstack": (dtorch.dstack, torch.dstack),
    "column_stack": (dtorch.column_stack, torch.column_stack),
}
_STACK_SHAPES = {
    "hstack": [((5,), (3,)), ((4, 2), (4, 3)), ((), (2,)), ((2, 3, 2), (2, 1, 2))],
    "vstack": [((3,), (3,)), ((2, 3), (3,)), ((), ())],
    "row_stack": [((3,), (1, 3))],
    "dstack": [((3,), (3,)), ((5, 2), (5, 2, 3)), ((), ())],
    "column_stack": [((5,), (5, 2)), ((), ()), ((3,), (3,))],
}


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("name", sorted(_STACKS))
def test_stacks(name: str, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    ours, theirs = _STACKS[name]
    for i, (sa, sb) in enumerate(_STACK_SHAPES[name]):
        dtype = (torch.float32, torch.int64, torch.bool)[i % 3]
        a, b = _rand(*sa, dtype=dtype), _rand(*sb, dtype=dtype)
        _run(graph, "cat", lambda x, y: ours([x, y]), [a, b], theirs([a, b]), mesh_shape)
    a = _rand(4, 2, dtype=torch.float64)
    _run(graph, "cat", lambda x: ours((x,)), [a], theirs((a,)), mesh_shape, limit=4)


def test_concatenate_and_stack_refusals(graph) -> None:  # type: ignore[no-untyped-def]
    a = torch.arange(6.0).reshape(2, 3)
    x = dtorch.from_torch(a)
    assert dtorch.concatenate([x, x], 1).tolist() == torch.concatenate([a, a], 1).tolist()
    assert dtorch.concatenate is dtorch.cat and dtorch.row_stack([x]).shape == (2, 3)
    for name in _STACKS:
        with pytest.raises(RuntimeError, match="non-empty"):
            getattr(dtorch, name)([])
        with pytest.raises(TypeError, match="tuple or list of Tensors"):
            getattr(dtorch, name)(x)
        with pytest.raises(TypeError):
            getattr(dtorch, name)([a])  # a torch tensor in the list
    with pytest.raises(RuntimeError):  # sizes that do not match, as torch's cat
        dtorch.column_stack([dtorch.tensor(1), x])


# --- elementwise aliases and fmax/fmin --------------------------------------------------------
_NAN = float("nan")


@pytest.mark.parametrize("mesh_shape", MESHES)
def test_fmax_fmin(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    a = torch.tensor([[1.0, _NAN, _NAN, -2.0], [0.0, 3.0, _NAN, 5.0], [1.0, 1.0, 1.0, 1.0]])
    b = torch.tensor([[_NAN, 2.0, _NAN, -3.0], [1.0, _NAN, 4.0, 5.0], [0.0, 2.0, _NAN, 1.0]])
    for dtype in (torch.float32, torch.float64):
        x, y = a.to(dtype), b.to(dtype)
        _run(graph, "fmax", dtorch.fmax, [x, y], torch.fmax(x, y), mesh_shape)
        _run(graph, "fmin", lambda s, t: s.fmin(t), [x, y], torch.fmin(x, y), mesh_shape)
    i, r = _rand(3, 4, dtype=torch.int64), b[:1]  # integers with a broadcast float row
    _run(graph, "fmax", dtorch.fmax, [i, r], torch.fmax(i, r), mesh_shape)
    _run(graph, "fmin", dtorch.fmin, [i, i.flip(0)], torch.fmin(i, i.flip(0)), mesh_shape)


def test_fmax_refusals(graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", 2)
    part = place(torch.ones(4), mesh, [dtorch.Partial()], graph)
    with pytest.raises(PlacementError, match="fmax"):
        dtorch.fmax(part, place(torch.ones(4), mesh, [R], graph))
    with pytest.raises(RuntimeError):  # torch's: no complex fmax
        dtorch.fmin(dtorch.tensor([1j]), dtorch.tensor([1.0]))
    assert dtorch.fmax(dtorch.tensor([1.0, _NAN]), 0.5).tolist() == [1.0, 0.5]


def test_elementwise_aliases(graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", 3)
    a, b = _rand(5, 2).clamp(-1, 1), _rand(5, 2).abs() + 0.5
    x, y = place(a, mesh, [S0], graph), place(b, mesh, [R], graph)
    close = torch.testing.assert_close
    close(
        dtorch.divide(x, y, rounding_mode="floor").to_torch(),
        torch.divide(a, b, rounding_mode="floor"),
    )
    close(x.divide(y).to_torch(), a.divide(b))
    close(dtorch.multiply(x, y).to_torch(), torch.multiply(a, b))
    close(x.subtract(y, alpha=2).to_torch(), a.subtract(b, alpha=2))
    assert x.not_equal(x).to_torch().tolist() == a.not_equal(a).tolist()
    close(dtorch.absolute(x).to_torch(), torch.absolute(a))
    close(x.arcsin().to_torch(), a.arcsin())
    close(dtorch.arcsin(x).to_torch(), torch.arcsin(a))
    close(dtorch.floor_divide(x, y).to_torch(), torch.floor_divide(a, b))
    close(x.floor_divide(2).to_torch(), a.floor_divide(2))
    assert x.subtract(y).placements == [S0]


# --- in place ---------------------------------------------------------------------------------
_IN_PLACE: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("eq_", (0.5,), {}), ("ne_", ("t",), {}), ("not_equal_", ("t",), {}), ("ge_", ("t",), {}),
    ("greater_equal_", (0.0,), {}), ("gt_", ("t",), {}), ("greater_", (0.0,), {}),
    ("le_", ("t",), {}), ("less_equal_", (0.0,), {}), ("lt_", ("t",), {}), ("less_", (0.1,), {}),
    ("logical_and_", ("t",), {}), ("logical_or_", ("t",), {}), ("cumsum_", (1,), {}),
    ("cumprod_", (0,), {}), ("divide_", ("t",), {"rounding_mode": "trunc"}),
    ("multiply_", ("t",), {}), ("subtract_", ("t",), {"alpha": 3}), ("absolute_", (), {}),
    ("arcsin_", (), {}),
]  # fmt: skip


@pytest.mark.parametrize("mesh_shape", [(2,), (3,), (2, 2)])
def test_in_place(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    for k, (name, args, kwargs) in enumerate(_IN_PLACE):
        dtype = (
            torch.float64 if name in ("arcsin_", "divide_") else (torch.float32, torch.int64)[k % 2]
        )
        a, b = _rand(5, 3, dtype=dtype), _rand(5, 3, dtype=dtype)
        if name == "arcsin_":
            a = a.clamp(-1, 1)
        lay = [[S0, S1, R][k % 3]] if len(mesh_shape) == 1 else [S1, S0]
        t = place(a, mesh, lay, graph)
        ours = [place(b, mesh, lay, graph) if v == "t" else v for v in args]
        theirs = [b if v == "t" else v for v in args]
        if name == "divide_":
            ours[0], theirs[0] = ours[0].abs() + 1, b.abs() + 1
        want = getattr(a.clone(), name)(*theirs, **kwargs)
        assert getattr(t, name)(*ours, **kwargs) is t, name
        assert t.placements == place(a, mesh, lay, graph).placements, name
        got = t.to_torch()
        assert got.dtype == want.dtype, name
        torch.testing.assert_close(got, want, msg=name)


def test_in_place_refusals(graph) -> None:  # type: ignore[no-untyped-def]
    t = dtorch.ones(2)
    with pytest.raises(RuntimeError, match=r"broadcast|shape"):
        t.ge_(dtorch.ones(2, 2))
    with pytest.raises(TypeError, match="should match"):
        dtorch.ones(2, dtype=torch.int64).cumsum_(0, dtype=torch.float32)
    with pytest.raises(RuntimeError):  # a float result does not cast back into int64
        dtorch.ones(2, dtype=torch.int64).divide_(2)
    i = dtorch.ones(2, dtype=torch.int32)
    assert i.cumsum_(0, dtype=torch.int32).tolist() == [1, 2]


# --- small operators --------------------------------------------------------------------------
@pytest.mark.parametrize("mesh_shape", MESHES)
def test_dist(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    a, b = _rand(4, 3, dtype=torch.float64), _rand(4, 3, dtype=torch.float64)
    for p in (2, 1, 0, float("inf"), 3.5):
        _run(graph, "dist", lambda x, y, p=p: dtorch.dist(x, y, p), [a, b], torch.dist(a, b, p),
             mesh_shape, limit=6, exact=False)  # fmt: skip
    c = _rand(3, dtype=torch.float32)
    _run(graph, "dist", lambda x, y: x.dist(y, p=1), [a, c], torch.dist(a, c, p=1), mesh_shape,
         limit=6, exact=False)  # fmt: skip


def test_dist_refusals(graph) -> None:  # type: ignore[no-untyped-def]
    i = dtorch.tensor([1, 2])
    with pytest.raises(RuntimeError, match="floating point"):
        dtorch.dist(i, i)
    with pytest.raises(TypeError, match="Number"):
        dtorch.dist(dtorch.ones(2), dtorch.ones(2), p="fro")
    with pytest.raises(TypeError):
        dtorch.dist(torch.ones(2), dtorch.ones(2))


@pytest.mark.parametrize("mesh_shape", MESHES)
def test_addr_ger(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    for dtype, beta, alpha in (
        (torch.float32, 0.5, -2.0),
        (torch.int64, 2, 3),
        (torch.bool, True, True),
    ):
        x, u, v = _rand(4, 3, dtype=dtype), _rand(4, dtype=dtype), _rand(3, dtype=dtype)
        want = torch.addr(x, u, v, beta=beta, alpha=alpha)
        fn = lambda *t, b=beta, a=alpha: dtorch.addr(*t, beta=b, alpha=a)  # noqa: E731
        _run(graph, "addr", fn, [x, u, v], want, mesh_shape)
    x, u, v = _rand(3), _rand(4, dtype=torch.float64), _rand(3, dtype=torch.int64)
    _run(graph, "addr", lambda *t: t[0].addr(t[1], t[2]), [x, u, v], torch.addr(x, u, v),
         mesh_shape, exact=False)  # fmt: skip
    _run(graph, "outer", dtorch.ger, [u, u], torch.ger(u, u), mesh_shape)


def test_addr_forms(graph) -> None:  # type: ignore[no-untyped-def]
    nan = torch.full((2, 2), _NAN)
    u, v = torch.tensor([1.0, 2.0]), torch.tensor([3.0, _NAN])
    d = [dtorch.from_torch(t) for t in (nan, u, v)]
    assert torch.equal(
        dtorch.addr(*d, beta=0).to_torch().isnan(), torch.addr(nan, u, v, beta=0).isnan()
    )
    got = dtorch.addr(*d, alpha=0).to_torch()
    assert got.isnan().all() and torch.addr(nan, u, v, alpha=0).isnan().all()
    t = dtorch.ones(2, 2)
    assert t.addr_(d[1], d[1], alpha=2) is t and t.tolist() == [[3.0, 5.0], [5.0, 9.0]]
    i = dtorch.ones(2, 2, dtype=torch.int64)
    with pytest.raises(RuntimeError, match="alpha must not be a floating point"):
        dtorch.addr(i, i[0], i[0], alpha=1.5)
    with pytest.raises(RuntimeError, match="Boolean beta"):
        dtorch.addr(t, d[1], d[1], beta=True)
    with pytest.raises(RuntimeError, match="1-D"):
        dtorch.addr(t, t, d[1])
    with pytest.raises(RuntimeError):
        dtorch.addr(dtorch.ones(3, 3), d[1], d[1])
    with pytest.raises(TypeError):
        dtorch.addr(t, d[1], d[1], beta="2")


@pytest.mark.parametrize("mesh_shape", MESHES)
def test_diagflat(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    for shape, offset, dtype in (
        ((2, 3), 0, torch.float32),
        ((4,), -2, torch.int64),
        ((2, 1, 2), 1, torch.bool),
    ):
        x = _rand(*shape, dtype=dtype)
        _run(graph, "diagflat", lambda t, o=offset: t.diagflat(o), [x], torch.diagflat(x, offset),
             mesh_shape, limit=6)  # fmt: skip


@pytest.mark.parametrize("mesh_shape", MESHES)
def test_unravel_index(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    idx = torch.tensor([[0, 5, 7, -1], [23, -24, 11, 30], [3, 2, 1, 0]])
    for dtype, shape in ((torch.int64, (2, 3, 4)), (torch.int32, (4, 6)), (torch.int16, 24)):
        x = idx.to(dtype)
        want = torch.unravel_index(x, shape)
        _run(graph, "unravel_index", lambda t, s=shape: dtorch.unravel_index(t, s), [x], want,
             mesh_shape, limit=6)  # fmt: skip


def test_unravel_index_refusals(graph) -> None:  # type: ignore[no-untyped-def]
    assert dtorch.unravel_index(dtorch.tensor([0]), ()) == ()
    assert [t.tolist() for t in dtorch.unravel_index(dtorch.tensor(4), torch.Size([2, 3]))] == [
        1,
        1,
    ]
    with pytest.raises(TypeError, match="integer dtype"):
        dtorch.unravel_index(dtorch.tensor([1.0]), (2, 3))
    with pytest.raises(TypeError, match="integer dtype"):
        dtorch.unravel_index(dtorch.tensor([True]), (2, 3))
    with pytest.raises(TypeError, match="only contain ints"):
        dtorch.unravel_index(dtorch.tensor([1]), (2.0, 3))
    with pytest.raises(ValueError, match="negative"):
        dtorch.unravel_index(dtorch.tensor([1]), (2, -3))
    with pytest.raises(RuntimeError):  # torch's division by zero
        dtorch.unravel_index(dtorch.tensor([0]), (0, 3))
    with pytest.raises(TypeError):
        dtorch.unravel_index([1], (2, 3))


_DIAGONALS = [
    ((3, 3), False),
    ((7, 3), True),
    ((7, 3), False),
    ((2, 5), True),
    ((3, 3, 3), False),
    ((0, 2), False),
]


@pytest.mark.parametrize("mesh_shape", MESHES)
def test_fill_diagonal(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    for k, (shape, wrap) in enumerate(_DIAGONALS):
        dtype = (torch.float32, torch.int64)[k % 2]
        a = _rand(*shape, dtype=dtype)
        lay = [(R, S0, S1)[(k + m) % 3] for m in range(len(mesh_shape))]
        t = place(a, mesh, lay, graph)
        assert t.fill_diagonal_(2.5, wrap=wrap) is t
        torch.testing.assert_close(t.to_torch(), a.clone().fill_diagonal_(2.5, wrap=wrap))
    t = dtorch.zeros(2, 2)
    t.fill_diagonal_(dtorch.tensor(3))
    assert t.tolist() == [[3.0, 0.0], [0.0, 3.0]]
    with pytest.raises(RuntimeError, match="larger than 1"):
        dtorch.ones(3).fill_diagonal_(1)
    with pytest.raises(RuntimeError, match="equal length"):
        dtorch.ones(3, 3, 2).fill_diagonal_(1)


@pytest.mark.parametrize("mesh_shape", MESHES)
def test_sum_to_size(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    cases = [((2, 3, 4), (3, 1)), ((2, 3, 4), (1, 1, 4)), ((4, 3), (4, 3)), ((2, 3), (1,))]
    for k, (shape, size) in enumerate(cases):
        dtype = (torch.float64, torch.int32)[k % 2]
        x = _rand(*shape, dtype=dtype)
        _run(graph, "sum", lambda t, s=size: t.sum_to_size(*s), [x], x.sum_to_size(*size),
             mesh_shape, limit=6, exact=not dtype.is_floating_point)  # fmt: skip
    x = _rand(2, 3)
    _run(graph, "sum", lambda t: t.sum_to_size(torch.Size([3])), [x], x.sum_to_size(3), mesh_shape,
         limit=4, exact=False)  # fmt: skip


def test_sum_to_size_and_split_refusals(graph) -> None:  # type: ignore[no-untyped-def]
    t = dtorch.ones(2, 3)
    assert t.sum_to_size(2, 3) is t
    with pytest.raises(RuntimeError, match="not expandable"):
        t.sum_to_size(2, 2)
    with pytest.raises(RuntimeError, match="not expandable"):
        t.sum_to_size(1, 2, 3, 4)
    with pytest.raises(TypeError):
        t.sum_to_size()
    with pytest.raises(RuntimeError, match="sum exactly"):
        t.split_with_sizes([1, 2])
    with pytest.raises(RuntimeError, match="non-negative"):
        t.split_with_sizes([1, -1, 3], 1)
    with pytest.raises(TypeError, match="tuple of ints"):
        t.split_with_sizes(1)
    with pytest.raises(IndexError):
        t.split_with_sizes([2], dim=2)


@pytest.mark.parametrize("mesh_shape", MESHES)
def test_split_with_sizes(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    x = _rand(5, 4, dtype=torch.int64)
    for sizes, dim in (([2, 0, 3], 0), ([1, 3], -1)):
        want = x.split_with_sizes(sizes, dim)
        _run(graph, "getitem", lambda t, s=sizes, d=dim: t.split_with_sizes(s, dim=d), [x], want,
             mesh_shape, limit=6)  # fmt: skip


def test_metadata_methods(graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    t = place(torch.ones(4), mesh, [S0, R], graph)
    assert t.get_device() == torch.ones(1).get_device() == -1
    assert t.layout is torch.strided is torch.ones(1).layout


# --- creation ---------------------------------------------------------------------------------
_CREATIONS: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("logspace", (0, 2, 5), {}), ("logspace", (-1.0, 1.0, 4, 2.0), {"dtype": torch.float64}),
    ("range", (1, 4), {}), ("range", (0, 5, 2), {"dtype": torch.int64}),
    ("scalar_tensor", (3,), {}), ("scalar_tensor", (True,), {"dtype": torch.float64}),
    ("hann_window", (7,), {}), ("hann_window", (6, False), {"dtype": torch.float64}),
    ("hamming_window", (5, True, 0.5, 0.4), {}), ("blackman_window", (6,), {}),
    ("bartlett_window", (5, False), {}), ("kaiser_window", (6, False, 5.0), {}),
    ("kaiser_window", (1,), {}), ("hann_window", (0,), {}),
]  # fmt: skip


@pytest.mark.parametrize("mesh_shape", [(2,), (3,), (2, 2, 2)])
def test_creations(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    for k, (name, args, kwargs) in enumerate(_CREATIONS):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # range's deprecation
            want = getattr(torch, name)(*args, **kwargs)
        lay = [S0 if want.ndim and (k + m) % 2 else R for m in range(len(mesh_shape))]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = getattr(dtorch, name)(*args, device_mesh=mesh, placements=lay, **kwargs)
        assert got.placements == lay and got.device_mesh == mesh, name
        torch.testing.assert_close(got.to_torch(), want, rtol=0, atol=0, msg=name)


def test_creation_forms_and_refusals(graph) -> None:  # type: ignore[no-untyped-def]
    with pytest.warns(UserWarning, match="deprecated"):
        dtorch.range(0, 1)
    with pytest.raises(TypeError, match="end"):
        dtorch.range(5)
    with pytest.raises(RuntimeError, match="floating point"):
        dtorch.hann_window(4, dtype=torch.int64)
    with pytest.raises(RuntimeError):
        dtorch.logspace(0, 1, -1)
    with pytest.raises(TypeError, match="unexpected keyword"):
        dtorch.kaiser_window(4, nonsense=1)
    assert dtorch.scalar_tensor(2, dtype=torch.int64).tolist() == 2


def test_as_tensor_asarray(graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", 2)
    t = place(torch.arange(4.0), mesh, [S0], graph)
    assert dtorch.as_tensor(t) is t and dtorch.asarray(t) is t
    assert dtorch.as_tensor(t, dtype=torch.float32) is t
    c = dtorch.as_tensor(t, dtype=torch.int64)
    assert c.dtype == torch.int64 and c.placements == [S0] and c.tolist() == [0, 1, 2, 3]
    r = dtorch.as_tensor(t, placements=[R])
    assert r.placements == [R] and r.tolist() == t.tolist()
    copied = dtorch.asarray(t, copy=True)
    assert copied is not t and copied.add_(1).tolist() == [1.0, 2.0, 3.0, 4.0]
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert dtorch.asarray([1.0, 2.0]).dtype == torch.asarray([1.0, 2.0]).dtype
    assert dtorch.as_tensor([[1, 2]], device_mesh=mesh, placements=[S1]).placements == [S1]
    assert dtorch.as_tensor(torch.ones(2, dtype=torch.int8)).dtype == torch.int8
    with pytest.raises(ValueError, match="alias"):
        dtorch.asarray([1, 2], copy=False)
    with pytest.raises(ValueError, match="alias"):
        dtorch.asarray(t, dtype=torch.int64, copy=False)


def test_review_findings_match_torch(graph: dtorch.Graph) -> None:
    """A differential review's findings: an integer range whose step truncates to 0 is
    refused (torch's kernel divides by it: a SIGFPE kills the process); split_with_sizes has
    torch's function form."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # range's deprecation
        for step in (0.25, np.float32(0.5), np.float16(0.5), torch.tensor(0.5), 1e-300):
            with pytest.raises(RuntimeError, match="step must be nonzero"):  # numpy, 0-d too
                dtorch.range(0, 1, step, dtype=torch.int64, device_mesh=mesh, graph=graph)
        got = dtorch.range(0, 4, 2, dtype=torch.int64, device_mesh=mesh, graph=graph)
        assert torch.equal(got.to_torch(), torch.range(0, 4, 2, dtype=torch.int64))
    x = torch.arange(5)
    got = dtorch.split_with_sizes(place(x, mesh, [R], graph), [2, 3])
    assert [g.tolist() for g in got] == [w.tolist() for w in torch.split_with_sizes(x, [2, 3])]

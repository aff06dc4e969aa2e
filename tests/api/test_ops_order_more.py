"""Order statistics, running extremes and shifts (``median nanmedian kthvalue mode cummax
cummin logcumsumexp bitwise_left_shift bitwise_right_shift``, ``<< >> <<= >>=``) through the
public API against torch on the full tensor, in thread and process mode: every layout on 1-D
meshes (a seeded sample on the larger ones), output placements (a shard of another dim stays,
shifted where the dim is dropped; along a sharded operated dim the devices gather its blocks,
Replicate there; Partial is refused), values, dtypes and indices with ties and NaN, integer
dtypes, and torch's refusals raised at the call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import dtorch
from dtorch.errors import DimError, DtypeError, ParamError, PlacementError
from tests.api.ops_harness import (
    ALL_MESHES,
    S0,
    S1,
    P,
    R,
    Shard,
    Table,
    compare,
    elementwise_table,
    limit_for,
    place,
    run_api,
)

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(65)
NAN = float("nan")


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(65)


def _ties_and_nans(shape: tuple[int, ...], dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Few distinct values (ties everywhere, even counts along dims) and a few NaNs."""
    x = torch.randint(0, 4, shape, generator=_G).to(dtype)
    if dtype.is_floating_point:
        x[torch.rand(shape, generator=_G) < 0.1] = NAN
    return x


def _picked_table(ndim: int, dim: int, dropped: bool) -> Table:
    """One mesh dim: a shard of another dim stays (its index shifts past a dropped ``dim``);
    a shard of the operated dim gives Replicate (its blocks gathered); Partial is refused."""
    table: dict[Any, Any] = {(R,): R, (Shard(dim),): R}
    for d in range(ndim):
        if d != dim:
            table[(Shard(d),)] = Shard(d - 1 if dropped and d > dim else d)
    return table


def _values_indices(result: Any) -> list[Any]:
    return list(result) if isinstance(result, tuple) else [result]


#: name, dtorch call (t, dim), torch reference (x, dim), whether the dim is dropped.
_ALONG: list[tuple[str, Callable[..., Any], Callable[..., Any], bool]] = [
    ("median", lambda t, d: t.median(d), lambda x, d: x.median(d), True),
    ("median", lambda t, d: dtorch.median(t, d, keepdim=True),
     lambda x, d: torch.median(x, d, keepdim=True), False),
    ("nanmedian", lambda t, d: t.nanmedian(d), lambda x, d: x.nanmedian(d), True),
    ("kthvalue", lambda t, d: t.kthvalue(2, d), lambda x, d: x.kthvalue(2, d), True),
    ("kthvalue", lambda t, d: dtorch.kthvalue(t, 3, d, True),
     lambda x, d: torch.kthvalue(x, 3, d, True), False),
    ("mode", lambda t, d: t.mode(d), lambda x, d: x.mode(d), True),
    ("cummax", lambda t, d: t.cummax(d), lambda x, d: x.cummax(d), False),
    ("cummin", dtorch.cummin, torch.cummin, False),
    ("logcumsumexp", lambda t, d: t.logcumsumexp(d), lambda x, d: x.logcumsumexp(d), False),
]  # fmt: skip


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("name", "call", "ref", "dropped"), _ALONG)
def test_along_a_dim_every_layout(  # type: ignore[no-untyped-def]
    name, call, ref, dropped, mesh_shape, graph
) -> None:
    """Values and indices equal torch's on ties and NaN; shards of the other dims kept."""
    x = _ties_and_nans((5, 3, 4))
    if name == "logcumsumexp":
        x = torch.randn((5, 3, 4), generator=_G).round()  # ties in value, no NaN
    for dim in (0, 2) if len(mesh_shape) == 1 else (1,):
        table = dict(_picked_table(3, dim, dropped))
        if name in ("logcumsumexp", "cummax", "cummin"):  # scans: each device carries on
            table[(Shard(dim),)] = Shard(dim)  # from the blocks before (a log-add: last bits)
        run_api(
            graph, name, lambda t, d=dim: _values_indices(call(t, d)), [x], mesh_shape,
            _values_indices(ref(x, dim)), table=table, exact=name != "logcumsumexp",
            limit=limit_for(mesh_shape, n_d=6), seed=dim,
        )  # fmt: skip


_INTS = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


@pytest.mark.parametrize(
    "dtype", [*_INTS, torch.float16, torch.bfloat16, torch.float64, torch.bool], ids=str
)
def test_dtypes_as_torch(dtype: torch.dtype, graph: dtorch.Graph) -> None:
    """Each function on each dtype, dim 1 whole and dim 0 sharded: torch's values, dtypes and
    indices, or torch's refusal (a DtypeError, a RuntimeError as torch's) at the call."""
    x = _ties_and_nans((5, 6), torch.float32).nan_to_num(2.0).to(dtype)
    t = place(x, dtorch.init_device_mesh("cpu", 2), [S0], graph)
    calls: list[tuple[str, Callable[[Any], Any]]] = [
        ("median", lambda a: a.median(1)),
        ("median", lambda a: a.median()),
        ("nanmedian", lambda a: a.nanmedian(1, keepdim=True)),
        ("kthvalue", lambda a: a.kthvalue(4, 1)),
        ("mode", lambda a: a.mode(1)),
        ("cummax", lambda a: a.cummax(1)),
        ("cummin", lambda a: a.cummin(-1)),
        ("logcumsumexp", lambda a: a.logcumsumexp(1)),
    ]
    for name, call in calls:
        try:
            want = _values_indices(call(x))
        except RuntimeError as error:
            with pytest.raises(DtypeError, match=f"^{name}: torch re"):
                call(t.redistribute(placements=[R]))
            assert "not implemented" in str(error)
            continue
        src = t.redistribute(placements=[R]) if want[0].ndim == 0 else t
        for got, w in zip(_values_indices(call(src)), want, strict=True):
            compare(got.to_torch(), w, True, f"{name} of {dtype}")


def test_whole_tensor_forms(graph: dtorch.Graph) -> None:
    """``median()``/``nanmedian()``: a 0-d tensor (NaN wins in median, is skipped in
    nanmedian; NaN of an empty tensor), Replicate; a sharded tensor's blocks gathered, a
    Partial refused."""
    mesh = dtorch.init_device_mesh("cpu", (2, 3))
    for x in (
        torch.tensor([[4.0, NAN, 1.0], [2.0, 2.0, 3.0]]),
        torch.tensor([[4.0, 0.5, 1.0], [2.0, 2.0, 3.0]]),
        torch.tensor([3, 1, 2, 1]),
        torch.tensor(7.0),
        torch.ones(0),
    ):
        t = place(x, mesh, [R, R], graph)
        for got, want in ((t.median(), x.median()), (dtorch.nanmedian(t), x.nanmedian())):
            assert got.placements == [R, R] and got.shape == ()
            compare(got.to_torch(), want, True, f"median of {x}")
    x = torch.tensor([[4.0, 0.5, 1.0, 5.0, 6.0], [2.0, 2.0, 3.0, NAN, 0.0]])
    for placements in ([S0, Shard(1)], [S1, S1], [R, S0]):  # 5 over 3 devices: uneven
        t = place(x, mesh, placements, graph)
        for got, want in ((t.median(), x.median()), (dtorch.nanmedian(t), x.nanmedian())):
            assert got.placements == [R, R] and got.shape == ()
            compare(got.to_torch(), want, True, f"median of every element on {placements}")
    sharded = place(torch.arange(6.0), mesh, [S0, R], graph)
    with pytest.raises(PlacementError, match=r"^nanmedian: "):
        place(torch.arange(6.0), mesh, [P, R], graph).nanmedian()
    with pytest.raises(TypeError, match='missing 1 required positional arguments: "dim"'):
        dtorch.median(sharded, keepdim=True)


@pytest.mark.parametrize(("mesh_shape", "placement"), [((3,), S1), ((2,), S0), ((2,), R)])
def test_order_statistics_of_an_expanded_tensor(
    mesh_shape: tuple[int, ...], placement: Any, graph: dtorch.Graph
) -> None:
    """Along an ``expand``-ed dim (a stride-0 shard) the statistics are those of the values
    (torch's CPU median of such a view itself reads the wrong memory; compared here with
    torch on the contiguous tensor)."""
    full = torch.tensor([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]])
    want = full.unsqueeze(0).expand(3, 2, 3).contiguous()
    t = place(full, dtorch.init_device_mesh("cpu", mesh_shape), [placement], graph)
    got = t.unsqueeze(0).expand(3, 2, 3)
    for name in ("median", "nanmedian", "mode"):
        values, indices = getattr(got, name)(0)
        compare(values.to_torch(), getattr(want, name)(0).values, True, name)
        assert torch.equal(want.gather(0, indices.to_torch().unsqueeze(0))[0], values.to_torch())
    compare(got.kthvalue(2, 0).values.to_torch(), want.kthvalue(2, 0).values, True, "kthvalue")
    for name in ("median", "nanmedian"):
        compare(getattr(got, name)().to_torch(), getattr(want, name)(), True, f"{name}()")


def test_zero_dim_and_empty(graph: dtorch.Graph) -> None:
    """A 0-d tensor (dims 0 and -1, k = 1), an empty kept dim (empty results), and torch's
    IndexError for an empty operated dim."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    scalar = torch.tensor(2.5)
    s = place(scalar, mesh, [R], graph)
    for got, want in (
        (s.median(0), scalar.median(0)),
        (s.kthvalue(1, -1, True), scalar.kthvalue(1, -1, True)),
        (s.mode(), scalar.mode()),
        (s.cummax(0), scalar.cummax(0)),
        (s.cummin(-1), scalar.cummin(-1)),
    ):
        for g, w in zip(_values_indices(got), _values_indices(want), strict=True):
            compare(g.to_torch(), w, True, "0-d")
    compare(s.logcumsumexp(0).to_torch(), scalar.logcumsumexp(0), True, "0-d logcumsumexp")
    empty = torch.ones(0, 4)
    e = place(empty, mesh, [S0], graph)
    for got, want in ((e.median(1), empty.median(1)), (e.cummin(1), empty.cummin(1))):
        for g, w in zip(_values_indices(got), _values_indices(want), strict=True):
            compare(g.to_torch(), w, True, "empty")
    flags = place(empty.bool(), mesh, [S0], graph)  # the size is checked before the dtype
    for call in (lambda a: a.median(0), lambda a: a.mode(0), lambda a: a.kthvalue(1, 0)):
        for t in (e, flags):
            with pytest.raises(IndexError, match="Expected reduction dim 0 to have non-zero size"):
                call(t)


def test_refusals_at_the_call(graph: dtorch.Graph) -> None:
    """A Partial is a PlacementError naming the function and the placements (a sharded
    operated dim is gathered: see test_along_a_dim_every_layout); k out of range a
    RuntimeError; bad dims IndexErrors; bad types TypeErrors."""
    mesh = dtorch.init_device_mesh("cpu", 3)
    x = torch.randn((6, 4), generator=_G)
    s1, p = place(x, mesh, [S1], graph), place(x, mesh, [P], graph)
    assert s1.median(-1).values.placements == [R]  # gathered, where it was refused
    for name, call in (
        ("median", lambda a: a.median(-1)),
        ("nanmedian", lambda a: dtorch.nanmedian(a, 1)),
        ("kthvalue", lambda a: a.kthvalue(1)),
        ("mode", lambda a: a.mode()),
    ):
        with pytest.raises(PlacementError, match=rf"^{name}: .*P.*accepted.*order of a sum"):
            call(p)
    for name, call in (  # along a sharded dim they carry on: see test_ops_split_reduce
        ("logcumsumexp", lambda a: dtorch.logcumsumexp(a, -1)),
        ("cummax", lambda a: a.cummax(1)),
        ("cummin", lambda a: a.cummin(1)),
    ):
        with pytest.raises(PlacementError, match=rf"^{name}: .*P.*accepted"):
            call(p)
    r = place(x, mesh, [R], graph)
    for k in (0, 5, -1):
        with pytest.raises(ParamError, match="selected number k out of range") as info:
            r.kthvalue(k, 1)
        assert isinstance(info.value, RuntimeError)
    with pytest.raises(DimError, match="out of range"):
        r.median(2)
    with pytest.raises(IndexError, match="out of range"):
        dtorch.cummax(r, -3)
    with pytest.raises(TypeError, match="k must be an int"):
        r.kthvalue(True)
    with pytest.raises(TypeError, match="keepdim must be a bool"):
        r.mode(0, 1)
    with pytest.raises(TypeError, match="dim must be an int"):
        r.cummin(1.0)
    with pytest.raises(TypeError):
        dtorch.median(x, 0)  # a torch tensor: dtorch's functions take dtorch tensors
    results = r.median(1, keepdim=True), r.cummax(0)
    assert type(results[0]) is torch.return_types.median
    assert type(results[1]) is torch.return_types.cummax
    assert r.median(axis=0, keepdims=True).values.shape == (1, 4)


#: dtype pairs of the shifts: (x, y), both int or an int and a bool; torch's promotion.
_SHIFT_DTYPES = [
    (torch.int64, torch.int64), (torch.int32, torch.int8), (torch.uint8, torch.int8),
    (torch.int16, torch.bool), (torch.bool, torch.uint8),
]  # fmt: skip


def _shift_operands(a: torch.dtype, b: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randint(-100, 100, (5, 3), generator=_G)
    y = torch.randint(-2, 70, (5, 3), generator=_G)  # negative and too large counts too
    return x.to(a) if a is not torch.bool else x > 0, y.to(b) if b is not torch.bool else y > 3


@pytest.mark.parametrize(("da", "db"), _SHIFT_DTYPES, ids=str)
def test_shift_functions_and_operators(da: torch.dtype, db: torch.dtype, graph) -> None:  # type: ignore[no-untyped-def]
    """``<<``, ``>>``, reflected numbers, the functions, on tensors and numbers, equal torch's
    values and dtypes (uint8 << int8 is int16; counts < 0 or >= the width give 0 or -1)."""
    x, y = _shift_operands(da, db)
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    a, b = place(x, mesh, [S0, R], graph), place(y, mesh, [S0, S1], graph)
    pairs = [
        (a << b, x << y), (a >> b, x >> y),
        (dtorch.bitwise_left_shift(a, b), torch.bitwise_left_shift(x, y)),
        (b.bitwise_right_shift(a), y.bitwise_right_shift(x)),
        (a << 3, x << 3), (a >> 2, x >> 2), (5 << b, 5 << y), (-64 >> b, -64 >> y),
        (a >> 70, x >> 70), (a << -1, x << -1),
        (dtorch.bitwise_left_shift(3, b), torch.bitwise_left_shift(3, y)),
        (a << torch.tensor(2), x << torch.tensor(2)),
    ]  # fmt: skip
    if da is not torch.bool:  # torch has no bool kernel for ``bool << True``
        pairs.append((a << True, x << True))
    for got, want in pairs:
        compare(got.to_torch(), want, True, f"shift of {da}, {db}")


@pytest.mark.parametrize("mesh_shape", [(2,), (3,), (2, 3)])
@pytest.mark.parametrize("op", ["lshift", "rshift"])
def test_shift_every_layout(op: str, mesh_shape: tuple[int, ...], graph: dtorch.Graph) -> None:
    """Shards pass as for any elementwise operator (a broadcast dim chunked); Partial refused."""
    x = torch.randint(-50, 50, (4, 3), generator=_G)
    y = torch.randint(0, 9, (3,), generator=_G)
    fn = (lambda a, b: a << b) if op == "lshift" else (lambda a, b: a >> b)
    name = "bitwise_left_shift" if op == "lshift" else "bitwise_right_shift"
    table = elementwise_table([(4, 3), (3,)])
    run_api(graph, name, fn, [x, y], mesh_shape, [fn(x, y)], table=table,
            limit=limit_for(mesh_shape, n_d=10))  # fmt: skip


def test_shift_in_place_and_refusals(graph: dtorch.Graph) -> None:
    """``<<=``/``>>=`` and the ``_`` methods write back (every alias sees it); torch's
    refusals: floats (a DtypeError: torch's NotImplementedError is a RuntimeError too), a
    result dtype that does not cast back, Partial."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.randint(-50, 50, (4, 6), generator=_G, dtype=torch.int32)
    t = place(x, mesh, [S1], graph)
    alias = t
    t <<= 2
    assert t is alias and t.placements == [S1]
    compare(t.to_torch(), x << 2, True, "<<=")
    t >>= place(torch.full((6,), 1, dtype=torch.int32), mesh, [R], graph)
    compare(alias.to_torch(), (x << 2) >> 1, True, ">>=")
    assert t.bitwise_left_shift_(1) is t and t.bitwise_right_shift_(3) is t
    compare(t.to_torch(), ((x << 2) >> 1 << 1) >> 3, True, "in-place methods")
    f = place(torch.ones(3), mesh, [R], graph)
    for call in (lambda: f << 1, lambda: 1 >> f, lambda: dtorch.bitwise_right_shift(f, f)):
        with pytest.raises(DtypeError, match="not implemented for 'Float'") as info:
            call()
        assert isinstance(info.value, RuntimeError)
    with pytest.raises(DtypeError):
        t <<= 1.5
    u8 = place(torch.ones(3, dtype=torch.uint8), mesh, [R], graph)
    u8.bitwise_left_shift_(place(torch.full((3,), 3, dtype=torch.int8), mesh, [R], graph))
    assert u8.to_torch().tolist() == [8, 8, 8] and u8.dtype == torch.uint8  # int16 cast back
    with pytest.raises(
        DtypeError, match=r"^bitwise_left_shift_: .*cast to the desired output type torch\.bool"
    ):
        place(torch.ones(3, dtype=torch.bool), mesh, [R], graph).bitwise_left_shift_(1)
    with pytest.raises(PlacementError, match=r"^bitwise_left_shift: .*P"):
        place(torch.ones(4, dtype=torch.int64), mesh, [P], graph) << 1

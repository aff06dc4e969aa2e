"""More reductions through the public API against torch on the full tensor: ``amax amin``,
the scans ``cumsum cumprod`` (the Scan operator), and the statistics composed of existing
operators (``var std var_mean std_mean logsumexp norm count_nonzero nansum nanmean``), on
1-D, 2-D and 3-D meshes with even and uneven shards (every layout on 1-D meshes, a seeded
sample on the larger ones); output placements, argument forms, dtypes, empty dims, the
rejections, and the Scan param through the codec and a saved program."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import dtorch
from dtorch.errors import DtypeError, ParamError, PlacementError, ShapeError
from dtorch.ir.opkind import ScanKind
from dtorch.ir.params import ScanParam
from tests.api.ops_harness import (
    ALL_MESHES,
    S0,
    S1,
    P,
    R,
    Shard,
    Table,
    check_rejection,
    limit_for,
    place,
    run_api,
)

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(57)
INF = float("inf")


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(57)


def stat_table(
    ndim: int, dims: tuple[int, ...] | None, keepdim: bool, sharded_reduced: Any
) -> Table:
    """One mesh dim: a shard of a kept dim stays (at its new index); a shard of a reduced dim
    gives ``sharded_reduced`` (Partial, Replicate after an all-reduce, or None: refused); a
    Partial input is always refused (none of these is linear)."""
    reduced = set(range(ndim)) if not dims else {d % ndim for d in dims}
    table: dict[tuple[Any, ...], Any] = {(R,): R}
    for d in range(ndim):
        if d not in reduced:
            table[(Shard(d),)] = Shard(d if keepdim else d - sum(r < d for r in reduced))
        elif sharded_reduced is not None:
            table[(Shard(d),)] = sharded_reduced
    return table


def _floats() -> torch.Tensor:
    return torch.randn((5, 3, 4), generator=_G)


def _with_nans() -> torch.Tensor:
    x = _floats()
    x[torch.rand(x.shape, generator=_G) < 0.2] = float("nan")
    x[1, 2, :] = float("nan")  # a whole row of NaNs: nanmean gives NaN there
    return x


def _ints() -> torch.Tensor:
    return torch.randint(-1, 2, (5, 3, 4), generator=_G)


#: 1-D meshes try more reductions than the larger ones (which sample layouts).
_CONFIGS_1D = [(None, False), ((1,), True), ((0, 2), False), ((-1,), False)]
_CONFIGS_ND = [((1,), False), ((0, 2), True)]


def _configs(mesh_shape: tuple[int, ...]) -> list[tuple[tuple[int, ...] | None, bool]]:
    return _CONFIGS_1D if len(mesh_shape) == 1 else _CONFIGS_ND


def _all(dims: tuple[int, ...] | None) -> tuple[int, ...]:
    # torch's logsumexp needs dims: None stands for every dim there
    return (0, 1, 2) if dims is None else dims


#: name, dtorch call (t, dims, keepdim), torch reference, input, shard of a reduced dim.
_Stat = tuple[str, Callable[..., Any], Callable[..., Any], Callable[[], torch.Tensor], Any]
_STATS: list[_Stat] = [
    ("var", lambda t, d, k: t.var(d, keepdim=k), lambda x, d, k: x.var(d, keepdim=k),
     _floats, P),
    ("var", lambda t, d, k: dtorch.var(t, d, correction=0, keepdim=k),
     lambda x, d, k: torch.var(x, d, correction=0, keepdim=k), _floats, P),
    ("std", lambda t, d, k: t.std(d, False, k), lambda x, d, k: x.std(d, False, k), _floats, R),
    ("var_mean", lambda t, d, k: dtorch.var_mean(t, d, keepdim=k),
     lambda x, d, k: torch.var_mean(x, d, keepdim=k), _floats, P),
    ("std_mean", lambda t, d, k: dtorch.std_mean(t, d, keepdim=k, correction=2),
     lambda x, d, k: torch.std_mean(x, d, keepdim=k, correction=2), _floats, R),
    ("logsumexp", lambda t, d, k: t.logsumexp(_all(d), k),
     lambda x, d, k: x.logsumexp(_all(d), k), lambda: _floats() * 30, R),
    ("norm", lambda t, d, k: t.norm(dim=d, keepdim=k), lambda x, d, k: x.norm(dim=d, keepdim=k),
     _floats, R),
    ("norm", lambda t, d, k: dtorch.norm(t, 1, d, k), lambda x, d, k: torch.norm(x, 1, d, k),
     _floats, R),
    ("norm", lambda t, d, k: t.norm(3, d, k), lambda x, d, k: x.norm(3, d, k), _floats, R),
    ("norm", lambda t, d, k: t.norm(-INF, d, k), lambda x, d, k: x.norm(-INF, d, k), _floats,
     R),
    ("count_nonzero", lambda t, d, k: t.count_nonzero(d),
     lambda x, d, k: torch.count_nonzero(x, d), _ints, P),
    ("nansum", lambda t, d, k: t.nansum(d, k), lambda x, d, k: x.nansum(d, k), _with_nans, P),
    ("nanmean", dtorch.nanmean, lambda x, d, k: x.nanmean(d, k), _with_nans, R),
]  # fmt: skip


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("name", "call", "ref", "make", "sharded"), _STATS)
def test_statistics_every_layout(  # type: ignore[no-untyped-def]
    name, call, ref, make, sharded, mesh_shape, graph
) -> None:
    x = make()
    for dims, keep in _configs(mesh_shape):
        keepdim = keep and name != "count_nonzero"  # count_nonzero takes no keepdim
        want = ref(x, dims, keepdim)
        run_api(
            graph, name, lambda t, d=dims, k=keepdim: call(t, d, k), [x], mesh_shape,
            list(want) if isinstance(want, tuple) else [want],
            table=stat_table(3, dims, keepdim, sharded), exact=name == "count_nonzero",
            limit=limit_for(mesh_shape, n_d=5), seed=hash((dims, keepdim)) % 89,
        )  # fmt: skip


_AMAX: list[tuple[str, Callable[..., Any], Callable[..., Any]]] = [
    ("amax", lambda t, d, k: t.amax(d, k), lambda x, d, k: x.amax(d, k)),
    ("amin", lambda t, d, k: dtorch.amin(t, dim=d, keepdim=k), torch.amin),
]


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("name", "call", "ref"), _AMAX)
def test_amax_amin_every_layout(  # type: ignore[no-untyped-def]
    name, call, ref, mesh_shape, graph
) -> None:
    """Multi-dim max/min; ``()`` reduces every dim; a sharded reduced dim gives Replicate
    (the devices combine their blocks' extremes)."""
    x = _ints()
    for dims, keepdim in _configs(mesh_shape):
        given = () if dims is None else dims
        run_api(
            graph, name, lambda t, d=given, k=keepdim: call(t, d, k), [x], mesh_shape,
            [ref(x, given, keepdim)], table=stat_table(3, dims, keepdim, R),
            limit=limit_for(mesh_shape, n_d=5), seed=len(given),
        )  # fmt: skip


def _scan_table(ndim: int, dim: int, partial: bool) -> Table:
    """One mesh dim: every shard stays, the scanned dim's too (each device carries on from
    the totals of the blocks before its own); Partial stays (cumsum)."""
    table: dict[tuple[Any, ...], Any] = {(R,): R}
    table.update({(Shard(d),): Shard(d) for d in range(ndim)})
    return {**table, (P,): P} if partial else table


_SCANS: list[tuple[str, Callable[..., Any], Callable[..., Any], Callable[[], torch.Tensor]]] = [
    ("cumsum", lambda t, d: t.cumsum(d), lambda x, d: x.cumsum(d), _floats),
    ("cumprod", dtorch.cumprod, torch.cumprod, lambda: _ints() * 2),
]


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("name", "call", "ref", "make"), _SCANS)
def test_scans_every_layout(  # type: ignore[no-untyped-def]
    name, call, ref, make, mesh_shape, graph
) -> None:
    x = make()
    for dim in (0, -1) if len(mesh_shape) == 1 else (1,):
        run_api(
            graph, name, lambda t, d=dim: call(t, d), [x], mesh_shape, [ref(x, dim)],
            table=_scan_table(3, dim, name == "cumsum"), exact=name == "cumprod",
            limit=limit_for(mesh_shape, n_d=6), seed=dim % 7,
        )  # fmt: skip


def test_placements_over_sharded_reduced_dims(graph: dtorch.Graph) -> None:
    """On a 2-D mesh with uneven shards: Partial where the composition ends in a sum,
    Replicate where a root or a division needs the full sums; kept shards move."""
    mesh = dtorch.init_device_mesh("cpu", (2, 3))
    x = torch.randn((7, 5), generator=_G)
    t = place(x, mesh, [S0, S1], graph)
    var, mean = dtorch.var_mean(t, 0)
    for out, want, placements in (
        (t.var(1), x.var(1), [S0, P]),
        (t.var(), x.var(), [P, P]),
        (var, torch.var_mean(x, 0)[0], [P, S0]),
        (mean, x.mean(0), [P, S0]),
        (t.std(0, keepdim=True), x.std(0, keepdim=True), [R, S1]),
        (dtorch.std_mean(t)[1], x.mean(), [R, R]),
        (t.norm(p=2, dim=1), x.norm(p=2, dim=1), [S0, R]),
        (t.nansum(), x.nansum(), [P, P]),
        (t.nanmean(1), x.nanmean(1), [S0, R]),
        (t.count_nonzero(1), x.count_nonzero(1), [S0, P]),
    ):
        assert out.placements == placements and out.shape == want.shape
        torch.testing.assert_close(out.to_torch(), want)


def test_scan_partial_dtype_and_values(graph: dtorch.Graph) -> None:
    """cumsum keeps Partial only where its dtype conversion is linear; dtype= and the
    integer/bool promotion to int64 follow torch."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.randn((4, 6), generator=_G) * 4
    p = place(x, mesh, [P], graph)
    out = p.cumsum(1, dtype=torch.float64)
    assert out.placements == [P] and out.dtype == torch.float64
    torch.testing.assert_close(out.to_torch(), x.cumsum(1, dtype=torch.float64))
    with pytest.raises(PlacementError, match=r"^cumsum: got \(P,\).*accepted") as info:
        p.cumsum(1, dtype=torch.int64)  # truncating each partial sum is not linear
    check_rejection("cumsum", info.value, [p])
    ints = torch.randint(-3, 4, (4, 6), generator=_G, dtype=torch.int32)
    pi = place(ints, mesh, [P], graph)
    with pytest.raises(PlacementError, match=r"^cumsum: got \(P,\)"):
        pi.cumsum(0)  # int32 parts wrap at 32 bits; their int64 sums would not
    longs = place(ints.long(), mesh, [P], graph)
    assert longs.cumsum(0).placements == [P] and longs.cumsum(0).dtype == torch.int64
    assert torch.equal(longs.cumsum(0).to_torch(), ints.cumsum(0))
    s = place(ints, mesh, [S1], graph)
    for got, want in (
        (s.cumsum(0), ints.cumsum(0)),
        (s.cumprod(0, dtype=torch.float64), ints.cumprod(0, dtype=torch.float64)),
        ((s > 0).cumsum(-2), (ints > 0).cumsum(-2)),
        (dtorch.cumsum(s.bool(), 0), ints.bool().cumsum(0)),
        (s.bfloat16().cumsum(0), ints.bfloat16().cumsum(0)),
    ):
        assert got.dtype == want.dtype and got.placements == [S1]
        torch.testing.assert_close(got.to_torch(), want)
    zero_d = dtorch.tensor(torch.tensor(3.0), graph=graph)
    assert zero_d.cumsum(-1).item() == 3.0 and zero_d.cumprod(0).shape == torch.Size([])


_DTYPES = [torch.float64, torch.float16, torch.bfloat16]


@pytest.mark.parametrize("dtype", _DTYPES, ids=str)
def test_statistics_dtypes(dtype: torch.dtype, graph: dtorch.Graph) -> None:
    """16-bit floats accumulate in float32 and come back in their dtype, as torch's (Partial
    results are rounded on each device before they add up: a few units in the last place)."""
    mesh = dtorch.init_device_mesh("cpu", 3)
    x = (torch.randn((7, 4), generator=_G) * 2).to(dtype)
    t = place(x, mesh, [S0], graph)
    for got, want in (
        (t.var(0), x.var(0)),
        (t.std(1), x.std(1)),
        (dtorch.var_mean(t, 0)[1], torch.var_mean(x, 0)[1]),
        (t.logsumexp(1), x.logsumexp(1)),
        (t.norm(dim=0), x.norm(dim=0)),
        (t.nanmean(0), x.nanmean(0)),
        (t.amax(1), x.amax(1)),
    ):
        assert got.dtype == want.dtype
        eps = torch.finfo(dtype).eps
        torch.testing.assert_close(got.to_torch(), want, rtol=max(8 * eps, 1e-6), atol=1e-5)


def test_integer_inputs(graph: dtorch.Graph) -> None:
    """var/std/norm/nanmean refuse integers as torch does (a DtypeError); logsumexp gives the
    default float dtype; nansum and count_nonzero take any dtype."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.randint(-3, 4, (4, 6), generator=_G)
    t = place(x, mesh, [S0], graph)
    for call, words in (
        (t.var, "std and var only support floating point"),
        (lambda: dtorch.std_mean(t, 1), "std and var only support floating point"),
        (t.norm, "expected a floating point or complex tensor"),
        (lambda: t.norm(dtype=torch.float64), "expected a floating point or complex tensor"),
        (t.nanmean, "expected input to have floating point or complex dtype"),
    ):
        with pytest.raises(DtypeError, match=words):
            call()
    for got, want in (
        (t.logsumexp(1), x.logsumexp(1)),
        (t.nansum(0), x.nansum(0)),
        (t.bool().count_nonzero(), x.bool().count_nonzero()),
        (t.amin(1), x.amin(1)),
    ):
        assert got.dtype == want.dtype
        torch.testing.assert_close(got.to_torch(), want)


def test_argument_forms(graph: dtorch.Graph) -> None:
    """torch's overloads: unbiased positionally and alone, correction=, dim=() meaning every
    dim, norm orders; and the arguments torch refuses."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x = torch.randn((6, 5), generator=_G)
    t, whole = place(x, mesh, [S1, R], graph), place(x, mesh, [R, R], graph)
    for got, want in (
        (t.var(True), x.var(True)),
        (t.var(False), x.var(False)),
        (t.std(0, True, True), x.std(0, True, True)),
        (t.var(unbiased=False), x.var(unbiased=False)),
        (t.var(dim=(0, 1), correction=2.5), x.var(dim=(0, 1), correction=2.5)),
        (t.std(()), x.std(())),
        (whole.amax(()), x.amax(())),
        (t.count_nonzero(()), x.count_nonzero(())),
        (dtorch.amax(whole, -1, True), x.amax(-1, True)),
        (t.norm("fro", (0, 1)), x.norm("fro", (0, 1))),
        (t.norm(0, 0), x.norm(0, 0)),
        (t.norm(INF, 0), x.norm(INF, 0)),
        (t.norm(0.5), x.norm(0.5)),
        (t.norm(dtype=torch.float64), x.norm(dtype=torch.float64)),
        (dtorch.logsumexp(t, 0, keepdim=True), torch.logsumexp(x, 0, keepdim=True)),
    ):
        assert got.shape == want.shape and got.dtype == want.dtype
        torch.testing.assert_close(got.to_torch(), want)
    with pytest.raises(TypeError, match="unbiased or correction, not both"):
        t.var(0, True, correction=0)
    with pytest.raises(TypeError, match="correction must be a number"):
        t.var(correction="1")
    with pytest.raises(
        ParamError, match=r"^norm: p='nucl' is not supported; accepted: 'fro', 'nuc'"
    ):
        t.norm("nucl")
    with pytest.raises(TypeError, match="p must be 'fro', 'nuc' or a number"):
        t.norm([2])
    with pytest.raises(DtypeError, match="without narrowing"):
        t.double().norm(dtype=torch.float32)
    with pytest.raises(TypeError):
        t.logsumexp()  # type: ignore[call-arg]  # torch requires dim too
    with pytest.raises(TypeError, match=r"^cumsum: dim must be an int"):
        t.cumsum((0, 1))  # type: ignore[arg-type]
    with pytest.raises(IndexError, match="out of range"):
        t.cumprod(2)
    with pytest.raises(ShapeError, match="names a dimension twice"):
        t.amax((0, 0))
    cube = place(torch.randn(2, 3, 4, generator=_G), mesh, [R, R], graph)
    with pytest.raises(ParamError, match="at most 2 dims"):
        cube.norm("fro", (0, 1, 2))


def test_rejections(graph: dtorch.Graph) -> None:
    """Partial inputs: refused at the call, naming the function, the placements and what it
    accepts."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.randn((4, 3), generator=_G)
    p = place(x, mesh, [P], graph)
    for name, call in (
        ("var", p.var), ("std", lambda: p.std(0)), ("var_mean", lambda: dtorch.var_mean(p)),
        ("std_mean", lambda: dtorch.std_mean(p, 1)), ("logsumexp", lambda: p.logsumexp(1)),
        ("norm", p.norm), ("count_nonzero", p.count_nonzero), ("nansum", p.nansum),
        ("nanmean", lambda: p.nanmean(1)), ("amax", p.amax), ("amin", lambda: p.amin(0)),
        ("cumprod", lambda: p.cumprod(1)),
    ):  # fmt: skip
        with pytest.raises(PlacementError) as info:
            call()
        check_rejection(name, info.value, [p])


def test_empty_inputs(graph: dtorch.Graph) -> None:
    """torch's values over empty dims (NaN variance, -inf logsumexp, 0 norms and sums) and
    its refusals (a maximum over nothing), sharded on the kept dim."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.zeros(0, 3)
    t = place(x, mesh, [S1], graph)
    with pytest.warns(UserWarning):
        for got, want in ((t.var(0), x.var(0)), (t.std(), x.std())):
            torch.testing.assert_close(got.to_torch(), want, equal_nan=True)
    for got, want in (
        (t.logsumexp(0), x.logsumexp(0)),
        (t.norm(dim=0), x.norm(dim=0)),
        (t.nansum(0), x.nansum(0)),
        (t.count_nonzero(0), x.count_nonzero(0)),
        (place(x, mesh, [R], graph).amax(1), x.amax(1)),
        (t.amax(1), x.amax(1)),  # over the sharded dim: each block's maxima, combined
        (t.cumsum(0), x.cumsum(0)),
    ):
        assert got.shape == want.shape and got.dtype == want.dtype
        torch.testing.assert_close(got.to_torch(), want)
    with pytest.raises(IndexError, match="Expected reduction dim 0 to have non-zero size"):
        t.amax(0)
    with pytest.raises(ShapeError, match="does not have an identity"):
        place(x, mesh, [R], graph).norm(INF)


@pytest.mark.parametrize("placements", [[R, R], [S0, R], [S1, S0]])
def test_std_of_large_float32_values_is_finite(placements: list, graph: dtorch.Graph) -> None:
    """torch's CPU std accumulates in double: a float32 standard deviation above about
    1.8e19 is finite though its variance is not, and so is dtorch's (it was inf)."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x = torch.tensor([[3e19, -3e19, 1e19, 0.0], [2e19, 5e18, -4e19, 1.0]])
    t = place(x, mesh, placements, graph)
    for got, want in (
        (t.std(), x.std()),
        (t.std(1), x.std(1)),
        (dtorch.std_mean(t, 0)[0], torch.std_mean(x, 0)[0]),
        (dtorch.std_mean(t)[1], torch.std_mean(x)[1]),
    ):
        assert got.dtype == want.dtype and bool(want.isfinite().all())
        torch.testing.assert_close(got.to_torch(), want)
    assert torch.equal(t.var().to_torch(), x.var())  # inf: the variance itself overflows


def test_logsumexp_is_stable(graph: dtorch.Graph) -> None:
    """Large values do not overflow; rows of -inf give -inf, a +inf gives +inf, NaN stays."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x = torch.tensor(
        [[1000.0, 1000.0, -1000.0], [-INF, -INF, -INF], [INF, 1.0, 2.0], [float("nan"), 1, 2]]
    )
    t = place(x, mesh, [S0, R], graph)
    torch.testing.assert_close(t.logsumexp(1).to_torch(), x.logsumexp(1), equal_nan=True)
    assert math.isclose(t.logsumexp(1).to_torch()[0].item(), 1000 + math.log(2), rel_tol=1e-6)


def test_scan_param_codec_and_saved_program(graph: dtorch.Graph, tmp_path: Path) -> None:
    """The Scan param round-trips through the codec; a traced program with a scan and the
    statistics replays, saves and loads (its rule re-checks the file's operators)."""
    for param in (ScanParam(ScanKind.SUM, 0), ScanParam(ScanKind.PROD, 2, torch.float64)):
        back = dtorch.deserialize(dtorch.serialize(param))
        assert back == param and type(back) is ScanParam
        dtorch.assert_structural_equal(back, param)

    def fn(t: dtorch.Tensor) -> dtorch.Tensor:
        return t.cumsum(1) + t.cumprod(1) * t.var(1, keepdim=True) + t.logsumexp(1, True)

    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.randn((6, 4), generator=_G)
    t = place(x, mesh, [S0], graph)
    want = x.cumsum(1) + x.cumprod(1) * x.var(1, keepdim=True) + x.logsumexp(1, True)
    program = dtorch.trace(fn, t)
    torch.testing.assert_close(program(t).to_torch(), want)
    path = tmp_path / "scan.dtorch"
    program.save(path)
    loaded = dtorch.load_program(path, graph=graph)
    torch.testing.assert_close(loaded(t).to_torch(), want)


def test_norm_and_nanmean_edges_follow_torch(graph: dtorch.Graph) -> None:
    """'fro' over dim=() is every dim; a negative p over an empty dim and nanmean to an
    integer dtype are refused, as torch refuses them."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x, empty = torch.arange(24.0).reshape(2, 3, 4), torch.zeros(0, 3)
    t, e = place(x, mesh, [Shard(1)], graph), place(empty, mesh, [R], graph)
    torch.testing.assert_close(t.norm("fro", dim=()).to_torch(), x.norm("fro", dim=()))
    with pytest.raises(RuntimeError, match="cannot compute the -1 norm"):
        empty.norm(-1, dim=0)
    with pytest.raises(ShapeError, match=r"cannot compute the -1.0 norm over an empty dim"):
        e.norm(-1, dim=0)
    with pytest.raises(RuntimeError, match="Optional dtype must be either a floating point"):
        x.nanmean(dtype=torch.int64)
    with pytest.raises(DtypeError, match="Optional dtype must be either a floating point"):
        t.nanmean(dtype=torch.int64)


def test_refusals_name_the_function_called(graph: dtorch.Graph) -> None:
    """A refusal of an operator a statistic records names the statistic first."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    part = place(torch.ones(2, 2), mesh, [Shard(0)], graph)
    marked = dtorch.cat([part, part])  # sub-split: the inner mean/sum/masked_fill refuse it
    for name in ("var", "norm", "nanmean"):
        with pytest.raises(PlacementError, match=rf"^{name}: \w+: an input is Shard"):
            getattr(marked, name)(dim=0)


@pytest.mark.parametrize(
    "call",
    [
        lambda lib, t: lib.nanmean(t(torch.tensor([1, 2]))),
        lambda lib, t: lib.nanmean(t(torch.tensor([1.0, 2.0])), dtype=torch.int64),
        lambda lib, t: lib.nn.functional.glu(t(torch.tensor(1.0))),
    ],
    ids=["nanmean-int", "nanmean-dtype", "glu-0d"],
)
def test_a_refusal_in_torch_s_words_is_not_named_twice(call: Any, graph: dtorch.Graph) -> None:
    """torch's own words that already begin with the operator's name (``nanmean(): ...``,
    ``glu does not ...``) pass as they are; they were named a second time
    (``nanmean: nanmean(): ...``)."""
    with pytest.raises(Exception) as theirs:
        call(torch, lambda t: t)
    with pytest.raises(Exception) as ours:
        call(dtorch, lambda t: dtorch.from_torch(t, graph=graph))
    assert str(ours.value).startswith(str(theirs.value).split(",")[0][:24])

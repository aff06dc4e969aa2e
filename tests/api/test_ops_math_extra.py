"""The functions of ``dtorch.api.ops.math_extra`` (``quantile``, ``nanquantile``,
``histogram``, ``argwhere``, ``combinations``, ``trapezoid``, ``trapz``,
``cumulative_trapezoid``, ``renorm``, ``vander``, ``logaddexp2``, ``polygamma``,
``mvlgamma``, ``frexp``, ``put``) and ``diff``'s ``prepend``/``append``, through the public
API against torch on the full tensors: even and uneven shards, a seeded sample of layouts on
1-D, 2-D and 3-D meshes, float32/float64 (and integers where torch takes them); torch's
refusals refused at the call, naming the function."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import pytest
import torch

import dtorch
from dtorch.errors import DTorchError
from tests.api.ops_harness import S0, P, R, run_api
from tests.simulate import layout_combos

pytestmark = pytest.mark.timeout(60)

MESHES = ((2,), (3,), (2, 2), (2, 2, 2))
_G = torch.Generator().manual_seed(11)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(11)


def _rand(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    if dtype.is_floating_point:
        return torch.randn(shape, generator=_G).to(dtype)
    return torch.randint(-4, 5, shape, generator=_G).to(dtype)


def _run(graph: Any, name: str, fn: Callable[..., Any], fulls: list[torch.Tensor], want: Any,
         mesh_shape: tuple[int, ...], exact: bool = False, limit: int = 12,
         partial: bool = False, every: bool = True) -> None:  # fmt: skip
    """``fn`` against ``want`` on a seeded sample of layouts: every layout without a Partial
    is accepted (a sharded dim is gathered where needed); one with a Partial too where
    ``partial`` (the function is linear), else it may be refused, naming ``name``; not
    ``every``: layouts may be refused as for any elementwise operator (shards that do not
    line up once broadcast)."""
    wants = list(want) if isinstance(want, tuple) else [want]
    limit = limit if len(mesh_shape) == 1 else max(3, limit // 3)
    accepted = run_api(
        graph, name, fn, fulls, mesh_shape, wants, table=None, exact=exact, limit=limit
    )
    combos = layout_combos(len(mesh_shape), fulls, limit=limit, seed=0)
    needed = [c for c in combos if every and (partial or not any(P in p for p in c))]
    refused = [c for c in needed if c not in accepted]
    assert not refused, f"{name}: refused {refused} on {mesh_shape}"


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_quantile(dtype: torch.dtype, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    x = _rand(5, 7, dtype=dtype)
    x[1, 2] = float("nan")
    q = torch.tensor([0.0, 0.3, 0.5, 1.0], dtype=dtype)
    for mode in ("linear", "lower", "higher", "midpoint", "nearest"):
        for fn in (torch.quantile, torch.nanquantile):
            name = fn.__name__
            ours = getattr(dtorch, name)
            want = fn(x, q, dim=1, interpolation=mode)
            fn_ = lambda t, f=ours, m=mode: f(t, q, 1, interpolation=m)  # noqa: E731
            _run(graph, name, fn_, [x], want, mesh_shape, limit=4)
    want = torch.quantile(x, 0.25, dim=0, keepdim=True)
    _run(graph, "quantile", lambda t: t.quantile(0.25, dim=0, keepdim=True), [x], want, mesh_shape)
    y = _rand(3, 4, 5, dtype=dtype)
    want = torch.nanquantile(y, q, dim=None, keepdim=True)
    _run(graph, "nanquantile", lambda t: t.nanquantile(q, keepdim=True), [y], want, mesh_shape)


def test_quantile_refusals(graph) -> None:  # type: ignore[no-untyped-def]
    x = dtorch.from_torch(torch.randn(3, 4), graph=graph)
    cases = [
        (lambda: dtorch.quantile(x.long(), 0.5), "float or double"),
        (lambda: dtorch.quantile(x, 1.5), "in the range [0, 1]"),
        (lambda: dtorch.quantile(x, torch.tensor([0.5], dtype=torch.float64)), "same dtype"),
        (lambda: dtorch.quantile(x, torch.tensor([[0.5]])), "scalar or 1D"),
        (lambda: dtorch.quantile(x, 0.5, interpolation="foo"), "interpolation must be"),
        (lambda: dtorch.quantile(x[:0], 0.5), "non-empty"),
        (lambda: dtorch.quantile(x, 0.5, dim=5), "out of range"),
    ]
    for run, text in cases:
        with pytest.raises(DTorchError, match=re.escape(text)):
            run()
    mesh = dtorch.init_device_mesh("cpu", (2,))
    p = dtorch.from_torch(torch.randn(4), device_mesh=mesh, placements=[dtorch.Partial()],
                          graph=graph)  # fmt: skip
    with pytest.raises(dtorch.errors.PlacementError, match=r"^quantile: "):
        dtorch.quantile(p, 0.5)


@pytest.mark.parametrize("mesh_shape", [(2,), (2, 2)])
def test_waiting_forms(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    x = _rand(6, 5)
    w = _rand(6, 5).abs()
    want = tuple(torch.histogram(x, 4, range=(-1.0, 1.0), weight=w, density=True))
    fn = lambda t, u: tuple(dtorch.histogram(t, 4, range=(-1.0, 1.0), weight=u, density=True))  # noqa: E731
    _run(graph, "histogram", fn, [x, w], want, mesh_shape)
    edges = torch.tensor([-2.0, 0.0, 0.5, 3.0])
    _run(graph, "histogram", lambda t: tuple(t.histogram(edges)), [x],
         tuple(torch.histogram(x, edges)), mesh_shape)  # fmt: skip
    i = _rand(4, 6, dtype=torch.int64)
    _run(graph, "argwhere", dtorch.argwhere, [i], torch.argwhere(i), mesh_shape, exact=True)
    _run(graph, "argwhere", lambda t: t.argwhere(), [i > 0], torch.argwhere(i > 0), mesh_shape,
         exact=True)  # fmt: skip
    with pytest.raises(DTorchError, match="histogram"):
        dtorch.histogram(dtorch.from_torch(i, graph=graph), 3)


@pytest.mark.parametrize("mesh_shape", MESHES)
def test_combinations_vander(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    for dtype in (torch.float32, torch.int64, torch.int32):
        v = _rand(5, dtype=dtype)
        for r, again in ((2, False), (3, True), (0, False), (6, False)):
            want = torch.combinations(v, r, with_replacement=again)
            fn = lambda t, r=r, w=again: dtorch.combinations(t, r, w)  # noqa: E731
            _run(graph, "combinations", fn, [v], want, mesh_shape, exact=True, limit=4)
        for n, up in ((None, False), (3, True), (0, False), (1, True), (7, False)):
            _run(graph, "vander", lambda t, n=n, up=up: dtorch.vander(t, n, up), [v],
                 torch.vander(v, n, up), mesh_shape, exact=True, limit=4)  # fmt: skip
    b = torch.tensor([True, False, True])
    _run(graph, "vander", dtorch.vander, [b], torch.vander(b), mesh_shape, exact=True, limit=4)


def test_combinations_vander_refusals(graph) -> None:  # type: ignore[no-untyped-def]
    m = dtorch.from_torch(torch.ones(2, 2), graph=graph)
    v = dtorch.from_torch(torch.ones(3), graph=graph)
    for run, error, text in (
        (lambda: dtorch.combinations(m), ShapeErr, "1D vector"),
        (lambda: dtorch.combinations(v, -1), ValueError, "non-negative"),
        (lambda: dtorch.vander(m), ShapeErr, "one-dimensional"),
        (lambda: dtorch.vander(v, -1), ValueError, "non-negative"),
    ):
        with pytest.raises(error, match=text):
            run()


ShapeErr = dtorch.errors.ShapeError


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_trapezoid(dtype: torch.dtype, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    y, x1, xs = _rand(4, 7, dtype=dtype), _rand(7, dtype=dtype), _rand(4, 7, dtype=dtype)
    for dim in (0, -1):
        want = torch.trapezoid(y, dx=0.5, dim=dim)
        _run(graph, "trapezoid", lambda t, d=dim: dtorch.trapezoid(t, dx=0.5, dim=d), [y], want,
             mesh_shape, limit=6)  # fmt: skip
        want = torch.cumulative_trapezoid(y, dim=dim)
        _run(graph, "cumulative_trapezoid", lambda t, d=dim: dtorch.cumulative_trapezoid(t, dim=d),
             [y], want, mesh_shape, limit=6)  # fmt: skip
    want = torch.trapezoid(y, x1)
    _run(graph, "trapezoid", dtorch.trapezoid, [y, x1], want, mesh_shape, limit=6)
    want = torch.trapz(y, xs, dim=0)
    _run(graph, "trapz", lambda a, b: dtorch.trapz(a, b, dim=0), [y, xs], want, mesh_shape,
         limit=6)  # fmt: skip
    want = torch.cumulative_trapezoid(y, xs, dim=1)
    _run(graph, "cumulative_trapezoid", lambda a, b: dtorch.cumulative_trapezoid(a, b, dim=1),
         [y, xs], want, mesh_shape, limit=6)  # fmt: skip
    e = torch.ones(3, 0, dtype=dtype)
    for fn in (torch.trapezoid, torch.cumulative_trapezoid):
        got = getattr(dtorch, fn.__name__)(dtorch.from_torch(e, graph=graph)).to_torch()
        assert got.shape == fn(e).shape and got.dtype == fn(e).dtype


def test_trapezoid_refusals(graph) -> None:  # type: ignore[no-untyped-def]
    y = dtorch.from_torch(torch.ones(3), graph=graph)
    with pytest.raises(dtorch.errors.DtypeError, match="bool is not supported"):
        dtorch.trapezoid(y > 0)
    with pytest.raises(ValueError, match="dx as a real number"):
        dtorch.trapezoid(y, dx=True)
    with pytest.raises(ShapeErr, match="one `x` value for each sample point"):
        dtorch.trapezoid(y, torch.ones(4))
    with pytest.raises(TypeError, match="not both"):
        dtorch.cumulative_trapezoid(y, torch.ones(3), dx=1.0)
    with pytest.raises(IndexError, match="no dimensions"):
        dtorch.trapezoid(y.sum())


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64])
def test_renorm(dtype: torch.dtype, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    x = torch.randn((4, 3, 5), generator=_G, dtype=dtype)  # complex: the moduli's norms
    for p, dim, maxnorm in ((2, 0, 1.5), (1, 1, 2.0), (3.5, -1, 0.5)):
        want = torch.renorm(x, p, dim, maxnorm)
        _run(graph, "renorm", lambda t, a=(p, dim, maxnorm): t.renorm(*a), [x], want, mesh_shape,
             limit=6)  # fmt: skip


def test_renorm_refusals_and_in_place(graph) -> None:  # type: ignore[no-untyped-def]
    full = torch.randn(3, 4)
    x = dtorch.from_torch(full, graph=graph)
    for run, text in (
        (lambda: dtorch.renorm(x, 0, 0, 1.0), "non-positive-norm"),
        (lambda: dtorch.renorm(x, 2, 0, -1.0), "maxnorm to be >= 0"),
        (lambda: dtorch.renorm(x[0], 2, 0, 1.0), "at least 2 dimensions"),
        (lambda: dtorch.renorm(x.long(), 2, 0, 1.0), "floating point"),
    ):
        with pytest.raises(DTorchError, match=text):
            run()
    assert x.renorm_(2, 1, 0.5) is x
    torch.testing.assert_close(x.to_torch(), full.renorm(2, 1, 0.5))


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_elementwise_math(dtype: torch.dtype, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    a, b = _rand(4, 6, dtype=dtype), _rand(6, dtype=dtype)
    pos = a.abs() + 3
    for n in (0, 1, 2, 3):
        _run(graph, "polygamma", lambda t, n=n: t.polygamma(n), [pos], torch.polygamma(n, pos),
             mesh_shape, limit=4)  # fmt: skip
    for p in (1, 3):
        _run(graph, "mvlgamma", lambda t, p=p: dtorch.mvlgamma(t, p), [pos], torch.mvlgamma(pos, p),
             mesh_shape, limit=4)  # fmt: skip
    if not dtype.is_floating_point:
        with pytest.raises(DTorchError, match="logaddexp2"):
            dtorch.logaddexp2(dtorch.from_torch(a, graph=graph), 1)
        return
    a[0, :3] = torch.tensor([float("inf"), float("-inf"), float("nan")], dtype=dtype)
    b[:2] = torch.tensor([float("inf"), float("-inf")], dtype=dtype)
    want = torch.logaddexp2(a, b)
    _run(graph, "logaddexp2", dtorch.logaddexp2, [a, b], want, mesh_shape, every=False)
    _run(graph, "logaddexp2", dtorch.logaddexp2, [b, a], torch.logaddexp2(b, a), mesh_shape,
         every=False)  # fmt: skip
    c = _rand(4, 6, dtype=dtype)
    _run(graph, "logaddexp2", dtorch.logaddexp2, [a, c], torch.logaddexp2(a, c), mesh_shape,
         every=False)  # fmt: skip
    want = torch.logaddexp2(a, torch.tensor(2.5, dtype=dtype))
    _run(graph, "logaddexp2", lambda t: t.logaddexp2(2.5), [a], want, mesh_shape)


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_frexp(dtype: torch.dtype, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    x = (_rand(5, 6, dtype=torch.float64) * 1e3).to(dtype)
    special = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1.0, 0.5, -2.0, 1e-40]
    tiny = torch.finfo(dtype).tiny / 4  # a subnormal
    x.view(-1)[: len(special) + 1] = torch.tensor([*special[:-1], tiny, 0.75], dtype=dtype)
    if dtype == torch.float32:
        x[4, :] = torch.tensor([1e-40, 3e38, 2.0**-126, 2.0**127, 0.99999994, 1.0000001])
    _run(graph, "frexp", lambda t: tuple(dtorch.frexp(t)), [x], tuple(torch.frexp(x)),
         mesh_shape, exact=True, limit=6)  # fmt: skip
    with pytest.raises(dtorch.errors.DtypeError, match="floating-point"):
        dtorch.frexp(dtorch.from_torch(torch.ones(2, dtype=torch.int64), graph=graph))


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_put(dtype: torch.dtype, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    x, src = _rand(4, 5, dtype=dtype), _rand(2, 3, dtype=dtype)
    index = torch.tensor([[0, 19, -1], [7, 3, -20]])
    unique = torch.tensor([[0, 19, 11], [7, 3, -2]])
    want = x.clone().put_(unique, src)
    _run(graph, "put", lambda t, s: dtorch.put(t, unique, s), [x, src], want, mesh_shape,
         exact=True)  # fmt: skip
    want = x.clone().put_(index, src, accumulate=True)
    _run(graph, "put", lambda t, i, s: t.put(i, s, True), [x, index, src], want, mesh_shape,
         exact=True)  # fmt: skip
    t = dtorch.from_torch(x.clone(), graph=graph)
    assert t.put_(unique, src) is t
    assert torch.equal(t.to_torch(), x.clone().put_(unique, src))


def test_put_refusals(graph) -> None:  # type: ignore[no-untyped-def]
    x = dtorch.from_torch(torch.zeros(2, 2), graph=graph)
    for run, error, text in (
        (lambda: dtorch.put(x, torch.tensor([4]), torch.tensor([1.0])), IndexError, "index 4"),
        (lambda: dtorch.put(x, torch.tensor([1.0]), torch.tensor([1.0])), TypeError, "long"),
        (lambda: dtorch.put(x, torch.tensor([1]), torch.tensor([1])), TypeError, "same dtype"),
        (lambda: x.put_(torch.tensor([1]), torch.ones(2)), ValueError, "number of elements"),
    ):
        with pytest.raises(error, match=text):
            run()


@pytest.mark.parametrize("mesh_shape", [(2,), (2, 2)])
def test_diff_prepend_append(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    x, before, after = _rand(4, 6), _rand(4, 2), _rand(4, 1)
    want = torch.diff(x, n=2, dim=1, prepend=before, append=after)
    fn = lambda t, p, a: dtorch.diff(t, 2, 1, prepend=p, append=a)  # noqa: E731
    _run(graph, "diff", fn, [x, before, after], want, mesh_shape, exact=True, every=False)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_polygamma_halves_and_in_place(dtype: torch.dtype, graph) -> None:  # type: ignore[no-untyped-def]
    full = torch.rand(2, 8, generator=_G).to(dtype) * 4 + 0.5
    _run(graph, "polygamma", lambda t: dtorch.polygamma(2, t), [full], torch.polygamma(2, full),
         (2,), exact=True, limit=4)  # fmt: skip
    x = dtorch.from_torch(full.double(), graph=graph)
    assert x.polygamma_(1) is x
    torch.testing.assert_close(x.to_torch(), full.double().polygamma(1))
    assert x.mvlgamma_(2) is x
    torch.testing.assert_close(x.to_torch(), full.double().polygamma(1).mvlgamma(2))
    with pytest.raises(ValueError, match="negative n"):
        dtorch.polygamma(-1, x)
    with pytest.raises(ValueError, match="p has to be greater than or equal to 1"):
        x.mvlgamma(0)


def test_histogram_refusals(graph) -> None:  # type: ignore[no-untyped-def]
    x = dtorch.from_torch(torch.tensor([1.0, 2.0]), graph=graph)
    with pytest.raises(DTorchError, match=r"^histogram: "):
        dtorch.histogram(x, torch.tensor([0.0, 1.5, 3.0]), range=(0.0, 1.0))
    with pytest.raises(DTorchError, match=r"^histogram: "):
        dtorch.histogram(x, -1)


def test_review_findings_match_torch(graph: dtorch.Graph) -> None:
    """A differential review's findings: polygamma(1) is torch's trigamma (infinities and
    poles too) and a large n gives torch's infinities at once; quantile keeps an unevenly
    sharded size-1 dim; renorm refuses NaN bounds; mvlgamma refuses bools; trapezoid of an
    empty bool dim is zeros; diff with n=0 never joins prepend."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    d = lambda t, *p: dtorch.from_torch(t, device_mesh=mesh, placements=list(p) or [R], graph=graph)  # noqa: E731
    x = torch.tensor([math.inf, -math.inf, -1.0, -2.0, 0.5, 3.0])
    for n in (1, 171):
        got = dtorch.polygamma(n, d(x)).to_torch()
        torch.testing.assert_close(got, torch.polygamma(n, x), equal_nan=True)
    row = torch.randn(1, 5)
    for keep in (False, True):
        got = dtorch.quantile(d(row, S0), 0.5, dim=1, keepdim=keep).to_torch()
        torch.testing.assert_close(got, torch.quantile(row, 0.5, dim=1, keepdim=keep))
    z = d(torch.randn(2, 3))
    for bad in ((math.nan, 0, 1.0), (2, 0, math.nan)):
        with pytest.raises(RuntimeError, match="renorm"):
            dtorch.renorm(z, *bad)
    with pytest.raises(RuntimeError, match="boolean"):
        dtorch.mvlgamma(d(torch.tensor([True, False])), 1)
    empty = torch.zeros(3, 0, dtype=torch.bool)
    assert torch.equal(dtorch.trapezoid(d(empty)).to_torch(), torch.trapezoid(empty))
    grid = dtorch.init_device_mesh("cpu", (2, 2))
    t = dtorch.from_torch(torch.arange(4.0), device_mesh=grid, placements=[S0, R], graph=graph)
    p = dtorch.from_torch(torch.zeros(2), device_mesh=grid, placements=[R, S0], graph=graph)
    assert torch.equal(dtorch.diff(t, n=0, prepend=p).to_torch(), torch.arange(4.0))

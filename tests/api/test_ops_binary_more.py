"""More binary and ternary elementwise operators through the public API against torch:
``atan2``/``arctan2`` and ``hypot`` (one operator each), and the composites ``xlogy``,
``logaddexp``, ``lerp``, ``addcmul``, ``addcdiv`` and ``addmm``: broadcasting, numbers on
either side, torch's dtype promotion and refusals, layouts on 1-D, 2-D and 3-D meshes (a
seeded sample on the larger ones), Partial kept only where the operator is linear in it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch

import dtorch
from dtorch.errors import DtypeError, PlacementError, ShapeError
from tests.api.ops_harness import (
    ALL_MESHES,
    S0,
    S1,
    P,
    R,
    compare,
    elementwise_table,
    place,
    run_api,
)
from tests.simulate import layout_combos

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(53)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(53)


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=_G) * 2


def _no_partial(combos: Sequence[Any]) -> list[Any]:
    return [c for c in combos if not any(P in placements for placements in c)]


def _meshes(i: int) -> list[tuple[int, ...]]:
    """A 1-D mesh and one N-D mesh, taken in turn, so that every mesh meets some operator."""
    nd = [m for m in ALL_MESHES if len(m) > 1]
    return [ALL_MESHES[i % 2], nd[i % len(nd)]]


def _special(*shape: int) -> torch.Tensor:
    x = _randn(*shape)
    n = min(5, x.numel())
    x.view(-1)[:n] = torch.tensor([0.0, float("inf"), -float("inf"), float("nan"), 0.0])[:n]
    return x


#: name in messages, the call, torch's form, exact (the composites round differently from
#: torch's fused kernels in the last bit).
_BINARY: list[tuple[str, Callable[..., Any], Callable[..., Any], bool]] = [
    ("atan2", lambda a, b: a.atan2(b), torch.atan2, False),
    ("atan2", dtorch.arctan2, torch.arctan2, False),
    ("hypot", dtorch.hypot, torch.hypot, False),
    ("xlogy", dtorch.xlogy, torch.xlogy, False),
    ("logaddexp", lambda a, b: a.logaddexp(b), torch.logaddexp, False),
]


@pytest.mark.parametrize(("i", "case"), list(enumerate(_BINARY)), ids=[c[0] for c in _BINARY])
def test_binary_layouts(i: int, case: tuple[Any, ...], graph: dtorch.Graph) -> None:
    """A (5, 3) operand with a broadcast (3,) one, NaN and infinities on both: every layout
    without Partial on a 1-D mesh, a sample on an N-D one, placements as the elementwise
    table gives them; a Partial is refused (none of them is linear)."""
    name, call, ref, exact = case
    a, b = _special(5, 3), _special(3)
    table = elementwise_table([a.shape, b.shape])
    for mesh_shape in _meshes(i):
        combos = layout_combos(len(mesh_shape), [a, b], limit=10 if len(mesh_shape) > 1 else 99)
        run_api(
            graph, name, call, [a, b], mesh_shape, [ref(a, b)], table=table, exact=exact,
            combos=_no_partial(combos),
        )  # fmt: skip
    mesh = dtorch.init_device_mesh("cpu", 2)
    with pytest.raises(PlacementError, match=rf"^{name}: got \(P,\).*accepted"):
        call(place(a, mesh, [P], graph), place(b, mesh, [R], graph))


def test_numbers_and_promotion(graph: dtorch.Graph) -> None:
    """Numbers on either side (torch's 0-d tensor forms as the oracle), 0-d torch tensors,
    and torch's promotion: integers to the default float, a wider tensor wins."""
    mesh = dtorch.init_device_mesh("cpu", 3)
    ints, floats = torch.arange(-4, 5).reshape(3, 3), _special(3, 3)
    i, f = place(ints, mesh, [S0], graph), place(floats, mesh, [S1], graph)
    wide = place(floats.double(), mesh, [S1], graph)
    cases: list[tuple[Any, torch.Tensor]] = [
        (dtorch.atan2(i, i), torch.atan2(ints, ints)),
        (dtorch.atan2(i, 2), torch.atan2(ints, torch.tensor(2))),
        (dtorch.atan2(-1.5, f), torch.atan2(torch.tensor(-1.5), floats)),
        (f.atan2(wide), torch.atan2(floats, floats.double())),
        (f.atan2(torch.tensor(2.0, dtype=torch.float64)), floats.atan2(torch.tensor(2.0).double())),
        (dtorch.hypot(f, 0.5), torch.hypot(floats, torch.tensor(0.5))),
        (dtorch.xlogy(i, i), torch.xlogy(ints, ints)),
        (dtorch.xlogy(2, f), torch.xlogy(2, floats)),
        (dtorch.xlogy(f, 0), torch.xlogy(floats, 0)),
        (dtorch.logaddexp(f, wide), torch.logaddexp(floats, floats.double())),
        (dtorch.logaddexp(f, -1.0), torch.logaddexp(floats, torch.tensor(-1.0))),
    ]  # fmt: skip
    for n, (out, want) in enumerate(cases):
        compare(out.to_torch(), want, False, f"case {n}")
    with pytest.raises(DtypeError, match=r"^hypot: torch rejects these dtypes.*Long"):
        dtorch.hypot(i, i)
    with pytest.raises(DtypeError, match=r"^logaddexp: torch rejects these dtypes.*Long"):
        dtorch.logaddexp(i, i)
    with pytest.raises(TypeError, match=r"^xlogy: at least one argument must be a dtorch\.Tensor"):
        dtorch.xlogy(2, 3)
    with pytest.raises(TypeError, match=r"^xlogy: other must be a number .*got str"):
        dtorch.xlogy(f, "2")


def _lerp_scalar(weight: float) -> Callable[..., Any]:
    return lambda a, b: a.lerp(b, weight)


@pytest.mark.parametrize("weight", [0.3, -2.0, 0.5, 0.9])
def test_lerp_number_weight(weight: float, graph: dtorch.Graph) -> None:
    """Both of torch's formulas (``|weight| < 0.5`` or not); linear in ``input`` and ``end``,
    so ``lerp(P, P, w)`` stays Partial and other Partial rows are refused."""
    a, b = _randn(5, 3), _randn(3)
    table = elementwise_table([a.shape, b.shape], {(P, P): P})
    for mesh_shape in ((2,), (2, 3)):
        run_api(
            graph, "lerp", _lerp_scalar(weight), [a, b], mesh_shape, [torch.lerp(a, b, weight)],
            table=table, exact=False, limit=99 if len(mesh_shape) == 1 else 10,
        )  # fmt: skip


def _check(
    graph: Any, name: str, fn: Callable[..., Any], fulls: list[torch.Tensor],
    mesh_shape: tuple[int, ...], want: torch.Tensor, limit: int, partial: bool = False,
) -> int:  # fmt: skip
    """``fn`` on a seeded sample of layouts: torch's values where accepted, a refusal that
    names ``name`` and what it accepts elsewhere; returns how many were accepted."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    combos = layout_combos(mesh.ndim, fulls, limit=limit)
    accepted = 0
    for combo in combos if partial else _no_partial(combos):
        inputs = [place(t, mesh, p, graph) for t, p in zip(fulls, combo, strict=True)]
        try:
            out = fn(*inputs)
        except PlacementError as error:
            assert str(error).startswith(f"{name}: ") and "accepted" in str(error), str(error)
            continue
        compare(out.to_torch(), want, False, f"{name} on {mesh_shape} with {combo}")
        accepted += 1
    return accepted


#: name, call, torch's form, the full operands' shapes.
_TERNARY: list[tuple[str, Callable[..., Any], Callable[..., Any], list[tuple[int, ...]]]] = [
    ("lerp", lambda a, b, w: a.lerp(b, w), torch.lerp, [(5, 3), (5, 3), (3,)]),
    ("lerp", dtorch.lerp, torch.lerp, [(5, 1), (3,), (5, 3)]),
    ("addcmul", lambda a, b, c: a.addcmul(b, c, value=-0.5),
     lambda a, b, c: a.addcmul(b, c, value=-0.5), [(5, 3), (3,), (5, 3)]),
    ("addcmul", dtorch.addcmul, torch.addcmul, [(5, 3), (5, 3), (5, 1)]),
    ("addcdiv", lambda a, b, c: dtorch.addcdiv(a, b, c, value=2),
     lambda a, b, c: torch.addcdiv(a, b, c, value=2), [(5, 3), (5, 3), (3,)]),
    ("addmm", dtorch.addmm, torch.addmm, [(4,), (5, 3), (3, 4)]),
    ("addmm", lambda x, a, b: x.addmm(a, b, beta=0.5, alpha=-2),
     lambda x, a, b: x.addmm(a, b, beta=0.5, alpha=-2), [(5, 4), (5, 3), (3, 4)]),
]  # fmt: skip


@pytest.mark.parametrize(("i", "case"), list(enumerate(_TERNARY)), ids=[c[0] for c in _TERNARY])
def test_ternary_layouts(i: int, case: tuple[Any, ...], graph: dtorch.Graph) -> None:
    """Broadcast operands on a 1-D and an N-D mesh: torch's values wherever the layout is
    accepted (with all-Replicate and matching shards always among them)."""
    name, call, ref, shapes = case
    fulls = [_randn(*s) for s in shapes]
    if name == "lerp":
        fulls[2] = torch.rand(shapes[2], generator=_G) * 1.4 - 0.2  # both formulas
    if name == "addcdiv":
        fulls[2] = fulls[2].abs() + 0.5
    want = ref(*fulls)
    for mesh_shape in _meshes(i):
        one_d = len(mesh_shape) == 1  # every layout of a 1-D mesh, a sample of an N-D one
        accepted = _check(graph, name, call, fulls, mesh_shape, want, 99 if one_d else 12)
        assert accepted > 1 if one_d else accepted >= 1


def test_composite_dtypes(graph: dtorch.Graph) -> None:
    """torch's dtypes: promotion for addcmul/addcdiv, numbers truncated for integer results
    (as torch's kernels cast them), float16/bfloat16 computed as torch's opmath does (to
    within a rounding); and torch's refusals at the call with its reason."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    ints = torch.arange(-3, 3).reshape(2, 3)
    floats = _randn(2, 3)
    i, f = place(ints, mesh, [S0], graph), place(floats, mesh, [S0], graph)
    d = place(floats.double(), mesh, [R], graph)
    half, m9 = floats.bfloat16(), torch.arange(9).reshape(3, 3)
    h, hr = place(half, mesh, [S0], graph), place(half, mesh, [R], graph)
    m, square = place(m9, mesh, [R], graph), place(half[:, :2], mesh, [R], graph)
    cases: list[tuple[Any, torch.Tensor]] = [
        (dtorch.addcmul(i, i, i, value=-1.7), torch.addcmul(ints, ints, ints, value=-1.7)),
        (dtorch.addcmul(f, d, i), torch.addcmul(floats, floats.double(), ints)),
        (dtorch.addcdiv(i, f, f), torch.addcdiv(ints, floats, floats)),
        (dtorch.addcdiv(h, h, h, value=0.25), torch.addcdiv(half, half, half, value=0.25)),
        (dtorch.lerp(h, h * 2, 0.7), torch.lerp(half, half * 2, 0.7)),
        (dtorch.addmm(i, i, m, alpha=1.5, beta=2), torch.addmm(ints, ints, m9, alpha=1.5, beta=2)),
        (dtorch.addmm(square, h, hr.T), torch.addmm(half[:, :2], half, half.T)),
    ]  # fmt: skip
    for n, (out, want) in enumerate(cases):
        compare(out.to_torch(), want, False, f"case {n}")
    refusals: list[tuple[Callable[[], Any], str]] = [
        (lambda: dtorch.lerp(i, i, 0.5), "lerp_kernel_scalar"),
        (lambda: dtorch.lerp(f, d, 0.5), "expected dtype float for `end`"),
        (lambda: f.lerp(f, d), "expected dtype float for `weight`"),
        (lambda: dtorch.addcdiv(i, i, i), "Integer division with addcdiv"),
        (lambda: dtorch.addmm(d[:, :2], f, f.T), "same dtype"),
    ]
    for run, reason in refusals:
        with pytest.raises(DtypeError, match=r"^\w+: torch rejects these dtypes: .*" + reason):
            run()
    u = place(torch.tensor([1, 2, 3], dtype=torch.uint8), mesh, [S0], graph)
    for value, what in ((-0.5, "uint8_t"), (300, "uint8_t")):  # checked against the result
        with pytest.raises(
            RuntimeError, match=f"addcmul: value=.*cannot be converted to type {what}"
        ):
            dtorch.addcmul(u, u, u, value=value)
    with pytest.raises(RuntimeError, match="int8_t without overflow"):
        dtorch.addcmul(
            place(ints.to(torch.int8), mesh, [S0], graph),
            i.to(torch.int8),
            i.to(torch.int8),
            value=1e3,
        )
    u3 = torch.tensor([1, 2, 3], dtype=torch.uint8)
    assert torch.equal(dtorch.addcmul(u, u, u, value=-1).to_torch(), u3.addcmul(u3, u3, value=-1))


def test_special_values(graph: dtorch.Graph) -> None:
    """torch's edge cases: ``addmm``'s beta=0 ignores a NaN input and alpha=0 a NaN product;
    xlogy's 0 * log(0) = 0 and NaN for a NaN other; logaddexp of equal infinities."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    nan = torch.full((2, 2), float("nan"))
    eye = torch.eye(2)
    n, e = place(nan, mesh, [S0], graph), place(eye, mesh, [R], graph)
    compare(dtorch.addmm(n, e, e, beta=0).to_torch(), torch.addmm(nan, eye, eye, beta=0), True, "b")
    compare(
        dtorch.addmm(e, n, e, alpha=0).to_torch(), torch.addmm(eye, nan, eye, alpha=0), True, "a"
    )
    compare(dtorch.addmm(e, n, n, alpha=0, beta=0).to_torch(), torch.zeros(2, 2), True, "ab")
    x = torch.tensor([0.0, 0.0, 2.0, float("inf"), -float("inf"), 1.0])
    y = torch.tensor([0.0, float("nan"), float("inf"), float("inf"), -float("inf"), -float("inf")])
    tx, ty = place(x, mesh, [S0], graph), place(y, mesh, [S0], graph)
    compare(tx.xlogy(ty).to_torch(), torch.xlogy(x, y), True, "xlogy")
    compare(tx.logaddexp(ty).to_torch(), torch.logaddexp(x, y), True, "logaddexp")
    compare(tx.atan2(ty).to_torch(), torch.atan2(x, y), True, "atan2")  # fmt: skip


def test_rejections(graph: dtorch.Graph) -> None:
    """Partial where the operator is not linear in it, named after what the user called;
    bad arguments named with what is accepted."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    full = _randn(4, 3)
    p, s, r = (place(full, mesh, pl, graph) for pl in ([S0, P], [S0, S1], [R, R]))
    partial_calls: list[tuple[str, Callable[[], Any]]] = [
        ("hypot", lambda: p.hypot(s)),
        ("xlogy", lambda: dtorch.xlogy(s, p)),
        ("logaddexp", lambda: p.logaddexp(p)),
        ("lerp", lambda: s.lerp(s, p)),
        ("lerp", lambda: p.lerp(s, 0.25)),
        ("addcmul", lambda: s.addcmul(p, p)),
        ("addcdiv", lambda: s.addcdiv(s, p)),
    ]
    for name, run in partial_calls:
        with pytest.raises(PlacementError, match=rf"^{name}: got .*P.*accepted"):
            run()
    assert p.lerp(p, 0.25).placements == [S0, P]  # linear in input and end
    assert p.addcmul(p, r).placements == [S0, P]  # P + P * R
    bad: list[tuple[type[Exception], str, Callable[[], Any]]] = [
        (TypeError, r"^lerp: end must be a dtorch.Tensor, got float", lambda: s.lerp(1.0, 0.5)),
        (TypeError, r"^lerp: weight must be a number .*got str", lambda: s.lerp(s, "0.5")),
        (TypeError, r"^addcmul: tensor2 must be a dtorch.Tensor, got int", lambda: s.addcmul(s, 2)),
        (TypeError, r"^addcdiv: value must be a number .*got list",
         lambda: s.addcdiv(s, s, value=[1])),
        (TypeError, r"^addmm: beta must be a number .*got NoneType",
         lambda: r.addmm(r[:, :1], r[:1], beta=None)),
        (ShapeError, r"^addmm: mat1 must be a matrix, got 1-D tensor", lambda: r.addmm(r[0], r)),
        (ShapeError, r"^addmm: input of shape \[2, 4, 4\] does not broadcast to \[4, 4\]",
         lambda: dtorch.addmm(dtorch.ones(2, 4, 4), r, r.T)),
        (ShapeError, r"^addmm: mat1 and mat2 shapes cannot be multiplied \(4x3 and 4x3\)",
         lambda: dtorch.addmm(r, r, r, alpha=0)),
        (ShapeError, r"^lerp: shapes", lambda: r.lerp(r[:2], 0.5)),
    ]  # fmt: skip
    for error, pattern, run in bad:
        with pytest.raises(error, match=pattern):
            run()


def test_a_number_promotes_as_a_number_beside_a_0d_tensor(graph: dtorch.Graph) -> None:
    """``xlogy(t, 0.5)`` of a 0-d float16 is float16, as torch's (a number does not widen a
    0-d tensor the way a float32 0-d tensor would)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    for x in (
        torch.tensor(0.7, dtype=torch.float16),
        torch.tensor([0.7, 2.0], dtype=torch.bfloat16),
    ):
        t = place(x, mesh, [R], graph)
        for out, want in ((dtorch.xlogy(t, 0.5), torch.xlogy(x, 0.5)),
                          (dtorch.xlogy(0.5, t), torch.xlogy(0.5, x))):  # fmt: skip
            assert out.dtype == want.dtype
            torch.testing.assert_close(out.to_torch(), want)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8])
def test_trunc_division_of_the_least_int_by_minus_one(
    dtype: torch.dtype, graph: dtorch.Graph
) -> None:
    """torch's trunc division traps (SIGFPE: the process dies) on an int32 or int64's least
    value divided by -1: dtorch's quotient wraps to that value, as torch's floor division
    and ``neg`` give it, every other entry torch's; tensor, number and in-place forms."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    least = torch.iinfo(dtype).min
    a = torch.tensor([least, least, 7, -7, 0, least + 1], dtype=dtype)
    b = torch.tensor([-1, 2, -1, 3, -1, -1], dtype=dtype)
    want = torch.div(a, b, rounding_mode="floor")  # exact divisions: trunc == floor here
    want[2:4] = torch.tensor([-7, -2], dtype=dtype)  # the two inexact ones, truncated
    da, db = place(a, mesh, [S0], graph), place(b, mesh, [S0], graph)
    assert torch.equal(dtorch.div(da, db, rounding_mode="trunc").to_torch(), want)
    assert torch.equal(da.div(-1, rounding_mode="trunc").to_torch(), torch.neg(a))
    assert torch.equal(dtorch.div(least, db, rounding_mode="trunc").to_torch(),
                       torch.div(torch.tensor(least, dtype=dtype), b.where(b != -1, 1),
                                 rounding_mode="trunc").where(b != -1, least))  # fmt: skip
    da.div_(db, rounding_mode="trunc")
    assert torch.equal(da.to_torch(), want)

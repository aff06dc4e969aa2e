"""``dtorch.norm(t, p='nuc')`` / ``t.norm(p='nuc')`` (``dtorch.linalg.older.norm``) and the
tensor tolerances of ``linalg.pinv`` / ``linalg.matrix_rank`` (``dtorch.linalg.tolerances``)
against torch on the full tensors: 1-D meshes of 2 and 3 devices (uneven batch shards), a
2-D mesh, batch dims sharded, Replicate, float32 and float64; every refusal, with its class
and what its message says. Thread and process mode (the ``graph`` fixture)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import pytest
import torch

import dtorch
from dtorch.errors import DtypeError, MeshError, ParamError, PlacementError, ShapeError
from tests.api.ops_harness import S0, S1, S2, P, R, place

pytestmark = pytest.mark.timeout(120)

MESHES = ((2,), (3,), (2, 2))
DTYPES = (torch.float32, torch.float64)
_G = torch.Generator().manual_seed(11)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(11)


def _randn(*shape: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return torch.randn(shape, generator=_G, dtype=torch.float64).to(dtype)


def _close(got: dtorch.Tensor, want: torch.Tensor) -> None:
    # the metadata, then the values with the dtype's default tolerances
    assert (tuple(got.shape), got.dtype) == (tuple(want.shape), want.dtype), got
    torch.testing.assert_close(got.to_torch(), want)


# --- p='nuc' ---------------------------------------------------------------------------------

#: mesh shape -> layouts of a (5, 3, 4) input whose matrix dims (1, 2) are whole
_BATCH_LAYOUTS: dict[tuple[int, ...], list[list[Any]]] = {
    (2,): [[R], [S0]],
    (3,): [[R], [S0]],
    (2, 2): [[R, R], [S0, R], [R, S0], [S0, S0]],
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mesh_shape", MESHES)
def test_nuclear_norm_matches_torch(
    graph: dtorch.Graph, mesh_shape: tuple[int, ...], dtype: torch.dtype
) -> None:
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    x = _randn(5, 3, 4, dtype=dtype)
    for layout in _BATCH_LAYOUTS[mesh_shape]:
        t = place(x, mesh, layout, graph)
        out = dtorch.norm(t, p="nuc", dim=(1, 2))
        assert out.placements == layout  # the batch shards stay
        _close(out, torch.norm(x, p="nuc", dim=(1, 2)))
        _close(t.norm("nuc", (2, 1), True), x.norm("nuc", (2, 1), True))
        _close(torch.norm(t, p="nuc", dim=[-1, -2]), torch.norm(x, p="nuc", dim=[-1, -2]))
        _close(t.norm(p="nuc", dim=(-2, 2), dtype=torch.float64),
               x.norm(p="nuc", dim=(-2, 2), dtype=torch.float64))  # fmt: skip
    square = x[0]
    for layout in ([R] * len(mesh_shape), [S1] + [R] * (len(mesh_shape) - 1)):
        cube = place(x.transpose(0, 1).contiguous(), mesh, layout, graph)  # (3, 5, 4)
        want = torch.norm(x.transpose(0, 1), p="nuc", dim=(0, 2), keepdim=True)
        _close(dtorch.norm(cube, p="nuc", dim=(0, 2), keepdim=True), want)  # dim 1 the batch
    m = place(square, mesh, [R] * len(mesh_shape), graph)
    for got, want in (
        (dtorch.norm(m, p="nuc"), torch.norm(square, p="nuc")),
        (m.norm(p="nuc"), square.norm(p="nuc")),
        (m.norm("nuc", keepdim=True), square.norm("nuc", keepdim=True)),
        (torch.norm(m, "nuc"), torch.norm(square, "nuc")),
        (torch.norm(m, p="nuc", out=None), torch.norm(square, p="nuc", out=None)),
    ):
        assert isinstance(got, dtorch.Tensor)
        _close(got, want)


def test_nuclear_norm_of_empty_matrices(graph: dtorch.Graph) -> None:
    """torch's 0 for every empty matrix, as matrix_norm gives."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    x = torch.zeros(4, 0, 3)
    t = place(x, mesh, [S0], graph)
    _close(t.norm("nuc", (1, 2)), x.norm("nuc", (1, 2)))


def test_other_orders_are_unchanged(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (3,))
    x = _randn(5, 4)
    t = place(x, mesh, [S0], graph)
    orders = (("fro", None), (1, 0), (float("inf"), 1), (2, None), ("fro", (0, 1)), (None, 1))
    for p, dim in orders:  # p=None is torch's 'fro'
        if p is None:
            _close(t.norm(p=None), x.norm(p=None))
        _close(t.norm(p, dim), x.norm(p, dim))
        _close(dtorch.norm(t, p, dim), torch.norm(x, p, dim))
    assert dtorch.norm is dtorch.Tensor.norm is dtorch.linalg.older.norm


def _refused(error: type[Exception], match: str, call: Any, torch_call: Any = None) -> None:
    # dtorch refuses with its class and words; torch refuses the same call (if given)
    with pytest.raises(error, match=match):
        call()
    if torch_call is not None:
        with pytest.raises((RuntimeError, ValueError, TypeError, IndexError)):
            torch_call()


def test_nuclear_norm_refusals(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2,))
    x = _randn(4, 3, 5)
    t, v = place(x, mesh, [S0], graph), place(x[0, 0], mesh, [R], graph)
    _refused(ShapeError, r"^norm: p='nuc' is the nuclear norm of a matrix: .*got shape \[5\]",
             lambda: v.norm("nuc"), lambda: x[0, 0].norm("nuc"))  # fmt: skip
    dims = r"^norm: p='nuc' takes two dims \(the matrix's\), got {}; accepted: dim=None for a 2-D"
    _refused(ParamError, dims.format("dim=None for a 3-D input"),
             lambda: t.norm("nuc"), lambda: x.norm("nuc"))  # fmt: skip
    _refused(ParamError, dims.format("dim=1"), lambda: t.norm("nuc", 1), lambda: x.norm("nuc", 1))
    _refused(ParamError, dims.format(r"dim=\(0, 1, 2\)"),
             lambda: t.norm("nuc", (0, 1, 2)), lambda: x.norm("nuc", (0, 1, 2)))  # fmt: skip
    _refused(ParamError, r"^norm: dims must be different, got \(1, 1\)",
             lambda: t.norm("nuc", (1, 1)), lambda: x.norm("nuc", (1, 1)))  # fmt: skip
    _refused(IndexError, r"^norm: dimension 3 is out of range",
             lambda: t.norm("nuc", (1, 3)), lambda: x.norm("nuc", (1, 3)))  # fmt: skip
    _refused(DtypeError, r"^norm: Expected a floating point or complex tensor as input. Got "
             r"torch.int64", lambda: t.long().norm("nuc", (1, 2)),
             lambda: x.long().norm("nuc", (1, 2)))  # fmt: skip
    _refused(DtypeError, r"^norm: the dtype of the input \(torch.float64\) should be "
             r"convertible without narrowing", lambda: t.norm("nuc", (1, 2), dtype=torch.float32),
             lambda: x.norm("nuc", (1, 2), dtype=torch.float32))  # fmt: skip
    _refused(TypeError, r"^norm: keepdim must be a bool", lambda: t.norm("nuc", (1, 2), "yes"))
    _refused(TypeError, r"^norm: input 0 must be a dtorch.Tensor, got torch.Tensor",
             lambda: dtorch.norm(x, "nuc", (1, 2)))  # fmt: skip
    # the matrix dims must be whole: dim 0 of t is sharded
    _refused(PlacementError, r"^norm: linalg.svdvals: got .*Redistribute the matrix dims.*"
             r"the call's tensors: input \(S\(0\),\)", lambda: t.norm("nuc", (0, 2)))  # fmt: skip
    _refused(ParamError, r"^norm: p='nucl' is not supported; accepted: 'fro', 'nuc'",
             lambda: t.norm("nucl"), lambda: x.norm("nucl"))  # fmt: skip


# --- tensor tolerances -----------------------------------------------------------------------

#: singular values of every test matrix (tolerances fall well between them, so that the
#: rank is the same in float32 and float64)
_SINGULAR = (8.0, 1.0, 0.125)
_ATOLS = (0.05, 0.5, 2.0, 20.0, 0.5)  # ranks 3, 2, 1, 0, 2
_RTOLS = (0.001, 0.1, 0.5, 0.1, 0.001)  # ranks 3, 2, 1, 2, 3 (times the largest, 8)


def _matrices(batch: Sequence[int], m: int, n: int, dtype: torch.dtype, *, sym: bool = False
              ) -> torch.Tensor:  # fmt: skip
    """A batch of m x n matrices with the singular values ``_SINGULAR`` (symmetric ones,
    m == n, with them as eigenvalues of alternating signs where ``sym``)."""
    k = len(_SINGULAR)
    u = torch.linalg.qr(_randn(*batch, m, k)).Q
    v = u if sym else torch.linalg.qr(_randn(*batch, n, k)).Q
    s = torch.tensor(_SINGULAR, dtype=torch.float64) * (
        torch.tensor([1.0, -1.0, 1.0]) if sym else 1
    )
    return ((u * s) @ v.mT).to(dtype)


def _tolerances(values: Sequence[float], shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    n = int(torch.Size(shape).numel())
    return torch.tensor([values[i % len(values)] for i in range(n)], dtype=dtype).reshape(shape)


#: mesh shape -> (A's layout, a tolerance's layout) for A (5, 4, 3) and tolerances (5,) or ()
_TOL_LAYOUTS: dict[tuple[int, ...], list[tuple[list[Any], list[Any]]]] = {
    (2,): [([R], [R]), ([S0], [R]), ([S0], [S0])],
    (3,): [([R], [R]), ([S0], [R]), ([S0], [S0])],
    (2, 2): [([S0, R], [S0, R]), ([R, S0], [R, S0]), ([S0, S0], [R, S0]), ([S0, S0], [S0, S0])],
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mesh_shape", MESHES)
def test_tensor_tolerances_match_torch(
    graph: dtorch.Graph, mesh_shape: tuple[int, ...], dtype: torch.dtype
) -> None:
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    a = _matrices((5,), 4, 3, dtype)
    atol, rtol = _tolerances(_ATOLS, (5,), dtype), _tolerances(_RTOLS, (5,), dtype)
    scalar = torch.tensor(0.5, dtype=dtype)
    for a_layout, t_layout in _TOL_LAYOUTS[mesh_shape]:
        A = place(a, mesh, a_layout, graph)
        T, T2 = place(atol, mesh, t_layout, graph), place(rtol, mesh, t_layout, graph)
        zero_d = place(scalar, mesh, [R] * len(mesh_shape), graph)
        rank, pinv = dtorch.linalg.matrix_rank, dtorch.linalg.pinv
        for got, want in (
            (rank(A, atol=T), torch.linalg.matrix_rank(a, atol=atol)),
            (rank(A, rtol=T2), torch.linalg.matrix_rank(a, rtol=rtol)),
            (rank(A, atol=T, rtol=T2), torch.linalg.matrix_rank(a, atol=atol, rtol=rtol)),
            (rank(A, T), torch.linalg.matrix_rank(a, atol)),  # torch's older tol
            (rank(A, atol=zero_d), torch.linalg.matrix_rank(a, atol=scalar)),
            (pinv(A, atol=T), torch.linalg.pinv(a, atol=atol)),
            (pinv(A, rtol=T2), torch.linalg.pinv(a, rtol=rtol)),
            (pinv(A, atol=T, rtol=T2), torch.linalg.pinv(a, atol=atol, rtol=rtol)),
            (pinv(A, T2), torch.linalg.pinv(a, rtol)),  # torch's older rcond
            (pinv(A, rtol=zero_d), torch.linalg.pinv(a, rtol=scalar)),
            (torch.linalg.pinv(A, atol=T), torch.linalg.pinv(a, atol=atol)),
        ):
            assert isinstance(got, dtorch.Tensor) and got.placements == a_layout
            _close(got, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_number_beside_a_tensor(graph: dtorch.Graph, dtype: torch.dtype) -> None:
    """A leniency (torch takes both tolerances as numbers or both as tensors): the number
    counts as torch's number forms do, a float64 0-d tolerance."""
    mesh = dtorch.init_device_mesh("cpu", (3,))
    a = _matrices((5,), 3, 4, dtype)
    atol, rtol = _tolerances(_ATOLS, (5,), dtype), _tolerances(_RTOLS, (5,), dtype)
    A, T, T2 = (
        place(a, mesh, [S0], graph),
        place(atol, mesh, [S0], graph),
        place(rtol, mesh, [R], graph),
    )

    def f64(x: float) -> torch.Tensor:
        return torch.tensor(x, dtype=torch.float64)

    for got, want in (
        (dtorch.linalg.matrix_rank(A, atol=T, rtol=0.1),
         torch.linalg.matrix_rank(a, atol=atol, rtol=f64(0.1))),
        (dtorch.linalg.matrix_rank(A, atol=0.5, rtol=T2),
         torch.linalg.matrix_rank(a, atol=f64(0.5), rtol=rtol)),
        (dtorch.linalg.pinv(A, atol=T, rtol=0.1), torch.linalg.pinv(a, atol=atol, rtol=f64(0.1))),
        (dtorch.linalg.pinv(A, atol=0.0, rtol=T2), torch.linalg.pinv(a, atol=f64(0.0), rtol=rtol)),
        (dtorch.linalg.pinv(A, atol=torch.tensor(0.5), rtol=T2),  # a 0-d torch tensor: a number
         torch.linalg.pinv(a, atol=f64(0.5), rtol=rtol)),
    ):  # fmt: skip
        assert got.placements == [S0]
        _close(got, want)


def test_hermitian_and_two_batch_dims(graph: dtorch.Graph) -> None:
    """A (2, 5, 3, 3) batch sharded on both batch dims of a 2-D mesh; tolerances (2, 5),
    (5,) lining up with A's dim 1, and (2, 1) broadcast along it."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    a = _matrices((2, 5), 3, 3, torch.float64, sym=True)
    A = place(a, mesh, [S0, S1], graph)
    full, row, column = (_tolerances(_ATOLS, s, torch.float64) for s in ((2, 5), (5,), (2, 1)))
    for tol, layouts in (
        (full, ([R, R], [S0, S1], [R, S1], [S0, R])),
        (row, ([R, R], [R, S0])),
        (column, ([R, R], [S0, R])),
    ):
        for layout in layouts:
            T = place(tol, mesh, layout, graph)
            for hermitian in (False, True):
                got = dtorch.linalg.matrix_rank(A, atol=T, hermitian=hermitian)
                assert got.placements == [S0, S1]
                _close(got, torch.linalg.matrix_rank(a, atol=tol, hermitian=hermitian))
                got = dtorch.linalg.pinv(A, rtol=T / 10, hermitian=hermitian)
                _close(got, torch.linalg.pinv(a, rtol=tol / 10, hermitian=hermitian))


def test_tolerances_widen_the_batch_as_torchs(graph: dtorch.Graph) -> None:
    """A tolerance of more batch dims than A broadcasts A too (torch's result shape; torch
    warns that it resizes its output there)."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    a, tol = _matrices((), 3, 4, torch.float64), _tolerances(_ATOLS, (4,), torch.float64)
    b = _matrices((3,), 4, 4, torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        rank_want = torch.linalg.matrix_rank(a, atol=tol)
        pinv_want = torch.linalg.pinv(b, atol=tol[:2, None])
    A, B = place(a, mesh, [R], graph), place(b, mesh, [S0], graph)
    _close(dtorch.linalg.matrix_rank(A, atol=place(tol, mesh, [R], graph)), rank_want)
    got = dtorch.linalg.pinv(B, atol=place(tol[:2, None], mesh, [R], graph))
    assert got.placements == [S1]  # A's shard, moved by the new leading dim
    _close(got, pinv_want)


def test_tolerance_refusals(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2,))
    a = _matrices((4,), 3, 3, torch.float64)
    tol = _tolerances(_ATOLS, (4,), torch.float64)
    A, T = place(a, mesh, [S0], graph), place(tol, mesh, [S0], graph)
    rank, pinv = dtorch.linalg.matrix_rank, dtorch.linalg.pinv
    accepted = r"accepted on each mesh dim: R, or S\(d\) of the dim that lines up"
    for call, error, match in (
        (lambda: rank(A, atol=tol), TypeError,
         r"^linalg.matrix_rank: atol must be None, a float or a dtorch tensor on A's mesh, got "
         r"a torch.Tensor of shape \[4\] \(dtorch.from_torch makes it one\)"),
        (lambda: pinv(A, rtol=tol[None]), TypeError, r"^linalg.pinv: rtol must be None, a "
         r"float or a dtorch tensor on A's mesh, got a torch.Tensor of shape \[1, 4\]"),
        (lambda: pinv(A, atol="0.1"), TypeError, r"^linalg.pinv: atol must be .* got str"),
        (lambda: rank(A, atol=place(tol, dtorch.init_device_mesh("cpu", (3,)), [R], graph)),
         MeshError, r"^linalg.matrix_rank: inputs lie on different meshes"),
        (lambda: rank(A, atol=place(tol * 1j, mesh, [R], graph)), DtypeError,
         r"^linalg.matrix_rank: atol tensor of complex type is not supported, got "
         r"torch.complex128; accepted: a real"),
        (lambda: rank(A, atol=place(tol[:3], mesh, [R], graph)), ShapeError,
         r"^linalg.matrix_rank: the tolerances \(atol \[3\]\) do not broadcast against A's "
         r"batch shape \[4\]"),
        (lambda: pinv(A, atol=place(tol, mesh, [P], graph)), PlacementError,
         r"^linalg.pinv: atol \(P,\) of shape \[4\] does not fit A \(S\(0\),\) of shape "
         rf"\[4, 3, 3\] on mesh dim 0; {accepted}.* Redistribute atol to Replicate first"),
        (lambda: pinv(place(a, mesh, [R], graph), rtol=T), PlacementError,
         rf"^linalg.pinv: rtol \(S\(0\),\) of shape \[4\] does not fit A \(R,\) .*{accepted}"),
        (lambda: rank(A, atol=place(tol[:1], mesh, [S0], graph)), PlacementError,
         rf"^linalg.matrix_rank: atol \(S\(0\),\) of shape \[1\] does not fit .*{accepted}"),
        (lambda: rank(place(a, mesh, [S2], graph), atol=T), PlacementError,
         r"^linalg.matrix_rank: atol \(S\(0\),\) of shape \[4\] does not fit A \(S\(2\),\)"),
        (lambda: rank(place(a, mesh, [S2], graph), atol=place(tol, mesh, [R], graph)),
         PlacementError, r"^linalg.matrix_rank: got \(S\(2\),\) x \(R,\) on mesh \(2,\); .*"
         r"Redistribute the matrix dims"),
        (lambda: rank(place(a[0, 0], mesh, [R], graph), atol=T), ShapeError,
         r"^linalg.matrix_rank: the input must have at least 2 dimensions"),
        (lambda: rank(A, T, atol=T), TypeError,
         r"^linalg.matrix_rank: tol is torch's older form of the tolerances"),
        (lambda: dtorch.pinverse(A, T), TypeError,
         r"^pinverse: rcond must be None or a float, got a dtorch.Tensor"),
    ):  # fmt: skip
        with pytest.raises(error, match=match):
            call()

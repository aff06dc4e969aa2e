"""``dtorch.fft`` (and ``torch.fft.*`` on dtorch tensors) against torch.fft on the full tensor,
on 1-D, 2-D and 3-D meshes, even and uneven shards: a transformed dim must be whole (a shard
there is refused), the other dims keep their shards, and a Partial stays Partial (every
transform is linear). Values are compared within float tolerance: torch's own transform of a
batch of rows differs from itself in the last bit with the number of threads it splits the
rows over, so a device's block may differ from the full tensor's by an ulp."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import dtorch
from dtorch.errors import (
    DimError,
    DtypeError,
    ParamError,
    PlacementError,
    ShapeError,
    UnsupportedDtypeError,
)
from tests.api.ops_harness import ALL_MESHES, S0, S1, S2, P, R, limit_for, place, run_api

pytestmark = pytest.mark.timeout(120)

_G = torch.Generator().manual_seed(7)

_REAL = torch.randn(5, 6, 4, generator=_G)
_COMPLEX = torch.randn(5, 6, 4, generator=_G, dtype=torch.complex64)

#: The transforms of a real input; the others are given a complex one.
_REAL_INPUT = {"rfft", "ihfft", "rfft2", "ihfft2", "rfftn", "ihfftn"}
_ONE_DIM = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")
_TWO_DIM = ("fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2")
_N_DIM = ("fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn")

#: (keywords, the dims they transform in a 3-D tensor) of each family.
_CASES: list[tuple[tuple[str, ...], dict[str, Any], tuple[int, ...]]] = [
    (_ONE_DIM, {}, (2,)),
    (_ONE_DIM, {"n": 3, "dim": 0, "norm": "ortho"}, (0,)),
    (_ONE_DIM, {"n": 7, "dim": -2, "norm": "forward"}, (1,)),
    (_TWO_DIM, {}, (1, 2)),
    (_TWO_DIM, {"s": (3, 5), "dim": (0, 2), "norm": "ortho"}, (0, 2)),
    (_N_DIM, {}, (0, 1, 2)),
    (_N_DIM, {"s": (3,)}, (2,)),
    (_N_DIM, {"dim": (1,), "norm": "forward"}, (1,)),
]
_PARAMS = [
    pytest.param(name, kw, dims, id=f"{name}-{'-'.join(f'{k}{v}' for k, v in kw.items())}")
    for names, kw, dims in _CASES
    for name in names
]


def _table(dims: tuple[int, ...]) -> dict[tuple[Any, ...], Any]:
    # one mesh dim: R and P pass, a shard of a dim that is not transformed is kept
    table: dict[tuple[Any, ...], Any] = {(R,): R, (P,): P}
    table.update({(s,): s for d, s in enumerate((S0, S1, S2)) if d not in dims})
    return table


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("name", "kw", "dims"), _PARAMS)
def test_transforms_equal_torch(name, kw, dims, mesh_shape, graph) -> None:  # type: ignore[no-untyped-def]
    full = _REAL if name in _REAL_INPUT else _COMPLEX
    want = getattr(torch.fft, name)(full, **kw)
    run_api(
        graph,
        f"fft.{name}",
        lambda t: getattr(dtorch.fft, name)(t, **kw),
        [full],
        mesh_shape,
        [want],
        table=_table(dims),
        limit=limit_for(mesh_shape, n_d=8),
        exact=False,
    )


@pytest.mark.parametrize("name", [*_ONE_DIM, *_TWO_DIM, *_N_DIM])
def test_torch_fft_dispatches_to_dtorch(name: str, graph: dtorch.Graph) -> None:
    full = _REAL.double() if name in _REAL_INPUT else _COMPLEX.to(torch.complex128)
    t = place(full, dtorch.init_device_mesh("cpu", 2), [S0], graph)
    kw: dict[str, Any] = {"dim": -1} if name in _ONE_DIM else {"dim": (1, 2)}
    got, want = getattr(torch.fft, name)(t, **kw), getattr(torch.fft, name)(full, **kw)
    assert isinstance(got, dtorch.Tensor) and got.placements == [S0]
    torch.testing.assert_close(got.to_torch(), want)


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32, torch.bool, torch.complex128])
def test_dtypes_as_torch(dtype: torch.dtype, graph: dtorch.Graph) -> None:
    full = (torch.randn(4, 6, generator=_G) * 3).to(dtype)
    t = place(full, dtorch.init_device_mesh("cpu", 2), [S0], graph)
    for name in ("fft", "ifft", "hfft", "irfft") + (() if dtype.is_complex else ("rfft",)):
        got, want = getattr(dtorch.fft, name)(t), getattr(torch.fft, name)(full)
        assert got.dtype == want.dtype, name
        torch.testing.assert_close(got.to_torch(), want)


@pytest.mark.parametrize(("name", "dim"), [("fftshift", None), ("ifftshift", None),
                                           ("fftshift", 1), ("ifftshift", (1, 2))])  # fmt: skip
def test_shifts(name: str, dim: Any, graph: dtorch.Graph) -> None:
    full = torch.arange(5 * 6 * 7.0).reshape(5, 6, 7)
    mesh = dtorch.init_device_mesh("cpu", 2)
    placements = [R] if dim is None else [S0]
    got = getattr(dtorch.fft, name)(place(full, mesh, placements, graph), dim=dim)
    assert got.placements == placements
    assert torch.equal(got.to_torch(), getattr(torch.fft, name)(full, dim=dim))


def test_a_shift_of_a_sharded_dim_is_refused_naming_the_call(graph: dtorch.Graph) -> None:
    t = place(torch.arange(10.0).reshape(5, 2), dtorch.init_device_mesh("cpu", 2), [S0], graph)
    with pytest.raises(PlacementError, match=r"^fft\.fftshift: .*Redistribute dim 0"):
        dtorch.fft.fftshift(t)


@pytest.mark.parametrize("name", ["fftfreq", "rfftfreq"])
@pytest.mark.parametrize("dtype", [None, torch.float64])
def test_frequencies(name: str, dtype: torch.dtype | None, graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 3)
    got = getattr(dtorch.fft, name)(7, 0.25, dtype=dtype, device_mesh=mesh, placements=[S0])
    want = getattr(torch.fft, name)(7, 0.25, dtype=dtype)
    assert got.placements == [S0] and got.graph == graph
    assert torch.equal(got.to_torch(), want)


_REFUSALS: list[tuple[str, Callable[[Any, Any], Any], type[Exception], str]] = [
    ("a half input", lambda fft, t: fft.fft(t.half()), UnsupportedDtypeError, "Half"),
    ("a bfloat16 input", lambda fft, t: fft.rfft2(t.bfloat16()), UnsupportedDtypeError, "BF"),
    ("a complex rfft", lambda fft, t: fft.rfft(t.cfloat()), DtypeError, "real input"),
    ("a complex ihfftn", lambda fft, t: fft.ihfftn(t.cfloat()), DtypeError, "accepted"),
    ("a bad norm", lambda fft, t: fft.fft(t, norm="both"), ParamError, "normalization"),
    ("a dim out of range", lambda fft, t: fft.fft(t, dim=2), DimError, "out of range"),
    ("n of 0", lambda fft, t: fft.ifft(t, n=0), ShapeError, "Invalid number"),
    ("a float n", lambda fft, t: fft.fft(t, n=2.0), TypeError, "n must be an int"),
    ("a tuple dim for fft", lambda fft, t: fft.fft(t, dim=(0,)), TypeError, "dim must"),
    ("repeated dims", lambda fft, t: fft.fftn(t, dim=(0, 0)), ShapeError, "unique"),
    ("s and dim of other lengths", lambda fft, t: fft.fftn(t, s=(2,), dim=(0, 1)),
     ShapeError, "same length"),
    ("a sharded transformed dim", lambda fft, t: fft.fft(t, dim=0), PlacementError,
     "transformed dims"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "call", "error", "text"), _REFUSALS, ids=[r[0] for r in _REFUSALS]
)
def test_refusals(case, call, error, text, graph) -> None:  # type: ignore[no-untyped-def]
    t = place(torch.randn(4, 6, generator=_G), dtorch.init_device_mesh("cpu", 2), [S0], graph)
    with pytest.raises(error, match=text):
        call(dtorch.fft, t)
    torch_error = None
    try:
        call(torch.fft, torch.randn(4, 6))  # torch refuses the same calls (but for placements)
    except (RuntimeError, TypeError, IndexError, ValueError) as raised:
        torch_error = raised
    assert (torch_error is None) == (error is PlacementError), torch_error


def test_a_traced_program_of_transforms_replays_and_reloads(graph: dtorch.Graph, tmp_path) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", 2)

    def spectrum(x: dtorch.Tensor) -> dtorch.Tensor:
        return dtorch.fft.irfft(dtorch.fft.rfft(x, norm="ortho") * 2, n=6, norm="ortho")

    full = torch.randn(4, 6, generator=_G)
    program = dtorch.trace(spectrum, place(full, mesh, [S0], graph))
    program.save(tmp_path / "fft.dtp")
    loaded = dtorch.load_program(tmp_path / "fft.dtp", graph=graph)
    want = torch.fft.irfft(torch.fft.rfft(full, norm="ortho") * 2, n=6, norm="ortho")
    for run in (program, loaded):
        out = run(place(full, mesh, [S0], graph))
        torch.testing.assert_close(out.to_torch(), want)


@pytest.mark.parametrize(
    ("shape", "call"),
    [
        ((8, 0, 5, 6), lambda fft, t: fft.ihfftn(t, s=(8, 10, 3))),
        ((0,), lambda fft, t: fft.fftn(t, s=(3,))),
        ((4, 0), lambda fft, t: fft.irfft(t, n=6)),
        ((0, 4), lambda fft, t: fft.fft(t, n=5, dim=0)),
    ],
)
def test_an_empty_dim_padded_by_n_transforms_to_zeros(shape, call, graph) -> None:  # type: ignore[no-untyped-def]
    full = torch.zeros(shape)
    for placements in ([R], [P]):
        got = call(dtorch.fft, place(full, dtorch.init_device_mesh("cpu", 2), placements, graph))
        want = call(torch.fft, full)
        assert got.dtype == want.dtype and torch.equal(got.to_torch(), want)


def test_refusals_in_torchs_order(graph: dtorch.Graph) -> None:
    """torch reports a dim out of range before a dtype its kernels refuse, or a bad norm."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    half = place(torch.zeros(3, dtype=torch.float16), mesh, [R], graph)
    with pytest.raises(DimError, match="Dimension out of range"):
        dtorch.fft.fft2(half)
    with pytest.raises(DimError, match="no dimensions"):
        dtorch.fft.fft(place(torch.tensor(1.0), mesh, [R], graph), norm="bogus")


def test_nothing_transformed_copies_any_dtype_torch_takes(graph: dtorch.Graph) -> None:
    full = torch.ones(2, 3, dtype=torch.complex32)
    t = place(full, dtorch.init_device_mesh("cpu", 2), [S0], graph)
    for call in (lambda fft, x: fft.fftn(x, dim=()), lambda fft, x: fft.fft2(x, s=(), dim=())):
        got, want = call(dtorch.fft, t), call(torch.fft, full)
        assert got.dtype == want.dtype == torch.complex32 and got.placements == [S0]
        assert torch.equal(got.to_torch().cfloat(), want.cfloat())


def test_the_two_dim_forms_take_no_none_dim_and_half_is_judged_alone(graph) -> None:  # type: ignore[no-untyped-def]
    t = place(torch.ones(2, 3), dtorch.init_device_mesh("cpu", 2), [S0], graph)
    for name in _TWO_DIM:
        with pytest.raises(TypeError, match="must be tuple of ints, not NoneType"):
            getattr(torch.fft, name)(torch.ones(2, 3), dim=None)
        with pytest.raises(TypeError, match="must be tuple of ints, not NoneType"):
            getattr(dtorch.fft, name)(t, dim=None)
    with pytest.raises(RuntimeError, match="Unsupported dtype Half"):
        torch.fft.fft2(torch.ones(2, 3, dtype=torch.float16), dim=())
    with pytest.raises(UnsupportedDtypeError, match="Unsupported dtype Half"):
        dtorch.fft.fft2(t.half(), dim=())


def test_a_shift_of_a_dim_out_of_range(graph: dtorch.Graph) -> None:
    with pytest.raises(IndexError):
        torch.fft.fftshift(torch.ones(3), dim=3)
    with pytest.raises(DimError, match=r"fft\.fftshift"):
        dtorch.fft.fftshift(dtorch.ones(3), dim=3)

"""The complex conjugate and parts against torch: ``conj``/``conj_physical`` (function, method,
torch's own function), ``conj_physical_``, ``mH``/``adjoint``, ``vdot`` of complex tensors,
``real``/``imag``/``angle``/``isreal``/``complex`` and the complex casts, on
every placement (a Partial stays Partial: the conjugate is linear), 1-D and 2-D meshes, in
thread and process mode. dtorch computes the conjugate (no lazy bit): the result is a copy,
``is_conj()`` is False, and a real tensor's ``conj()`` is the tensor itself, as torch's."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import dtorch
from tests.api.ops_harness import S0, S1, P, R, compare, place

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(11)
_Z = torch.randn((4, 5), dtype=torch.complex64, generator=_G)
_LAYOUTS = [((2,), [S0]), ((2,), [S1]), ((2,), [P]), ((2,), [R]), ((2, 2), [S0, P]), ((3,), [S1])]


def _plain(t: torch.Tensor) -> torch.Tensor:
    return t.resolve_conj()  # torch's conj is a lazy view: compare values


@pytest.mark.parametrize(("mesh_shape", "placements"), _LAYOUTS)
def test_conjugates_like_torch(
    mesh_shape: tuple[int, ...], placements: list, graph: dtorch.Graph
) -> None:
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    t = place(_Z, mesh, placements, graph)
    for got, want in (
        (t.conj(), _Z.conj()),
        (dtorch.conj(t), torch.conj(_Z)),
        (torch.conj(t), torch.conj(_Z)),
        (t.conj_physical(), _Z.conj_physical()),
        (dtorch.conj_physical(t), torch.conj_physical(_Z)),
        (t.mH, _Z.mH),
        (t.adjoint(), _Z.adjoint()),
        (dtorch.adjoint(t), torch.adjoint(_Z)),
    ):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.equal(got.to_torch(), _plain(want))
        assert not got.is_conj() and not got.is_neg()
    assert t.conj().placements == placements  # Partial too: the conjugate is linear
    assert t.mH.placements == t.mT.placements


def test_conj_is_a_copy_and_real_tensors_are_themselves(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    t = place(_Z, mesh, [S0], graph)
    c = t.conj()
    c.mul_(2)  # torch's lazy view would write through; dtorch's conjugate is a copy
    assert torch.equal(t.to_torch(), _Z)
    t.conj_physical_()
    assert torch.equal(t.to_torch(), _Z.conj_physical())
    real = place(torch.randn(3, generator=_G), mesh, [S0], graph)
    assert real.conj() is real and real.resolve_conj() is real and real.resolve_neg() is real
    assert dtorch.conj_physical(real) is not real
    assert torch.equal(dtorch.conj_physical(real).to_torch(), real.to_torch())


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_vdot_of_complex_vectors(dtype: torch.dtype, graph: dtorch.Graph) -> None:
    """``vdot`` conjugates its first vector (complex tensors were refused); ``dot`` does not."""
    mesh = dtorch.init_device_mesh("cpu", 3)
    a = torch.randn(7, dtype=dtype, generator=_G)
    b = torch.randn(7, dtype=dtype, generator=_G)
    x, y = place(a, mesh, [S0], graph), place(b, mesh, [S0], graph)
    torch.testing.assert_close(dtorch.vdot(x, y).to_torch(), torch.vdot(a, b))
    torch.testing.assert_close(x.vdot(y).to_torch(), a.vdot(b))
    torch.testing.assert_close(dtorch.dot(x, y).to_torch(), torch.dot(a, b))


_W = torch.tensor(
    [[1 + 2j, -3 + 0j, complex(float("nan"), 1)], [0.5 - 0.5j, 2j, -1 - 1j]], dtype=torch.complex64
)
_REAL = torch.tensor([[-2.0, 3.0, float("nan")], [0.0, -0.0, 1.0]])


@pytest.mark.parametrize(("mesh_shape", "placements"), _LAYOUTS)
def test_complex_parts_like_torch(
    mesh_shape: tuple[int, ...], placements: list, graph: dtorch.Graph
) -> None:
    """``real``/``imag`` keep a Partial (they are linear); ``angle``/``isreal`` refuse one."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    t = place(_W, mesh, placements, graph)
    for got, want in ((t.real, _W.real), (t.imag, _W.imag), (dtorch.real(t), torch.real(_W))):
        compare(got.to_torch(), want, True, "part")
        assert got.placements == placements
    if P not in placements:
        compare(t.angle().to_torch(), _W.angle(), False, "angle")
        compare(torch.isreal(t).to_torch(), torch.isreal(_W), True, "isreal")


def test_parts_of_real_tensors_and_complex_of_two(graph: dtorch.Graph) -> None:
    """A real tensor's ``real`` is itself, its ``imag`` refused as torch refuses it, its
    ``angle`` 0 or pi (NaN kept) and ``isreal`` all True; ``complex(re, im)`` keeps two
    Partials Partial and refuses the dtypes torch refuses; the complex casts."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    t = place(_REAL, mesh, [S0], graph)
    assert t.real is t
    with pytest.raises(RuntimeError, match="imag is not implemented for tensors with non-complex"):
        _ = t.imag
    compare(t.angle().to_torch(), _REAL.angle(), True, "angle of a real tensor")
    compare(dtorch.isreal(t).to_torch(), torch.isreal(_REAL), True, "isreal")
    a, b = torch.randn(2, 3, generator=_G), torch.randn(2, 3, generator=_G)
    z = dtorch.complex(place(a, mesh, [P], graph), place(b, mesh, [P], graph))
    assert z.placements == [P] and z.dtype == torch.complex64
    torch.testing.assert_close(z.to_torch(), torch.complex(a, b))
    assert torch.equal(
        torch.complex(place(a, mesh, [S1], graph), place(b, mesh, [S1], graph)).to_torch(),
        torch.complex(a, b),
    )
    with pytest.raises(RuntimeError, match="Expected both inputs to be Half, Float or Double"):
        dtorch.complex(place(a.long(), mesh, [R], graph), place(b.long(), mesh, [R], graph))
    x = place(a, mesh, [S0], graph)
    for got, dtype in ((x.cfloat(), torch.complex64), (x.cdouble(), torch.complex128)):
        assert got.dtype == dtype and torch.equal(got.to_torch(), a.to(dtype))


@pytest.mark.parametrize(("mesh_shape", "placements"), _LAYOUTS)
def test_views_as_real_and_complex_like_torch(
    mesh_shape: tuple[int, ...], placements: list, graph: dtorch.Graph
) -> None:
    """Copies where torch's are views (the module docstring), torch's values and dtypes."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    z, pairs = place(_Z, mesh, placements, graph), torch.view_as_real(_Z).contiguous()
    as_pairs = torch.view_as_real(z)
    assert torch.equal(as_pairs.to_torch(), pairs) and as_pairs.placements == placements
    parts = place(pairs, mesh, placements, graph)
    back = torch.view_as_complex(parts)
    assert torch.equal(back.to_torch(), _Z) and back.placements == placements
    assert torch.equal(dtorch.view_as_real(back).to_torch(), pairs)


def test_llama_reference_rotary_embedding_runs_unchanged(graph: dtorch.Graph) -> None:
    """LLaMA's reference ``apply_rotary_emb`` (view_as_complex, a complex product,
    view_as_real), on a batch-sharded query: torch's values bit for bit."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    freqs = torch.outer(torch.arange(6.0), 1.0 / (10000 ** (torch.arange(0, 8, 2).float() / 8)))
    cis = torch.polar(torch.ones_like(freqs), freqs)
    xq = torch.randn(2, 6, 3, 8, generator=_G)

    def rotary(x: Any, f: Any) -> Any:
        pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        f = f.view(1, pairs.shape[1], 1, pairs.shape[-1])
        return torch.view_as_real(pairs * f).flatten(3).type_as(x)

    got = rotary(place(xq, mesh, [S0], graph), place(cis, mesh, [R], graph))
    assert torch.equal(got.to_torch(), rotary(xq, cis)) and got.placements == [S0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_polar_like_torch(dtype: torch.dtype, graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    magnitude = torch.rand(6, 3, generator=_G, dtype=dtype)
    angle = torch.randn(6, 3, generator=_G, dtype=dtype) * 4
    got = torch.polar(place(magnitude, mesh, [S0], graph), place(angle, mesh, [S0], graph))
    want = torch.polar(magnitude, angle)
    assert got.dtype == want.dtype and got.placements == [S0]
    torch.testing.assert_close(got.to_torch(), want)  # float32: torch's cos/sin, last bit


def test_complex_views_refuse_what_torch_refuses(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    real, odd = (
        place(torch.randn(4, 2), mesh, [S0], graph),
        place(torch.randn(4, 3), mesh, [S0], graph),
    )
    with pytest.raises(RuntimeError, match="view_as_real is only supported for complex"):
        torch.view_as_real(real)
    with pytest.raises(RuntimeError, match="last dimension of size 2"):
        torch.view_as_complex(odd)
    with pytest.raises(RuntimeError, match="float, double and half"):
        torch.view_as_complex(real.long())
    with pytest.raises(RuntimeError, match="one dtype, float or double"):
        torch.polar(real, real.double())

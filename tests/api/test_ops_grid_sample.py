"""``grid_sample`` and ``affine_grid`` (``dtorch.nn.functional`` and torch's on dtorch tensors)
against torch on the full tensors, on 1-D, 2-D and 3-D meshes, even and uneven: the batch, the
channels or the grid's output points sharded, a Partial input kept, the spatial dims whole;
torch's values (bicubic rows of points cut between devices within float tolerance: torch's
kernel computes a row of points in vectors), torch's warnings and refusals."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import dtorch
import dtorch.nn.functional as DF
from dtorch.errors import DtypeError, ParamError, ShapeError, UnsupportedDtypeError
from tests.api.ops_harness import ALL_MESHES, S0, S1, S2, P, R, limit_for, place, run_api

pytestmark = pytest.mark.timeout(120)

S3 = dtorch.Shard(3)

_G = torch.Generator().manual_seed(23)
_X = torch.randn(3, 4, 5, 6, generator=_G)
_GRID = torch.rand(3, 5, 7, 2, generator=_G) * 2.4 - 1.2  # some points outside [-1, 1]

#: One mesh dim: input x grid -> output (the batch in either or both, the channels, the
#: grid's output points, a Partial input).
_TABLE: dict[tuple[Any, ...], Any] = {
    (R, R): R, (S0, S0): S0, (S0, R): S0, (R, S0): S0, (S1, R): S1, (R, S1): S2, (R, S2): S3,
    (P, R): P,
}  # fmt: skip


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample(mode: str, padding_mode: str, mesh_shape, graph) -> None:  # type: ignore[no-untyped-def]
    kw = {"mode": mode, "padding_mode": padding_mode, "align_corners": mode == "nearest"}
    run_api(
        graph,
        "grid_sample",
        lambda x, grid: F.grid_sample(x, grid, **kw),
        [_X, _GRID],
        mesh_shape,
        [F.grid_sample(_X, _GRID, **kw)],
        table=_TABLE,
        limit=limit_for(mesh_shape, n_d=8),
        exact=mode != "bicubic",
    )


def test_volumes(graph: dtorch.Graph) -> None:
    x, grid = torch.randn(2, 3, 4, 5, 6, generator=_G), torch.rand(2, 3, 2, 4, 3, generator=_G)
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    got = DF.grid_sample(place(x, mesh, [S0, S1], graph), place(grid, mesh, [S0, R], graph),
                         align_corners=True)  # fmt: skip
    assert got.placements == [S0, S1]
    assert torch.equal(got.to_torch(), F.grid_sample(x, grid, align_corners=True))


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size", [(4, 3, 5, 7), (4, 3, 1, 6), (4, 2, 3, 4, 5)])
@pytest.mark.parametrize("placements", [[R], [S0]])
def test_affine_grid_is_torchs(size, align_corners, placements, graph) -> None:  # type: ignore[no-untyped-def]
    k = len(size) - 2
    theta = torch.randn(size[0], k, k + 1, generator=_G, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's unit-size warning: checked below
        want = F.affine_grid(theta, size, align_corners=align_corners)
        got = F.affine_grid(place(theta, dtorch.init_device_mesh("cpu", 2), placements, graph),
                            size, align_corners=align_corners)  # fmt: skip
    assert got.placements == placements and got.dtype == want.dtype
    assert torch.equal(got.to_torch(), want)


def test_a_spatial_transformer(graph: dtorch.Graph) -> None:
    theta = torch.tensor([[[0.8, -0.2, 0.1], [0.3, 0.9, -0.2]]]).repeat(3, 1, 1)
    mesh = dtorch.init_device_mesh("cpu", 3)
    grid = F.affine_grid(place(theta, mesh, [S0], graph), _X.shape, align_corners=False)
    got = F.grid_sample(place(_X, mesh, [S0], graph), grid, align_corners=False)
    want = F.grid_sample(_X, F.affine_grid(theta, _X.shape, align_corners=False),
                         align_corners=False)  # fmt: skip
    assert got.placements == [S0] and torch.equal(got.to_torch(), want)


def test_warnings_as_torch(graph: dtorch.Graph) -> None:
    x, theta = dtorch.tensor(_X), dtorch.tensor(torch.eye(2, 3).expand(3, 2, 3))
    with pytest.warns(UserWarning, match="align_corners=False since 1.3.0") as caught:
        DF.grid_sample(x, dtorch.tensor(_GRID))
    assert caught[0].filename == __file__  # the user's line, as torch's stacklevel
    with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
        DF.affine_grid(theta, (3, 1, 2, 2))
    with pytest.warns(UserWarning, match="unit-size grids"):
        DF.affine_grid(theta, (3, 1, 1, 4), align_corners=True)


_REFUSALS: list[tuple[str, Callable[[Any, Any, Any], Any], type[Exception], str]] = [
    ("mode", lambda x, g, t: F.grid_sample(x, g, mode="area", align_corners=False), ParamError,
     "expected mode"),
    ("padding", lambda x, g, t: F.grid_sample(x, g, padding_mode="wrap", align_corners=False),
     ParamError, "expected padding_mode"),
    ("bicubic volume", lambda x, g, t: F.grid_sample(x[..., None], g[..., None, :].expand(
     -1, -1, -1, 1, 2).repeat(1, 1, 1, 1, 2)[..., :3], mode="bicubic", align_corners=False),
     ShapeError, "bicubic"),
    ("batch", lambda x, g, t: F.grid_sample(x[:2], g, align_corners=False), ShapeError,
     "same batch size"),
    ("coordinates", lambda x, g, t: F.grid_sample(x, torch.cat([g, g[..., :1]], -1) if isinstance(
     g, torch.Tensor) else dtorch.cat([g, g[..., :1]], -1), align_corners=False), ShapeError,
     "size 2 in last dimension"),
    ("dtypes", lambda x, g, t: F.grid_sample(x, g.double(), align_corners=False), DtypeError,
     "float32 and torch.float64"),
    ("integers", lambda x, g, t: F.grid_sample(x.long(), g.long(), align_corners=False),
     UnsupportedDtypeError, "not implemented for 'Long'"),
    ("theta dtype", lambda x, g, t: F.affine_grid(t.long(), (3, 1, 2, 2), align_corners=False),
     ParamError, "floating point"),
    ("theta shape", lambda x, g, t: F.affine_grid(t, (3, 1, 2, 2, 2), align_corners=False),
     ShapeError, "Nx3x4"),
    ("size", lambda x, g, t: F.affine_grid(t, (3, 2, 2), align_corners=False),
     NotImplementedError, "4D and 5D sizes"),
    ("empty size", lambda x, g, t: F.affine_grid(t, (3, 1, 0, 2), align_corners=False),
     ParamError, "positive output size"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "call", "error", "text"), _REFUSALS, ids=[r[0] for r in _REFUSALS]
)
def test_refusals(case, call, error, text, graph) -> None:  # type: ignore[no-untyped-def]
    theta = torch.eye(2, 3).expand(3, 2, 3).contiguous()
    with pytest.raises((RuntimeError, ValueError, NotImplementedError)):
        call(_X, _GRID, theta)  # torch refuses it too
    mesh = dtorch.init_device_mesh("cpu", 2)
    with pytest.raises(error, match=text):
        call(*(place(t, mesh, [R], graph) for t in (_X, _GRID, theta)))


def test_a_spatial_shard_is_refused(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    with pytest.raises(dtorch.PlacementError, match=r"grid_sample: got .*spatial dims"):
        DF.grid_sample(place(_X, mesh, [S2], graph), place(_GRID, mesh, [R], graph),
                       align_corners=False)  # fmt: skip


def test_affine_grid_takes_theta_whole_and_half_as_torch(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    theta = torch.randn(2, 2, 3, generator=_G)
    for placements in ([S1], [P]):
        with pytest.raises(dtorch.PlacementError, match="affine_grid: got theta"):
            DF.affine_grid(place(theta, mesh, placements, graph), (2, 1, 3, 4),
                           align_corners=False)  # fmt: skip
    with pytest.raises(NotImplementedError):
        F.affine_grid(theta.half(), (2, 1, 1, 4), align_corners=False)
    with pytest.raises(UnsupportedDtypeError, match="tensor_cpu"):
        DF.affine_grid(place(theta.half(), mesh, [R], graph), (2, 1, 1, 4), align_corners=False)

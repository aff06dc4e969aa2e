"""``interpolate`` (nearest, bilinear with and without align_corners, linear, bicubic; size or
scale_factor) and ``pad`` (constant with any fill, reflect, replicate, circular) of
``dtorch.nn.functional`` against torch.nn.functional on the full tensors: every layout on 1-D
meshes (table-drawn samples on 2-D and 3-D ones), even and uneven sizes, placements from the
table of ``dtorch.ir.rules.spatial`` (a shard of a dim that is not resampled or padded stays);
linearity (Partial kept) checked on Partial tensors whose devices hold different summands, and
refused for a nonzero constant fill; thread and process mode."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import dtorch
import dtorch.nn.functional as DF
from dtorch.errors import DtypeError, ParamError, PlacementError, ShapeError
from tests.api.image_harness import split_partial, table_combos
from tests.api.ops_harness import (
    ALL_MESHES,
    S0,
    S1,
    S2,
    P,
    R,
    Table,
    check_rejection,
    place,
    run_api,
)

pytestmark = pytest.mark.timeout(120)

_G = torch.Generator().manual_seed(13)
S3 = dtorch.Shard(3)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    _G.manual_seed(13)


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=_G)


#: A dtorch form of an operator and its torch form.
Forms = tuple[Callable[..., Any], Callable[..., Any]]


def _both(**kwargs: Any) -> Forms:
    return (lambda t: DF.interpolate(t, **kwargs)), (lambda t: F.interpolate(t, **kwargs))


def _pads(*args: Any, **kwargs: Any) -> Forms:
    return (lambda t: DF.pad(t, *args, **kwargs)), (lambda t: F.pad(t, *args, **kwargs))


_BATCH_CHANNEL: Table = {(R,): R, (S0,): S0, (S1,): S1, (P,): P}

#: (name, (dtorch form, torch form), input shape, one-mesh-dim table, exact?).
_CASES: list[tuple[str, Forms, tuple[int, ...], Table, bool]] = [
    ("interpolate", _both(size=(7, 4)), (3, 5, 4, 6), _BATCH_CHANNEL, True),
    ("interpolate", _both(scale_factor=1.5, mode="bilinear", align_corners=True),
     (3, 5, 4, 6), _BATCH_CHANNEL, False),
    ("interpolate", _both(scale_factor=(2, 0.5), mode="bilinear"), (5, 3, 4, 6),
     _BATCH_CHANNEL, False),
    ("interpolate", _both(size=9, mode="linear"), (3, 5, 4), _BATCH_CHANNEL, False),
    ("interpolate", _both(scale_factor=1.7, mode="bicubic", recompute_scale_factor=True),
     (3, 2, 5, 5), _BATCH_CHANNEL, False),
    ("pad", _pads((1, 2, 0, 3)), (3, 5, 4, 6), _BATCH_CHANNEL, True),
    ("pad", _pads((2, 0)), (3, 5, 4, 6), {**_BATCH_CHANNEL, (S2,): S2}, True),
    ("pad", _pads((1, 1, 0, 0, 2, 1), value=2.5), (3, 5, 4, 6), {(R,): R, (S0,): S0, (S2,): S2},
     True),
    ("pad", _pads((2, 1, 1, 2), mode="reflect"), (3, 5, 4, 6), _BATCH_CHANNEL, True),
    ("pad", _pads((0, 2), mode="replicate"), (5, 3, 4), {(R,): R, (S0,): S0, (S1,): S1, (P,): P},
     True),
    ("pad", _pads((3, 1, 0, 2), mode="circular"), (3, 5, 4, 6), _BATCH_CHANNEL, True),
]  # fmt: skip


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("name", "forms", "shape", "table", "exact"), _CASES)
def test_every_layout(  # type: ignore[no-untyped-def]
    name, forms, shape, table, exact, mesh_shape, graph
) -> None:
    ours, theirs = forms
    x = _randn(*shape)
    combos = None if len(mesh_shape) == 1 else table_combos(table, len(mesh_shape), [x], 6, 7)
    accepted = run_api(
        graph, name, ours, [x], mesh_shape, [theirs(x)], table=table, exact=exact, combos=combos
    )
    assert len(accepted) == len(table) if combos is None else len(accepted) > 3


@pytest.mark.parametrize(("mesh_shape", "mesh_dim"), [((2,), 0), ((3,), 0), ((2, 3), 1)])
def test_linear_forms_keep_partial(
    mesh_shape: tuple[int, ...], mesh_dim: int, graph: dtorch.Graph
) -> None:
    """Interpolation is a fixed linear filter and reflect/replicate/circular/zero padding copy
    values: the sum of the devices' results on their summands is the result on the sum."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    x = _randn(2, 3, 5, 4)
    px, parts = split_partial(x, mesh, mesh_dim, graph, seed=5)
    want = [P if m == mesh_dim else R for m in range(mesh.ndim)]
    forms = [
        _both(scale_factor=2, mode="nearest"),
        _both(size=(7, 3), mode="bilinear", align_corners=False),
        _both(size=(6, 6), mode="bilinear", align_corners=True, antialias=False),
        _pads((1, 2, 2, 1)),
        _pads((1, 2, 2, 1), mode="reflect"),
        _pads((1, 2, 0, 0), mode="replicate"),
        _pads((1, 2, 2, 1), mode="circular"),
    ]
    for ours, theirs in forms:
        out = ours(px)
        assert out.placements == want
        torch.testing.assert_close(out.to_torch(), theirs(x))
        torch.testing.assert_close(sum(theirs(p) for p in parts), theirs(x))


def test_a_nonzero_fill_refuses_partial(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = _randn(2, 3, 4)
    px, parts = split_partial(x, mesh, 0, graph, seed=6)
    summed = sum(F.pad(p, (1, 1), value=1.0) for p in parts)
    assert not torch.allclose(summed, F.pad(x, (1, 1), value=1.0))  # the fill adds up
    with pytest.raises(PlacementError, match="A nonzero constant fill is not linear") as e:
        DF.pad(px, (1, 1), value=1.0)
    check_rejection("pad", e.value, [px])


def test_shards_of_acted_dims_are_refused(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x = _randn(2, 3, 6, 6)
    cases = [
        ("interpolate", lambda t: DF.interpolate(t, scale_factor=2), [S2, R], 2),
        ("interpolate", lambda t: DF.interpolate(t, size=(3, 3), mode="bilinear"), [R, S3], 3),
        ("pad", lambda t: DF.pad(t, (1, 1)), [R, S3], 3),
        ("pad", lambda t: DF.pad(t, (0, 0, 1, 0), mode="reflect"), [S2, S0], 2),
    ]
    for name, fn, placements, dim in cases:
        t = place(x, mesh, placements, graph)
        with pytest.raises(PlacementError, match=f"dim {dim} \\(a spatial dim\\) is sharded") as e:
            fn(t)
        check_rejection(name, e.value, [t])


def test_bad_arguments_are_refused(graph: dtorch.Graph) -> None:
    x = dtorch.ones(1, 2, 4, 4)
    with pytest.raises(ShapeError, match="interpolate: torch refuses inputs"):
        DF.interpolate(x, size=3, mode="linear")  # linear needs a 3-D input
    with pytest.raises(ShapeError, match="interpolate: torch refuses inputs"):
        DF.interpolate(x)  # neither size nor scale_factor
    with pytest.raises(ShapeError, match="pad: torch refuses inputs"):
        DF.pad(x, (4, 0), mode="reflect")  # reflect pads less than the size
    with pytest.raises(ShapeError, match="pad: torch refuses inputs"):
        DF.pad(x, (1, 1), mode="reflect", value=1.0)  # only constant mode fills
    with pytest.raises(ParamError, match="pad: pad must be an even number of ints"):
        DF.pad(x, (1, 2, 3))
    with pytest.raises(ParamError, match="interpolate: size and scale_factor take a number"):
        DF.interpolate(x, size="big")


def test_pad_takes_numpy_and_tensor_integers_as_torch(graph: dtorch.Graph) -> None:
    """It refused them ('pad must be an even number of ints'), where torch takes them."""
    import numpy as np

    full = torch.arange(8.0).reshape(2, 4)
    sizes = (np.int64(1), torch.tensor(2))
    want = F.pad(full, sizes)
    assert torch.equal(DF.pad(dtorch.from_torch(full), sizes).to_torch(), want)


def test_integer_inputs(graph: dtorch.Graph) -> None:
    """uint8 interpolates (rounding: no Partial), int64 does not; integer padding copies values
    (Partial kept); reflect has no bool kernel."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.randint(0, 200, (2, 3, 4, 4), generator=_G).to(torch.uint8)
    t = place(x, mesh, [S1], graph)
    got = DF.interpolate(t, scale_factor=1.5, mode="bilinear")
    assert torch.equal(got.to_torch(), F.interpolate(x, scale_factor=1.5, mode="bilinear"))
    with pytest.raises(PlacementError, match="An integer average or interpolation rounds"):
        DF.interpolate(place(x, mesh, [P], graph), scale_factor=2)
    with pytest.raises(DtypeError, match=r"interpolate: no kernel for torch.int64"):
        DF.interpolate(t.long(), scale_factor=2)
    px = place(x.long(), mesh, [P], graph)
    padded = DF.pad(px, (1, 1, 2, 0), mode="replicate")
    assert padded.placements == [P]
    assert torch.equal(padded.to_torch(), F.pad(x.long(), (1, 1, 2, 0), mode="replicate"))
    with pytest.raises(DtypeError, match=r"pad: no kernel for torch.bool"):
        DF.pad(t > 5, (1, 1), mode="reflect")


def test_area_interpolation_to_no_pixels_is_empty(graph: dtorch.Graph) -> None:
    """torch's ``area`` mode is an adaptive average pool: an output size of 0 gives an empty
    tensor (dtorch refused it as the other modes are refused)."""
    x = torch.randn(2, 3, 1, 4)
    t = place(x, dtorch.init_device_mesh("cpu", 2), [S0], graph)
    for kwargs in ({"scale_factor": 0.5}, {"size": (0, 2)}):
        got = DF.interpolate(t, mode="area", **kwargs)
        want = F.interpolate(x, mode="area", **kwargs)
        assert got.shape == want.shape and torch.equal(got.to_torch(), want)
    with pytest.raises(RuntimeError, match="output sizes should be greater than 0"):
        DF.interpolate(t, scale_factor=0.5, mode="nearest")

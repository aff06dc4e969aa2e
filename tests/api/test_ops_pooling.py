"""``max_pool2d`` (with indices), ``avg_pool2d``, ``adaptive_avg_pool2d`` and
``global_avg_pool2d`` of ``dtorch.nn.functional`` against torch.nn.functional on the full
tensors: kernel, stride, padding, dilation, ceil_mode, count_include_pad, divisor_override,
3-D and 4-D inputs; every layout on 1-D meshes (table-drawn samples on 2-D and 3-D ones), even
and uneven batch and channel sizes, placements from the table of ``dtorch.ir.rules.spatial``
(batch and channel shards stay, spatial shards refused unless each device holds whole windows,
Partial kept by the average pools and refused by max); linearity checked on Partial tensors
whose devices hold different summands; thread and process mode."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import dtorch
import dtorch.nn.functional as DF
from dtorch.errors import ParamError, PlacementError, ShapeError, UnsupportedDtypeError
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

_G = torch.Generator().manual_seed(11)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    _G.manual_seed(11)


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=_G)


_MAX4: Table = {(R,): R, (S0,): S0, (S1,): S1}
_AVG4: Table = {**_MAX4, (P,): P}
_AVG3: Table = {(R,): R, (S0,): S0, (P,): P}

#: (name, dtorch form, torch form, input shape, one-mesh-dim table).
_CASES: list[tuple[str, Callable[..., Any], Callable[..., Any], tuple[int, ...], Table]] = [
    ("max_pool2d", lambda t: DF.max_pool2d(t, 3, 2, 1, ceil_mode=True),
     lambda t: F.max_pool2d(t, 3, 2, 1, ceil_mode=True), (3, 5, 7, 6), _MAX4),
    ("max_pool2d", lambda t: DF.max_pool2d(t, (2, 3), dilation=(2, 1), return_indices=True),
     lambda t: F.max_pool2d(t, (2, 3), dilation=(2, 1), return_indices=True), (5, 3, 6, 7),
     _MAX4),
    ("avg_pool2d", lambda t: DF.avg_pool2d(t, 3, 2, 1, True, count_include_pad=False),
     lambda t: F.avg_pool2d(t, 3, 2, 1, True, count_include_pad=False), (3, 5, 7, 6), _AVG4),
    ("avg_pool2d", lambda t: DF.avg_pool2d(t, 2, divisor_override=3),
     lambda t: F.avg_pool2d(t, 2, divisor_override=3), (5, 5, 5), _AVG3),  # no whole windows
    ("adaptive_avg_pool2d", lambda t: DF.adaptive_avg_pool2d(t, (3, None)),
     lambda t: F.adaptive_avg_pool2d(t, (3, None)), (3, 5, 7, 4), _AVG4),
    ("global_avg_pool2d", DF.global_avg_pool2d, lambda t: F.adaptive_avg_pool2d(t, 1),
     (5, 3, 4, 6), _AVG4),
]  # fmt: skip


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("name", "ours", "theirs", "shape", "table"), _CASES)
def test_pooling_every_layout(  # type: ignore[no-untyped-def]
    name, ours, theirs, shape, table, mesh_shape, graph
) -> None:
    x = _randn(*shape)
    want = theirs(x)
    want = list(want) if isinstance(want, tuple) else [want]
    combos = None if len(mesh_shape) == 1 else table_combos(table, len(mesh_shape), [x], 6, 5)
    accepted = run_api(
        graph, name, ours, [x], mesh_shape, want, table=table, exact=name == "max_pool2d",
        combos=combos,
    )  # fmt: skip
    assert len(accepted) == len(table) if combos is None else len(accepted) > 3


@pytest.mark.parametrize(("mesh_shape", "mesh_dim"), [((2,), 0), ((3,), 0), ((2, 1, 2), 2)])
def test_average_pools_are_linear_and_max_is_refused(
    mesh_shape: tuple[int, ...], mesh_dim: int, graph: dtorch.Graph
) -> None:
    """The sum of the devices' average pools of their summands is the pool of the sum; a max
    of sums is no sum of maxima, so a Partial input to max_pool2d is refused."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    x = _randn(2, 3, 7, 6)
    px, parts = split_partial(x, mesh, mesh_dim, graph, seed=4)
    want = [P if m == mesh_dim else R for m in range(mesh.ndim)]
    linear = [
        (lambda t: DF.avg_pool2d(t, 3, 2, 1, ceil_mode=True, count_include_pad=False),
         lambda t: F.avg_pool2d(t, 3, 2, 1, ceil_mode=True, count_include_pad=False)),
        (lambda t: DF.adaptive_avg_pool2d(t, (4, 3)), lambda t: F.adaptive_avg_pool2d(t, (4, 3))),
        (DF.global_avg_pool2d, lambda t: F.adaptive_avg_pool2d(t, 1)),
    ]  # fmt: skip
    for ours, theirs in linear:
        out = ours(px)
        assert out.placements == want
        torch.testing.assert_close(out.to_torch(), theirs(x))
        torch.testing.assert_close(sum(theirs(p) for p in parts), theirs(x))
    summed_maxima = sum(F.max_pool2d(p, 2) for p in parts)
    assert not torch.allclose(summed_maxima, F.max_pool2d(x, 2))  # max is not linear
    with pytest.raises(PlacementError, match="Max pooling is not linear") as e:
        DF.max_pool2d(px, 2)
    check_rejection("max_pool2d", e.value, [px])


def test_spatial_shards_are_refused(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x = _randn(2, 3, 6, 6)
    for placements, dim in (([S2, R], 2), ([R, dtorch.Shard(3)], 3)):
        t = place(x, mesh, placements, graph)
        for name, fn in (("max_pool2d", lambda t: DF.max_pool2d(t, 2)),
                         ("avg_pool2d", lambda t: DF.avg_pool2d(t, 2)),
                         ("adaptive_avg_pool2d", lambda t: DF.adaptive_avg_pool2d(t, 2)),
                         ("global_avg_pool2d", DF.global_avg_pool2d)):  # fmt: skip
            with pytest.raises(PlacementError, match=f"dim {dim} \\(a spatial dim\\)") as e:
                fn(t)
            check_rejection(name, e.value, [t])
    t = place(x[0], mesh, [S1, R], graph)  # (C, H, W): dim 1 is H
    with pytest.raises(PlacementError, match="dim 1 \\(a spatial dim\\) is sharded on mesh dim"):
        DF.max_pool2d(t, 2)


def _indices(f: Any, t: Any, kernel: int) -> Any:
    return f.max_pool2d(t, kernel, return_indices=True)[1]


#: (mesh shape, x's placements, H = W, the pooling in dtorch's and torch's form, kept?).
_WINDOW_SHARDS: list[tuple[tuple[int, ...], list[Any], int, Callable[..., Any], bool]] = [
    ((2,), [S2], 8, lambda f, t: f.max_pool2d(t, 2), True),  # 4 + 4: whole windows of 2
    ((3,), [S2], 12, lambda f, t: f.avg_pool2d(t, 2, divisor_override=3), True),
    ((2,), [dtorch.Shard(3)], 12, lambda f, t: f.max_pool2d(t, 3, dilation=1), True),
    ((2,), [S2], 16, lambda f, t: f.avg_pool2d(t, 3, 4), True),  # 8 + 8: windows at 0, 4 | 8, 12
    ((2, 2), [S2, dtorch.Shard(3)], 8, lambda f, t: f.max_pool2d(t, 2), True),
    ((2, 2), [S2, S2], 16, lambda f, t: f.avg_pool2d(t, 2), True),  # 16 -> 8 -> 4 + 4
    ((3,), [S2], 8, lambda f, t: f.avg_pool2d(t, 2), False),  # 3 + 3 + 2: a window cut
    ((2,), [S2], 8, lambda f, t: f.avg_pool2d(t, 3, 2), False),  # windows overlap
    ((2,), [S2], 8, lambda f, t: f.max_pool2d(t, 2, padding=1), False),
    ((2,), [S2], 8, lambda f, t: f.max_pool2d(t, 2, ceil_mode=True), False),
    ((2,), [S2], 8, lambda f, t: _indices(f, t, 2), True),  # into the whole plane
    ((2, 3), [S2, dtorch.Shard(3)], 12, lambda f, t: _indices(f, t, 2), True),
    ((2,), [S2], 8, lambda f, t: f.adaptive_avg_pool2d(t, 4), False),
    ((2,), [S2], 12, lambda f, t: f.max_pool2d(t, 2, dilation=2), False),
]  # fmt: skip


@pytest.mark.parametrize(("mesh_shape", "layout", "size", "pool", "kept"), _WINDOW_SHARDS)
def test_spatial_shards_of_whole_windows_are_kept(
    mesh_shape: tuple[int, ...],
    layout: list[Any],
    size: int,
    pool: Callable[..., Any],
    kept: bool,
    graph: dtorch.Graph,
) -> None:
    """A max or average pooling without padding whose every device holds whole windows, the
    windows of its chunk of the output, keeps a spatial shard (no halo needed; max's indices
    are into the whole plane, as torch's); any other (a cut or overlapping window, padding,
    ceil_mode, adaptive windows) is refused."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    x = _randn(2, 3, size, size)
    t = place(x, mesh, layout, graph)
    if not kept:
        with pytest.raises(PlacementError, match=r"\(a spatial dim\) is sharded on mesh dim"):
            pool(DF, t)
        return
    out = pool(DF, t)
    assert out.placements == layout
    torch.testing.assert_close(out.to_torch(), pool(F, x))


def test_max_pool1d_indices_of_a_sharded_length_are_into_the_whole_length(graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 3)
    x = _randn(2, 3, 12)
    values, indices = DF.max_pool1d(place(x, mesh, [S2], graph), 4, return_indices=True)
    want_values, want_indices = F.max_pool1d(x, 4, return_indices=True)
    assert indices.placements == [S2]
    assert indices.to_torch().equal(want_indices) and values.to_torch().equal(want_values)


def test_bad_arguments_are_refused(graph: dtorch.Graph) -> None:
    x = dtorch.ones(1, 2, 4, 4)
    with pytest.raises(ShapeError, match="max_pool2d: torch refuses inputs"):
        DF.max_pool2d(x, 2, padding=2)  # padding above half the kernel
    with pytest.raises(ShapeError, match=r"avg_pool2d: needs a 3-D \(C, H, W\) or 4-D"):
        DF.avg_pool2d(dtorch.ones(4, 4), 2)
    with pytest.raises(ShapeError, match="global_avg_pool2d: needs a 3-D"):
        DF.global_avg_pool2d(dtorch.ones(1, 1, 1, 4, 4))
    with pytest.raises(ParamError, match="max_pool2d: kernel_size must be an int or a pair"):
        DF.max_pool2d(x, (2, 2, 2))
    with pytest.raises(ParamError, match="avg_pool2d: divisor_override must be a positive"):
        DF.avg_pool2d(x, 2, divisor_override=0)
    with pytest.raises(ParamError, match="adaptive_avg_pool2d: output_size must be"):
        DF.adaptive_avg_pool2d(x, (2, 2, 2))


def test_max_pool_indices_keep_the_layout(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 3))
    x = _randn(4, 5, 6, 6)
    out, idx = DF.max_pool2d(place(x, mesh, [S0, S1], graph), 2, return_indices=True)
    want, want_idx = F.max_pool2d(x, 2, return_indices=True)
    assert out.placements == idx.placements == [S0, S1] and idx.dtype == torch.int64
    assert torch.equal(out.to_torch(), want) and torch.equal(idx.to_torch(), want_idx)


def test_integer_pools(graph: dtorch.Graph) -> None:
    """Integer max and average pools match torch; an integer average rounds, so it refuses a
    Partial input; adaptive pooling has no integer kernel, no pool has a bool one."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.randint(-9, 9, (3, 2, 5, 5), generator=_G)
    t = place(x, mesh, [S0], graph)
    assert torch.equal(DF.max_pool2d(t, 2).to_torch(), F.max_pool2d(x, 2))
    assert torch.equal(DF.avg_pool2d(t, 2).to_torch(), F.avg_pool2d(x, 2))
    parts = [x, -x + 1]
    assert not torch.equal(F.avg_pool2d(parts[0], 2) + F.avg_pool2d(parts[1], 2),
                           F.avg_pool2d(parts[0] + parts[1], 2))  # fmt: skip
    partial = place(x, mesh, [P], graph)
    with pytest.raises(PlacementError, match="An integer average or interpolation rounds") as e:
        DF.avg_pool2d(partial, 2)
    check_rejection("avg_pool2d", e.value, [partial])
    with pytest.raises(UnsupportedDtypeError, match=r"adaptive_avg_pool2d: no kernel for torch"):
        DF.adaptive_avg_pool2d(t, 1)
    with pytest.raises(UnsupportedDtypeError, match=r"max_pool2d: no kernel for torch.bool; acc"):
        DF.max_pool2d(t > 0, 2)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.bool])
def test_pools_refuse_the_dtypes_torch_has_no_kernel_for(
    dtype: torch.dtype, graph: dtorch.Graph
) -> None:
    """torch's CPU average pooling takes floats and int64 only (int8/16/32 failed on the
    devices, uint8 was a ShapeError); each refusal is a NotImplementedError, as torch's."""
    x = torch.ones(1, 2, 4, 4, dtype=dtype)
    t = place(x, dtorch.init_device_mesh("cpu", 2), [S0], graph)
    for name in ("avg_pool2d", "max_pool2d", "adaptive_avg_pool2d"):
        try:
            want = getattr(F, name)(x, 2)
        except NotImplementedError:
            with pytest.raises(UnsupportedDtypeError, match=f"{name}: no kernel for {dtype}"):
                getattr(DF, name)(t, 2)
        else:
            assert torch.equal(getattr(DF, name)(t, 2).to_torch(), want), name


@pytest.mark.parametrize("shape", [(1, 2, 0, 4), (2, 4, 0), (0, 2, 4, 4), (0, 4, 4), (1, 0, 4, 4)])
def test_pools_and_interpolate_of_empty_inputs_as_torch(
    shape: tuple[int, ...], graph: dtorch.Graph
) -> None:
    """torch refuses adaptive pooling of an empty height or width (dtorch computed one) and
    interpolates an empty batch (dtorch refused it): each as torch, on a mesh too."""
    x = torch.ones(shape)
    t = place(x, dtorch.init_device_mesh("cpu", 2), [R], graph)
    calls = {
        "adaptive_avg_pool2d": lambda f, v: f.adaptive_avg_pool2d(v, 2),
        "interpolate": lambda f, v: f.interpolate(v, scale_factor=2),
        "max_pool2d": lambda f, v: f.max_pool2d(v, 2),
    }
    for name, call in calls.items():
        try:
            want = call(F, x)
        except RuntimeError:
            with pytest.raises(ShapeError, match=f"{name}: torch refuses inputs"):
                call(DF, t)
        else:
            assert torch.equal(call(DF, t).to_torch(), want), name


@pytest.mark.parametrize("output_size", [0, (0, 3), (2, 0), (0, None)])
@pytest.mark.parametrize("mesh_shape", [(3,), (2, 2)])
def test_adaptive_avg_pool2d_to_an_empty_size(
    output_size: Any, mesh_shape: tuple[int, ...], graph: dtorch.Graph
) -> None:
    """An output size of 0 gives torch's empty output, in every layout the pool keeps."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    x = _randn(2, 5, 4, 6)
    want = F.adaptive_avg_pool2d(x, output_size)
    rest = [R] * (mesh.ndim - 1)
    for layout in ([R, *rest], [S0, *rest], [S1, *rest], [P, *rest]):
        out = DF.adaptive_avg_pool2d(place(x, mesh, layout, graph), output_size)
        assert out.placements == layout and out.shape == want.shape
        assert torch.equal(out.to_torch(), want)
    unbatched = DF.adaptive_avg_pool2d(place(x[0], mesh, [S0, *rest], graph), output_size)
    assert torch.equal(unbatched.to_torch(), F.adaptive_avg_pool2d(x[0], output_size))


def test_the_shape_of_a_large_output_of_an_empty_input_is_learned_on_meta(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An empty input runs the rule's torch call on empty CPU tensors (the CPU kernels'
    checks), but only where the outputs are small too: ``pad`` of an empty input to 2**32
    elements made (and filled) them all on the controller when it was recorded."""
    from dtorch.ir.params_layout import PadParam
    from dtorch.ir.rules import image_ops

    devices: list[str] = []
    run = image_ops._run

    def noted(*args: Any) -> Any:
        devices.append(args[-1])
        return run(*args)

    monkeypatch.setattr(image_ops, "_run", noted)
    image_ops._meta.cache_clear()
    big = image_ops._meta(image_ops.pad, PadParam((0, 2**32)), (((1, 1, 0), torch.float32),))
    assert big == (((1, 1, 2**32), torch.float32),) and devices == ["meta"]
    small = image_ops._meta(image_ops.pad, PadParam((0, 4)), (((1, 1, 0), torch.float32),))
    assert small == (((1, 1, 4), torch.float32),) and devices == ["meta", "meta", "cpu"]


def test_adaptive_avg_pool2d_of_two_dims_to_one_point_is_torchs_mean(graph: dtorch.Graph) -> None:
    """torch's 1x1 shortcut takes a 2-D input (its mean, kept 1x1) before its dim check."""
    full = torch.randn(4, 5)
    for placements in ([dtorch.Replicate()], [dtorch.Shard(0)]):
        t = dtorch.from_torch(full, device_mesh=dtorch.init_device_mesh("cpu", 2),
                              placements=placements)  # fmt: skip
        got = dtorch.nn.functional.adaptive_avg_pool2d(t, 1)
        torch.testing.assert_close(got.to_torch(), torch.nn.functional.adaptive_avg_pool2d(full, 1))
    with pytest.raises(RuntimeError):
        torch.nn.functional.adaptive_avg_pool2d(full, 2)
    with pytest.raises(ShapeError):
        dtorch.nn.functional.adaptive_avg_pool2d(dtorch.tensor(full), 2)

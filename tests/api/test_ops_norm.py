"""Normalisations through ``dtorch.nn.functional`` against torch.nn.functional on the full
tensors: ``layer_norm``, ``rms_norm``, ``group_norm`` (shards kept on the dims they do not
normalise, every other layout rejected), ``batch_norm`` in eval mode (per-channel affine:
batch, channel and spatial shards kept, the statistics chunked with the channels) and in
training mode (statistics over the FULL batch however x is sharded, running buffers updated
in place as torch does); 1-D, 2-D and 3-D meshes, even and uneven, thread and process mode,
and the rejections."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import dtorch
import dtorch.nn.functional as DF
from dtorch.errors import DtypeError, ParamError, PlacementError, ShapeError
from dtorch.ir.placement import Placement
from tests.api.image_harness import split_partial
from tests.api.ops_harness import ALL_MESHES, S0, S1, S2, P, R, Table, limit_for, place, run_api

pytestmark = pytest.mark.timeout(120)

_G = torch.Generator().manual_seed(5)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    _G.manual_seed(5)


def _rand(*shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=_G)


def _norm_table(kept: tuple[int, ...], vectors: int) -> Table:
    """x Shard of a kept dim (or Replicate) with Replicate weight and bias; a Replicate x with
    Partial weight and bias (the output is affine in them); nothing else."""
    rest: tuple[Placement, ...] = (R,) * vectors
    table: dict[tuple[Placement, ...], Placement] = {(R, *rest): R}
    table.update({(dtorch.Shard(d), *rest): dtorch.Shard(d) for d in kept})
    if vectors:
        table[(R, *(P,) * vectors)] = P
    return table


#: name, dtorch call, torch call, input shapes (x first), the dims of x that are not normalised.
_Case = tuple[str, Callable[..., Any], Callable[..., Any], list[tuple[int, ...]], tuple[int, ...]]
_NORMS: list[_Case] = [
    ("layer_norm", lambda x, w, b: DF.layer_norm(x, [6], w, b),
     lambda x, w, b: F.layer_norm(x, [6], w, b), [(4, 5, 6), (6,), (6,)], (0, 1)),
    ("layer_norm", lambda x: DF.layer_norm(x, (5, 6), eps=1e-3),
     lambda x: F.layer_norm(x, (5, 6), eps=1e-3), [(4, 5, 6)], (0,)),
    ("rms_norm", lambda x, w: DF.rms_norm(x, [6], w),
     lambda x, w: F.rms_norm(x, [6], w), [(4, 5, 6), (6,)], (0, 1)),
    ("rms_norm", lambda x: DF.rms_norm(x, 6, eps=1e-2),
     lambda x: F.rms_norm(x, [6], eps=1e-2), [(5, 3, 6)], (0, 1)),
    # one group of 4 channels: no channel split of these meshes holds whole groups
    ("group_norm", lambda x: DF.group_norm(x, 1, eps=1e-3),
     lambda x: F.group_norm(x, 1, eps=1e-3), [(5, 4, 3)], (0,)),
]  # fmt: skip


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("name", "call", "ref", "shapes", "kept"), _NORMS)
def test_normalizations_every_layout(  # type: ignore[no-untyped-def]
    name, call, ref, shapes, kept, mesh_shape, graph
) -> None:
    fulls = [_rand(*s) for s in shapes]
    table = _norm_table(kept, len(shapes) - 1)
    accepted = run_api(
        graph, name, call, fulls, mesh_shape, [ref(*fulls)], table=table, exact=False,
        limit=limit_for(mesh_shape, one_d=60, n_d=12),
    )  # fmt: skip
    assert len(accepted) == len(table) or len(mesh_shape) > 1


def _group_table() -> Table:
    """Group norm with one channel per group (every channel split holds whole groups): the
    batch dim shards; the channels too, with the weight and bias chunked like them."""
    table: dict[tuple[Placement, ...], Placement] = {(R, R, R): R, (S0, R, R): S0, (R, P, P): P}
    for w in (R, S0):
        for b in (R, S0):
            table[(S1, w, b)] = S1
            if S0 in (w, b):
                table[(R, w, b)] = S1
    return table


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
def test_group_norm_whole_groups_every_layout(
    mesh_shape: tuple[int, ...], graph: dtorch.Graph
) -> None:
    fulls = [_rand(5, 6, 3), _rand(6), _rand(6)]
    run_api(
        graph, "group_norm", lambda x, w, b: DF.group_norm(x, 6, w, b), fulls, mesh_shape,
        [F.group_norm(fulls[0], 6, fulls[1], fulls[2])], table=_group_table(), exact=False,
        limit=limit_for(mesh_shape, one_d=60, n_d=12),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("mesh_shape", "channels", "groups", "layout", "accepted"),
    [
        ((2,), 6, 2, [S1], True),  # 3 + 3 channels: whole groups of 3
        ((3,), 6, 2, [S1], False),  # 2 + 2 + 2 cuts the groups of 3
        ((3,), 6, 3, [S1], True),
        ((3,), 4, 2, [S1], True),  # 2 + 2 + 0 (torch.chunk's sizes): whole groups of 2
        ((2, 2), 6, 3, [S1, S1], False),  # 6 -> 3 -> 2 + 1
        ((2, 3), 12, 6, [S1, S1], True),  # 12 -> 6 -> 2 + 2 + 2
        ((2, 3), 12, 2, [S0, S1], False),  # 12 -> 4 + 4 + 4 cuts the groups of 6
    ],
)
def test_group_norm_channel_shards(
    mesh_shape: tuple[int, ...],
    channels: int,
    groups: int,
    layout: list[Placement],
    accepted: bool,
    graph: dtorch.Graph,
) -> None:
    """Channel shards are kept where every device holds whole groups, refused otherwise."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    x, w = _rand(4, channels, 3), _rand(channels)
    dx, dw = place(x, mesh, layout, graph), place(w, mesh, [R] * mesh.ndim, graph)
    if not accepted:
        with pytest.raises(PlacementError, match=r"^group_norm: got .*whole groups"):
            DF.group_norm(dx, groups, dw)
        return
    out = DF.group_norm(dx, groups, dw)
    assert out.placements == layout
    torch.testing.assert_close(out.to_torch(), F.group_norm(x, groups, w))


#: name -> (dtorch's call, torch's call, vector size) on x (4, 6, 2): the last dim normalised,
#: or 3 groups of 2 channels.
_AFFINE_NORMS: dict[str, tuple[Callable[..., Any], Callable[..., Any], int]] = {
    "layer_norm": (lambda *a: DF.layer_norm(a[0], [2], *a[1:]),
                   lambda *a: F.layer_norm(a[0], [2], *a[1:]), 2),
    "rms_norm": (lambda *a: DF.rms_norm(a[0], [2], *a[1:]),
                 lambda *a: F.rms_norm(a[0], [2], *a[1:]), 2),
    "group_norm": (lambda *a: DF.group_norm(a[0], 3, *a[1:]),
                   lambda *a: F.group_norm(a[0], 3, *a[1:]), 6),
}  # fmt: skip


@pytest.mark.parametrize("name", list(_AFFINE_NORMS))
def test_partial_weight_and_bias_of_spread_pieces(name: str, graph: dtorch.Graph) -> None:
    """Weight and bias Partial on the tp dim (pieces that differ) beside x sharded on dp: each
    device adds its pieces, the sum is torch's normalisation (rms_norm has no bias). A
    Replicate bias beside a Partial weight is refused: it would be added once per device."""
    call, ref, size = _AFFINE_NORMS[name]
    mesh = dtorch.init_device_mesh("cpu", (2, 3))
    x, w, b = _rand(4, 6, 2), _rand(size), _rand(size)
    tw, pieces = split_partial(w, mesh, 1, graph, seed=1)
    tb, _ = split_partial(b, mesh, 1, graph, seed=2)
    assert not torch.allclose(pieces[0], w)
    tx = place(x, mesh, [S0, R], graph)
    got = call(tx, tw)
    assert got.placements == [S0, P]
    torch.testing.assert_close(got.to_torch(), ref(x, w))
    if name == "rms_norm":  # no bias
        return
    got = call(tx, tw, tb)
    assert got.placements == [S0, P]
    torch.testing.assert_close(got.to_torch(), ref(x, w, b))
    with pytest.raises(PlacementError, match=rf"^{name}: got \(S\(0\), R\) x \(R, P\) x \(R, R\)"):
        call(tx, tw, place(b, mesh, [R, R], graph))
    with pytest.raises(PlacementError, match=rf"^{name}: got \(S\(0\), R\) x \(R, P\) on"):
        call(tx, None, tb)  # a Partial bias alone: x_hat would be added once per device


def test_rms_norm_default_eps_bfloat16(graph: dtorch.Graph) -> None:
    """``eps=None`` is torch's default (the dtype's eps), on a low-precision dtype too."""
    mesh = dtorch.init_device_mesh("cpu", (2, 3))
    x = (_rand(6, 5, 4) * 1e-3).to(torch.bfloat16)
    out = DF.rms_norm(place(x, mesh, [S0, S1], graph), [4])
    assert out.dtype == torch.bfloat16 and out.placements == [S0, S1]
    torch.testing.assert_close(out.to_torch(), F.rms_norm(x, [4]))


def _affine_table() -> Table:
    """Eval batch_norm of x (N, C, L) with mean and var: every dim of x shards; a channel
    shard goes with Shard(0) or Replicate (chunked) statistics, in any mix; statistics that
    are Partial, or sharded beside another layout of x, are made Replicate first."""
    table: dict[tuple[Placement, ...], Placement] = {}
    for m in (R, S0, P):
        for v in (R, S0, P):
            table.update({(x, m, v): x for x in (R, S0, S2)})
            table[(S1, m, v)] = S1
    return table


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
def test_batch_norm_eval_every_layout(mesh_shape: tuple[int, ...], graph: dtorch.Graph) -> None:
    x, mean, var = _rand(5, 6, 3), _rand(6), _rand(6).abs() + 0.5
    want = F.batch_norm(x, mean, var, eps=1e-3)
    run_api(
        graph, "batch_norm", lambda a, m, v: DF.batch_norm(a, m, v, eps=1e-3), [x, mean, var],
        mesh_shape, [want], table=_affine_table(), exact=False,
        limit=limit_for(mesh_shape, one_d=60, n_d=12),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("mesh_shape", "layouts"),
    [
        ((3,), [[S1], [S0], [S0], [R], [S0]]),
        ((2, 2), [[S0, S1], [R, S0], [R, R], [R, S0], [R, R]]),
        ((2, 1, 2), [[S2, R, S1], [R, R, S0], [R, R, S0], [R, R, R], [R, R, R]]),
    ],
)
def test_batch_norm_eval_weight_bias(
    mesh_shape: tuple[int, ...], layouts: list[list[Placement]], graph: dtorch.Graph
) -> None:
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    fulls = [_rand(4, 5, 3, 2), _rand(5), _rand(5).abs() + 0.5, _rand(5), _rand(5)]
    args = [place(t, mesh, p, graph) for t, p in zip(fulls, layouts, strict=True)]
    out = DF.batch_norm(*args)
    assert out.placements == layouts[0]
    torch.testing.assert_close(out.to_torch(), F.batch_norm(*fulls))


_TRAIN_LAYOUTS = [
    ((2,), [S0], [R]),
    ((3,), [S1], [S0]),
    ((3,), [S2], [R]),
    ((2, 2), [S0, S1], [R, S0]),
    ((2, 3), [S2, S0], [S0, R]),
    ((2, 2, 2), [S0, S1, S2], [R, R, S0]),
    ((2, 1, 2), [S0, R, S0], [R, R, R]),
]


@pytest.mark.parametrize(("mesh_shape", "x_layout", "stats_layout"), _TRAIN_LAYOUTS)
def test_batch_norm_training_full_batch(
    mesh_shape: tuple[int, ...],
    x_layout: list[Placement],
    stats_layout: list[Placement],
    graph: dtorch.Graph,
) -> None:
    """Training mode: the full batch's statistics however x is sharded (even and uneven),
    the running buffers updated in place (laid out as they were), twice in a row."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    x, weight, bias = _rand(5, 6, 3, 2) * 3 + 1, _rand(6), _rand(6)
    mean, var = _rand(6), _rand(6).abs() + 0.5
    dx = place(x, mesh, x_layout, graph)
    dmean, dvar = place(mean, mesh, stats_layout, graph), place(var, mesh, stats_layout, graph)
    dw, db = place(weight, mesh, [R] * mesh.ndim, graph), place(bias, mesh, stats_layout, graph)
    for _ in range(2):
        out = DF.batch_norm(dx, dmean, dvar, dw, db, training=True, momentum=0.3, eps=1e-4)
        want = F.batch_norm(x, mean, var, weight, bias, training=True, momentum=0.3, eps=1e-4)
        assert out.placements == x_layout
        torch.testing.assert_close(out.to_torch(), want)
    assert dmean.placements == stats_layout and dvar.placements == stats_layout
    torch.testing.assert_close(dmean.to_torch(), mean)
    torch.testing.assert_close(dvar.to_torch(), var)


def test_batch_norm_training_without_running_stats(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 3))
    x = _rand(7, 4, 5)
    out = DF.batch_norm(place(x, mesh, [S0, S2], graph), None, None, training=True)
    assert out.placements == [S0, S2]
    torch.testing.assert_close(out.to_torch(), F.batch_norm(x, None, None, training=True))


def test_rejections(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x = place(_rand(4, 6, 3), mesh, [S0, S2], graph)
    w = place(_rand(3), mesh, [R, R], graph)
    with pytest.raises(
        PlacementError,
        match=r"^layer_norm: got \(S\(0\), S\(2\)\) x \(R, R\) on "
        r"mesh \(2, 2\); accepted per mesh dimension: .*not normalised",
    ):
        DF.layer_norm(x, [3], w)
    with pytest.raises(PlacementError, match=r"^rms_norm: .*\(R, S\(0\)\).*accepted"):
        DF.rms_norm(
            place(_rand(4, 3), mesh, [S0, R], graph), [3], place(_rand(3), mesh, [R, S0], graph)
        )
    with pytest.raises(
        PlacementError, match=r"^group_norm: got \(R, S\(2\)\).*accepted.*Redistribute"
    ):
        DF.group_norm(place(_rand(4, 6, 3), mesh, [R, S2], graph), 3)
    with pytest.raises(PlacementError, match=r"^batch_norm: got \(P, R\).*accepted"):
        rep = place(_rand(6), mesh, [R, R], graph)
        DF.batch_norm(place(_rand(4, 6), mesh, [P, R], graph), rep, rep)
    with pytest.raises(
        PlacementError, match=r"^batch_norm: got \(P, R\) for x in training.*accepted"
    ):
        DF.batch_norm(place(_rand(4, 6), mesh, [P, R], graph), None, None, training=True)
    with pytest.raises(ShapeError, match=r"^layer_norm: normalized_shape \[4\] is not"):
        DF.layer_norm(x, [4])
    with pytest.raises(ShapeError, match=r"^layer_norm: weight has shape \[3\]; expected \[6, 3\]"):
        DF.layer_norm(x, [6, 3], w)
    with pytest.raises(
        ParamError, match=r"^group_norm: 6 channels do not divide into num_groups=4"
    ):
        DF.group_norm(x, 4)
    with pytest.raises(
        DtypeError, match=r"^layer_norm: needs a floating-point input; got torch.int64"
    ):
        DF.layer_norm(place(torch.ones(2, 3, dtype=torch.int64), mesh, [R, R], graph), [3])
    with pytest.raises(
        ShapeError, match=r"^batch_norm: running_mean has shape \[3\]; expected \[6\]"
    ):
        DF.batch_norm(x, w, w)
    with pytest.raises(
        ValueError, match=r"^batch_norm: running_mean and running_var must be given"
    ):
        DF.batch_norm(x, None, None)
    with pytest.raises(ValueError, match=r"expected more than 1 value per channel when training"):
        DF.batch_norm(place(_rand(1, 6), mesh, [R, R], graph), None, None, training=True)


@pytest.mark.parametrize("stats_layout", [[R], [S0]])
def test_batch_norm_with_a_device_holding_no_channels(
    stats_layout: list[Placement], graph: dtorch.Graph
) -> None:
    """4 channels over 3 devices are 2 + 2 + 0 (torch.chunk): the empty shard normalises
    nothing, in eval mode and in training mode (statistics and running ones as torch's)."""
    mesh = dtorch.init_device_mesh("cpu", (3,))
    x, weight, bias = _rand(5, 4, 3, 3) * 2 + 1, _rand(4), _rand(4)
    mean, var = _rand(4), _rand(4).abs() + 0.5
    dx = place(x, mesh, [S1], graph)
    dmean, dvar = place(mean, mesh, stats_layout, graph), place(var, mesh, stats_layout, graph)
    dw, db = place(weight, mesh, [R], graph), place(bias, mesh, stats_layout, graph)
    out = DF.batch_norm(dx, dmean, dvar, dw, db)
    assert out.placements == [S1]
    torch.testing.assert_close(out.to_torch(), F.batch_norm(x, mean, var, weight, bias))
    for _ in range(2):
        out = DF.batch_norm(dx, dmean, dvar, dw, db, training=True, momentum=0.3)
        want = F.batch_norm(x, mean, var, weight, bias, training=True, momentum=0.3)
        assert out.placements == [S1]
        torch.testing.assert_close(out.to_torch(), want)
    torch.testing.assert_close(dmean.to_torch(), mean)
    torch.testing.assert_close(dvar.to_torch(), var)


@pytest.mark.parametrize("shape", [(4, 1, 3, 3), (6, 1), (4, 1, 5)], ids=str)
@pytest.mark.parametrize("devices", [2, 3])
def test_batch_norm_training_of_one_sharded_channel(
    shape: tuple[int, ...], devices: int, graph: dtorch.Graph
) -> None:
    """One channel sharded over 2 or 3 devices (the others hold none): training statistics
    and running ones as torch's (the per-channel statistics were flattened, which a shard
    of a dim after a size-1 one cannot be: a PlacementError naming ``flatten``)."""
    mesh = dtorch.init_device_mesh("cpu", (devices,))
    x = _rand(*shape) * 2 + 1
    mean, var = torch.zeros(1), torch.ones(1)
    dmean, dvar = place(mean, mesh, [R], graph), place(var, mesh, [R], graph)
    out = DF.batch_norm(place(x, mesh, [S1], graph), dmean, dvar, training=True)
    want = F.batch_norm(x, mean, var, training=True)
    torch.testing.assert_close(out.to_torch(), want)
    torch.testing.assert_close(dmean.to_torch(), mean)
    torch.testing.assert_close(dvar.to_torch(), var)


@pytest.mark.parametrize("shape", [(0, 3, 2, 2), (0, 3), (4, 3, 0)], ids=str)
@pytest.mark.parametrize("stats", [True, False], ids=["running stats", "none"])
def test_batch_norm_training_of_an_empty_batch(
    shape: tuple[int, ...], stats: bool, graph: dtorch.Graph
) -> None:
    """An empty batch in training mode gives torch's empty result and leaves the running
    statistics as they were (it was refused: 'expected more than 1 value per channel')."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    x = torch.randn(*shape)
    mean, var = (torch.zeros(3), torch.ones(3)) if stats else (None, None)
    dmean, dvar = (place(t, mesh, [R], graph) if t is not None else None for t in (mean, var))
    out = DF.batch_norm(place(x, mesh, [S0], graph), dmean, dvar, training=True)
    want = F.batch_norm(x, mean, var, training=True)
    assert out.shape == want.shape and torch.equal(out.to_torch(), want)
    if stats:
        assert torch.equal(dmean.to_torch(), torch.zeros(3))
        assert torch.equal(dvar.to_torch(), torch.ones(3))


def test_batch_norm_training_takes_both_running_statistics_or_neither(graph: dtorch.Graph) -> None:
    """torch's refusal of one running statistic without the other in training mode (the
    given one was updated alone)."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    x = place(torch.randn(4, 3), mesh, [S0], graph)
    stats = place(torch.zeros(3), mesh, [R], graph)
    for mean, var in ((stats, None), (None, stats)):
        with pytest.raises(ValueError, match="both be None or neither"):
            F.batch_norm(torch.randn(4, 3), None if mean is None else torch.zeros(3),
                         None if var is None else torch.ones(3), training=True)  # fmt: skip
        with pytest.raises(ValueError, match="both be None or neither"):
            DF.batch_norm(x, mean, var, training=True)
    assert torch.equal(stats.to_torch(), torch.zeros(3))


def test_interpolate_takes_0d_tensor_sizes(graph: dtorch.Graph) -> None:
    """A 0-d torch tensor as a size is its number, as in torch (it was a ParamError)."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    full = torch.randn(2, 1, 4, 4)
    x = place(full, mesh, [S0], graph)
    for kw in ({"size": torch.tensor(3)}, {"size": (torch.tensor(3), 2)}):
        torch.testing.assert_close(DF.interpolate(x, **kw).to_torch(), F.interpolate(full, **kw))


@pytest.mark.parametrize("role", ["running_mean", "running_var", "weight", "bias"])
def test_batch_norm_training_checks_the_vector_sizes(role: str, graph: dtorch.Graph) -> None:
    """Training mode checks every per-channel vector before any arithmetic (torch refuses the
    same calls); the running statistics are left as they were."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    x = _rand(5, 3, 2)
    fulls = {"running_mean": torch.zeros(3), "running_var": torch.ones(3)}
    fulls.update(weight=torch.ones(3), bias=torch.zeros(3))
    fulls[role] = fulls[role].new_ones(4)
    with pytest.raises(RuntimeError):
        F.batch_norm(x, **fulls, training=True)  # type: ignore[arg-type]
    ours = {k: place(v, mesh, [R], graph) for k, v in fulls.items()}
    with pytest.raises(
        ShapeError, match=rf"^batch_norm: {role} has shape \[4\]; expected \[3\] \(the channels"
    ):
        DF.batch_norm(place(x, mesh, [S0], graph), **ours, training=True)  # type: ignore[arg-type]
    for key in ("running_mean", "running_var"):
        assert torch.equal(ours[key].to_torch(), fulls[key]), key


def test_group_norm_of_one_sample_per_device_as_torch(graph: dtorch.Graph) -> None:
    """Each device holds one value per group of a sharded batch, the tensor more: torch's
    F.group_norm would refuse the shard ("more than 1 value per channel"), so the devices
    must not ask it; the full tensor of one value per group is refused as torch refuses it."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    for shape, groups in (((2, 4, 1, 1), 4), ((2, 3), 3)):
        x = torch.randn(shape)
        got = DF.group_norm(place(x, mesh, [S0], graph), groups)
        torch.testing.assert_close(got.to_torch(), F.group_norm(x, groups))
    one = torch.randn(1, 4, 1, 1)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        F.group_norm(one, 4)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        DF.group_norm(place(one, mesh, [R], graph), 4)


def test_rms_norm_of_a_complex_input(graph: dtorch.Graph) -> None:
    """torch's rms_norm takes a complex input (with a real weight); the rule refused it."""
    full = torch.randn(4, 6, dtype=torch.complex64, generator=torch.Generator().manual_seed(1))
    weight = torch.rand(6) + 0.5
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = dtorch.from_torch(full, device_mesh=mesh, placements=[dtorch.Shard(0)], graph=graph)
    w = dtorch.from_torch(weight, device_mesh=mesh, graph=graph)
    got = dtorch.nn.functional.rms_norm(x, (6,), w)
    assert got.dtype == torch.complex64 and got.placements == [dtorch.Shard(0)]
    torch.testing.assert_close(got.to_torch(), torch.nn.functional.rms_norm(full, (6,), weight))
    with pytest.raises(dtorch.errors.DtypeError, match="needs a floating-point input"):
        dtorch.nn.functional.layer_norm(x, (6,))


@pytest.mark.parametrize(
    ("mean_at", "var_at", "x_at"),
    [([R, P], [P, P], [S0, R]), ([P, R], [R, P], [R, S1]), ([S0, R], [P, S0], [S2, S0])],
)
def test_batch_norm_training_updates_partial_and_sharded_running_statistics(
    mean_at: list[Placement], var_at: list[Placement], x_at: list[Placement], graph: dtorch.Graph
) -> None:
    """Running statistics that are Partial (or sharded where x's channels are not) are
    aligned with the batch's statistics before the update, as eval mode aligns them, and keep
    their placements. A Partial running_var was refused after running_mean had been
    updated: the refused call changed the model."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x, mean, var = torch.randn(4, 3, 5), torch.randn(3), torch.rand(3) + 0.5
    ours_mean, ours_var = place(mean, mesh, mean_at, graph), place(var, mesh, var_at, graph)
    got = DF.batch_norm(place(x, mesh, x_at, graph), ours_mean, ours_var, None, None, True, 0.3)
    want = F.batch_norm(x, mean, var, training=True, momentum=0.3)
    assert torch.allclose(got.to_torch(), want, atol=1e-5)
    for ours, theirs, at in ((ours_mean, mean, mean_at), (ours_var, var, var_at)):
        assert torch.allclose(ours.to_torch(), theirs, atol=1e-6) and ours.placements == at

"""torch.nn.functional's losses against torch on the full tensors: every reduction, weights,
``ignore_index``, ``label_smoothing``, class-probability targets, 1-D to 4-D inputs, on 1-D,
2-D and 3-D meshes (even and uneven), batch dims sharded, class dims sharded (vocab-parallel:
nothing gathered) and both; thread and process mode."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import dtorch
import dtorch.nn.functional as DF
from dtorch.errors import DtypeError, ParamError, PlacementError, ShapeError
from dtorch.ir.opkind import OpKind
from tests.api.ops_harness import ALL_MESHES, S0, S1, P, R, place

pytestmark = pytest.mark.timeout(180)

_G = torch.Generator().manual_seed(7)
_X = torch.randn((5, 4), generator=_G)
_Y = torch.randn((5, 4), generator=_G)
_W = torch.rand((5, 4), generator=_G)
_PROBS = torch.rand((5, 4), generator=_G).clamp(0.02, 0.98)
_BITS = (torch.rand((5, 4), generator=_G) > 0.5).float()
_REDUCTIONS = ("none", "mean", "sum")
_POS = torch.tensor([0.5, 1.0, 2.0, 3.0])  # a torch pos_weight: sent beside the input

#: name, fn(F, input, target, weight, reduction), the placements tried for (input, target).
_POINTWISE: list[tuple[str, Callable[..., Any]]] = [
    ("mse_loss", lambda f, x, y, w, r: f.mse_loss(x, y, reduction=r)),
    ("mse_loss weighted", lambda f, x, y, w, r: f.mse_loss(x, y, reduction=r, weight=w)),
    ("l1_loss", lambda f, x, y, w, r: f.l1_loss(x, y, reduction=r)),
    ("l1_loss weighted", lambda f, x, y, w, r: f.l1_loss(x, y, reduction=r, weight=w)),
    ("smooth_l1_loss", lambda f, x, y, w, r: f.smooth_l1_loss(x, y, reduction=r, beta=0.5)),
    ("smooth_l1_loss beta 0", lambda f, x, y, w, r: f.smooth_l1_loss(x, y, reduction=r, beta=0)),
    ("huber_loss", lambda f, x, y, w, r: f.huber_loss(x, y, reduction=r, delta=0.7)),
    ("huber_loss weighted", lambda f, x, y, w, r: f.huber_loss(x, y, r, 0.7, weight=w)),
    (
        "binary_cross_entropy",
        lambda f, x, y, w, r: f.binary_cross_entropy(_sig(f, x), _sig(f, y), w, reduction=r),
    ),
    (
        "binary_cross_entropy_with_logits",
        lambda f, x, y, w, r: f.binary_cross_entropy_with_logits(x, _sig(f, y), reduction=r),
    ),
    (
        "binary_cross_entropy_with_logits pos_weight",
        lambda f, x, y, w, r: f.binary_cross_entropy_with_logits(
            x, _sig(f, y), w, reduction=r, pos_weight=_POS
        ),
    ),
    ("kl_div", lambda f, x, y, w, r: f.kl_div(x.log_softmax(1), y.softmax(1), reduction=r)),
    (
        "kl_div log_target",
        lambda f, x, y, w, r: f.kl_div(x, y.log_softmax(1), reduction=r, log_target=True),
    ),
]


def _sig(f: Any, t: Any) -> Any:
    return t.sigmoid()


def _layouts(mesh_shape: tuple[int, ...]) -> list[list[Any]]:
    """A few placements of a (5, 4) tensor on a mesh: batch sharded, both dims, replicated."""
    first = [S0, S1, R]
    out = []
    for i in range(len(first)):
        out.append([first[(i + m) % len(first)] for m in range(len(mesh_shape))])
    return out


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("name", "fn"), _POINTWISE, ids=[c[0] for c in _POINTWISE])
def test_pointwise_losses_every_reduction(
    name: str, fn: Callable[..., Any], mesh_shape: tuple[int, ...], graph: dtorch.Graph
) -> None:
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # kl_div's 'mean' warning, in both
        for placements in _layouts(mesh_shape):
            x, y, w = (place(t, mesh, placements, graph) for t in (_X, _Y, _W))
            for reduction in _REDUCTIONS:
                want = fn(F, _X, _Y, _W, reduction)
                try:
                    got = fn(DF, x, y, w, reduction)
                except PlacementError as error:  # a dim the softmax or a gather needs whole
                    assert name.startswith("kl_div") and "S(1)" in str(error), error
                    continue
                context = f"{name} {reduction} on {mesh_shape} {placements}"
                assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape), context
                torch.testing.assert_close(got.to_torch(), want, msg=context)


def test_kl_div_batchmean_and_legacy_flags(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    x, y = place(_X.log_softmax(1), mesh, [S0], graph), place(_Y.softmax(1), mesh, [S0], graph)
    want = F.kl_div(_X.log_softmax(1), _Y.softmax(1), reduction="batchmean")
    torch.testing.assert_close(DF.kl_div(x, y, reduction="batchmean").to_torch(), want)
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size") as kl:
        DF.kl_div(x, y)
    with pytest.warns(UserWarning, match="Using a target size") as sizes:
        DF.mse_loss(x, place(_Y[:1], mesh, [R], graph))
    assert {w.filename for w in [*kl, *sizes]} == {__file__}  # the caller's line
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        legacy = DF.mse_loss(x, y, size_average=False)
    torch.testing.assert_close(
        legacy.to_torch(), F.mse_loss(_X.log_softmax(1), _Y.softmax(1), reduction="sum")
    )


_LOGITS_3D = torch.randn((4, 5, 3), generator=_G)
_TARGETS_3D = torch.randint(0, 5, (4, 3), generator=_G)
_TARGETS_3D[0, 1] = -100
_TARGETS = torch.tensor([0, 3, -100, 1, 3])
_CLASS_WEIGHTS = torch.rand(4, generator=_G) + 0.5

#: name, fn(F, logits, targets, weight, reduction) on (5, 4) logits and (5,) targets.
_CLASSIFICATION: list[tuple[str, Callable[..., Any]]] = [
    ("cross_entropy", lambda f, x, t, w, r: f.cross_entropy(x, t, reduction=r)),
    ("cross_entropy weighted", lambda f, x, t, w, r: f.cross_entropy(x, t, w, reduction=r)),
    (
        "cross_entropy smoothed",
        lambda f, x, t, w, r: f.cross_entropy(x, t, reduction=r, label_smoothing=0.2),
    ),
    (
        "cross_entropy weighted smoothed",
        lambda f, x, t, w, r: f.cross_entropy(x, t, w, reduction=r, label_smoothing=0.3),
    ),
    (
        "cross_entropy ignore_index 3",
        lambda f, x, t, w, r: f.cross_entropy(x, t.clamp(min=0), w, ignore_index=3, reduction=r),
    ),
    ("nll_loss", lambda f, x, t, w, r: f.nll_loss(x.log_softmax(1), t, reduction=r)),
    ("nll_loss weighted", lambda f, x, t, w, r: f.nll_loss(x.log_softmax(1), t, w, reduction=r)),
    (
        "cross_entropy probabilities",
        lambda f, x, t, w, r: f.cross_entropy(x, (x * 2).softmax(1), reduction=r),
    ),
    (
        "cross_entropy probabilities weighted smoothed",
        lambda f, x, t, w, r: f.cross_entropy(
            x, (x * 2).softmax(1), w, reduction=r, label_smoothing=0.1
        ),
    ),
]


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("name", "fn"), _CLASSIFICATION, ids=[c[0] for c in _CLASSIFICATION])
def test_classification_losses_batch_sharded(
    name: str, fn: Callable[..., Any], mesh_shape: tuple[int, ...], graph: dtorch.Graph
) -> None:
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    batch = [S0 if m == 0 else R for m in range(len(mesh_shape))]
    for x_pl, t_pl in (
        (batch, batch),
        (batch, [R] * len(mesh_shape)),
        ([R] * len(mesh_shape),) * 2,
    ):
        x = place(_X, mesh, x_pl, graph)
        t = place(_TARGETS, mesh, t_pl, graph)
        w = place(_CLASS_WEIGHTS, mesh, [R] * len(mesh_shape), graph)
        for reduction in _REDUCTIONS:
            want = fn(F, _X, _TARGETS, _CLASS_WEIGHTS, reduction)
            got = fn(DF, x, t, w, reduction)
            context = f"{name} {reduction} on {mesh_shape} {x_pl} {t_pl}"
            assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape), context
            torch.testing.assert_close(got.to_torch(), want, msg=context)


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("name", "fn"), _CLASSIFICATION, ids=[c[0] for c in _CLASSIFICATION])
def test_classification_losses_class_sharded(
    name: str, fn: Callable[..., Any], mesh_shape: tuple[int, ...], graph: dtorch.Graph
) -> None:
    """Vocab-parallel: the class dim sharded on the first mesh dim (4 classes over 3 devices
    leave one empty), the batch on a second, the classes again (nested) on a third; the
    targets Replicate where the classes are sharded, the weights Replicate or sharded as the
    classes are."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    x_pl = [S1, S0, S1][: len(mesh_shape)]
    t_pl = [R, S0, R][: len(mesh_shape)]
    for w_pl in ([R] * len(mesh_shape), [S0 if p == S1 else R for p in x_pl]):
        x, t = place(_X, mesh, x_pl, graph), place(_TARGETS, mesh, t_pl, graph)
        w = place(_CLASS_WEIGHTS, mesh, w_pl, graph)
        for reduction in _REDUCTIONS:
            want = fn(F, _X, _TARGETS, _CLASS_WEIGHTS, reduction)
            got = fn(DF, x, t, w, reduction)
            context = f"{name} {reduction} on {mesh_shape} {x_pl} {t_pl} {w_pl}"
            assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape), context
            torch.testing.assert_close(got.to_torch(), want, msg=context)


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_class_weights_sharded_beside_any_logits(smoothing: float, graph: dtorch.Graph) -> None:
    """Class weights sharded on a mesh dim that shards the logits' batch (gathered: C
    numbers; label smoothing refused it) or their classes, one class among them (its weight
    reshaped to (1, 1) kept the shard on the wrong dim, and expand refused it)."""
    for classes in (1, 4):
        x = torch.randn((3, classes, 2), generator=_G)
        t = torch.randint(0, classes, (3, 2), generator=_G)
        w = torch.rand(classes, generator=_G) + 0.5
        for mesh_shape, x_pl in (((2,), [S0]), ((2,), [S1]), ((2, 2), [S0, S1])):
            mesh = dtorch.init_device_mesh("cpu", mesh_shape)
            w_pl = [S0] * len(mesh_shape)
            for reduction in _REDUCTIONS:
                got = DF.cross_entropy(
                    place(x, mesh, x_pl, graph), place(t, mesh, [R] * len(mesh_shape), graph),
                    place(w, mesh, w_pl, graph), reduction=reduction, label_smoothing=smoothing,
                )  # fmt: skip
                want = F.cross_entropy(x, t, w, reduction=reduction, label_smoothing=smoothing)
                context = f"C={classes} {reduction} on {mesh_shape} {x_pl}"
                torch.testing.assert_close(got.to_torch(), want, msg=context)


def test_vocab_parallel_losses_move_no_logits(graph: dtorch.Graph) -> None:
    """A cross entropy of vocab-sharded logits runs one split log-softmax and redistributes
    nothing larger than one number per row: the logits are never gathered."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    logits = torch.randn((6, 1000), generator=_G)
    targets = torch.randint(0, 1000, (6,), generator=_G)
    x, t = place(logits, mesh, [S1], graph), place(targets, mesh, [R], graph)
    with dtorch.profile(graph) as prof:
        loss = DF.cross_entropy(x, t, reduction="none", label_smoothing=0.1)
        got = loss.to_torch()
    want = F.cross_entropy(logits, targets, reduction="none", label_smoothing=0.1)
    torch.testing.assert_close(got, want)
    kinds = [e.kind for e in prof.events]
    assert OpKind.SplitSoftmax in kinds and OpKind.Softmax not in kinds
    moved = [e.shape for e in prof.events if e.kind is OpKind.Convert]
    assert moved and all(math.prod(shape) <= 6 for shape in moved), moved


@pytest.mark.parametrize("reduction", _REDUCTIONS)
def test_cross_entropy_of_spatial_and_one_dim_inputs(reduction: str, graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x = place(_LOGITS_3D, mesh, [S0, R], graph)
    t = place(_TARGETS_3D, mesh, [S0, S1], graph)  # the target's dim 1 is the input's dim 2
    w = place(_CLASS_WEIGHTS.repeat(2)[:5], mesh, [R, R], graph)
    for smoothing in (0.0, 0.25):
        want = F.cross_entropy(
            _LOGITS_3D, _TARGETS_3D, _CLASS_WEIGHTS.repeat(2)[:5], reduction=reduction,
            label_smoothing=smoothing,
        )  # fmt: skip
        got = DF.cross_entropy(x, t, w, reduction=reduction, label_smoothing=smoothing)
        torch.testing.assert_close(got.to_torch(), want)
    one = place(_X[0], mesh, [R, R], graph)
    got = DF.cross_entropy(one, place(torch.tensor(2), mesh, [R, R], graph), reduction=reduction)
    torch.testing.assert_close(
        got.to_torch(), F.cross_entropy(_X[0], torch.tensor(2), reduction=reduction)
    )


def test_all_targets_ignored_give_nan_as_torch(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    ignored = torch.full((5,), -100)
    want = F.cross_entropy(_X, ignored)
    got = DF.cross_entropy(place(_X, mesh, [S0], graph), place(ignored, mesh, [S0], graph))
    assert want.isnan() and got.to_torch().isnan()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_losses_keep_torchs_dtypes(dtype: torch.dtype, graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = place(_X.to(dtype), mesh, [S0], graph)
    y = place(_Y, mesh, [S0], graph)  # float32: the result promotes as torch's
    t = place(_TARGETS, mesh, [S0], graph)
    cases = [
        (DF.mse_loss(x, y), F.mse_loss(_X.to(dtype), _Y)),
        (DF.cross_entropy(x, t), F.cross_entropy(_X.to(dtype), _TARGETS)),
        (DF.cross_entropy(x, y.softmax(1)), F.cross_entropy(_X.to(dtype), _Y.softmax(1))),
        (
            DF.binary_cross_entropy_with_logits(x, y.sigmoid()),
            F.binary_cross_entropy_with_logits(_X.to(dtype), _Y.sigmoid()),
        ),
    ]  # fmt: skip
    for got, want in cases:
        assert got.dtype == want.dtype
        torch.testing.assert_close(got.to_torch(), want, atol=2e-2, rtol=2e-2)
    for shape in ((), (3,)):  # a 0-d probability kept its dtype only where the log's clamp did
        p, q = torch.full(shape, 0.3, dtype=dtype), torch.full(shape, 1.0, dtype=dtype)
        got = DF.binary_cross_entropy(place(p, mesh, [R], graph), place(q, mesh, [R], graph))
        want = F.binary_cross_entropy(p, q)
        assert got.dtype == want.dtype and torch.equal(got.to_torch(), want), shape


@pytest.mark.parametrize("reduction", _REDUCTIONS)
def test_probability_targets_promote_with_a_weight_of_another_dtype(
    reduction: str, graph: dtorch.Graph
) -> None:
    """Class probabilities multiply by the weights, promoting as torch's (a float64 weight
    makes a float64 loss); class indices keep torch's refusal of a weight of another dtype."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    weight = torch.rand(
        _X.shape[1], dtype=torch.float64, generator=torch.Generator().manual_seed(3)
    )
    for probs in (_Y.softmax(1), _Y.softmax(1).bfloat16()):
        want = F.cross_entropy(_X, probs, weight=weight, reduction=reduction, label_smoothing=0.1)
        got = DF.cross_entropy(
            place(_X, mesh, [S0], graph),
            place(probs, mesh, [S0], graph),
            weight=weight,
            reduction=reduction,
            label_smoothing=0.1,
        )
        assert got.dtype == want.dtype == torch.float64
        torch.testing.assert_close(got.to_torch(), want, atol=1e-2, rtol=1e-2)
    with pytest.raises(DtypeError, match="expected scalar type Float but found Double"):
        DF.cross_entropy(place(_X, mesh, [S0], graph), place(_TARGETS, mesh, [S0], graph), weight)


def test_refusals_follow_torch(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    x, t = place(_X, mesh, [R], graph), place(_TARGETS, mesh, [R], graph)
    with pytest.raises(ValueError, match="avg is not a valid value for reduction"):
        DF.mse_loss(x, x, reduction="avg")
    with pytest.raises(DtypeError, match="expected target dtype to be Long or Byte, but got Int"):
        DF.cross_entropy(x, t.int())
    with pytest.raises(ValueError, match=r"Expected input batch_size \(5\) to match target"):
        DF.cross_entropy(x, t[:3])
    with pytest.raises(DtypeError, match="not implemented for 'Long'"):
        DF.cross_entropy(t.reshape(5, 1).expand(5, 2), t)
    with pytest.raises(DtypeError, match="mse_loss: torch rejects these dtypes"):
        DF.mse_loss(t, t)
    with pytest.raises(ValueError, match=r"label_smoothing must be between 0\.0 and 1\.0"):
        DF.cross_entropy(x, t, label_smoothing=1.5)
    with pytest.raises(RuntimeError, match="weight tensor should be defined either for all 4"):
        DF.cross_entropy(x, t, place(torch.ones(3), mesh, [R], graph))
    with pytest.raises(ValueError, match="Weights and input must have the same size"):
        DF.mse_loss(x, x, weight=place(torch.ones(4), mesh, [R], graph))
    with pytest.raises(ShapeError, match="class-probability targets must have the input's shape"):
        DF.cross_entropy(x, x[:, :2].softmax(1))
    with pytest.raises(PlacementError, match=r"^cross_entropy: got \(P,\)"):
        DF.cross_entropy(place(_X, mesh, [P], graph), t)  # a softmax is not linear
    with pytest.raises(PlacementError, match=r"^mse_loss: got \(P,\)"):
        DF.mse_loss(place(_X, mesh, [P], graph), x)


def test_torch_tensor_weights_and_targets_are_taken_beside_the_input(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = place(_X, mesh, [S0], graph)
    got = DF.cross_entropy(x, _TARGETS, _CLASS_WEIGHTS, label_smoothing=0.1)
    torch.testing.assert_close(
        got.to_torch(), F.cross_entropy(_X, _TARGETS, _CLASS_WEIGHTS, label_smoothing=0.1)
    )


def test_one_hot(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    full = torch.tensor([[0, 3, 1], [2, 2, 0]])
    t = place(full, mesh, [S0, S1], graph)
    for classes in (-1, 4, 6):
        got, want = DF.one_hot(t, classes), F.one_hot(full, classes)
        assert got.dtype == want.dtype and got.placements == [S0, S1]
        assert torch.equal(got.to_torch(), want)
    assert torch.equal(
        DF.one_hot(place(full[:0], mesh, [R, R], graph), 3).to_torch(), F.one_hot(full[:0], 3)
    )
    for bad, args, match in [
        (full, (3,), "Class values must be smaller than num_classes"),
        (full - 1, (), "Class values must be non-negative"),
        (full[:0], (), "Can not infer total number of classes from empty tensor"),
        (full[:0], (0,), "Can not infer total number of classes from empty tensor"),
    ]:
        with pytest.raises(RuntimeError, match=match):
            F.one_hot(bad, *args)
        with pytest.raises(RuntimeError, match=match):
            DF.one_hot(place(bad, mesh, [R, R], graph), *args)
    with pytest.raises(DtypeError, match="only applicable to index tensor of type LongTensor"):
        DF.one_hot(place(full.int(), mesh, [R, R], graph))


def test_edge_cases_found_by_review_and_fuzz(graph: dtorch.Graph) -> None:
    """An ignored target beside a -inf class-0 log-probability (masked logits) is 0, not NaN;
    uint8 targets compare with ignore_index in int64 (156 is no ignored -100); a BCE weight
    keeps the loss's dtype and may not broadcast it larger; integer inputs where torch sums
    them; torch's refusals of a class weight of another dtype, of ignore_index with class
    probabilities and of uint8 targets of spatial inputs."""
    mesh = dtorch.init_device_mesh("cpu", 2)

    def d(t: torch.Tensor) -> Any:
        return place(t, mesh, [R], graph)

    inf = float("inf")
    masked = torch.tensor([[-inf, 2.0, 1.0], [0.5, 0.1, -0.3]])
    for smoothing in (0.0, 0.2):
        want = F.cross_entropy(masked, torch.tensor([-100, 2]), label_smoothing=smoothing)
        got = DF.cross_entropy(d(masked), d(torch.tensor([-100, 2])), label_smoothing=smoothing)
        torch.testing.assert_close(got.to_torch(), want)
    wide, bytes_ = torch.zeros(2, 200), torch.tensor([156, 3], dtype=torch.uint8)
    want = F.cross_entropy(wide, bytes_, reduction="none")
    torch.testing.assert_close(
        DF.cross_entropy(d(wide), d(bytes_), reduction="none").to_torch(), want
    )
    x, y = torch.randn(2, 3, generator=_G), torch.rand(2, 3, generator=_G).half()
    got = DF.binary_cross_entropy_with_logits(d(x), d(y), weight=torch.ones(3))
    assert got.dtype == F.binary_cross_entropy_with_logits(x, y, weight=torch.ones(3)).dtype
    with pytest.raises(ShapeError, match=r"output with shape \[3\] doesn't match the broadcast"):
        DF.binary_cross_entropy(d(torch.rand(3)), d(torch.rand(3)), weight=torch.rand(2, 3))
    ints, other = torch.tensor([1, 5, -2]), torch.tensor([0, 1, 1])
    for got, want in [
        (DF.l1_loss(d(ints), d(other), reduction="sum"), F.l1_loss(ints, other, reduction="sum")),
        (
            DF.mse_loss(d(ints), d(other), weight=torch.ones(3)),
            F.mse_loss(ints, other, weight=torch.ones(3)),
        ),
    ]:
        assert got.dtype == want.dtype and torch.allclose(got.to_torch(), want)
    with pytest.raises(DtypeError, match="expected scalar type Float but found Double"):
        DF.cross_entropy(d(_X), d(_TARGETS), weight=torch.ones(4, dtype=torch.float64))
    with pytest.raises(ParamError, match="ignore_index is not supported for floating point target"):
        DF.cross_entropy(d(_X), d(_X.softmax(1)), ignore_index=1)
    spatial = torch.zeros(2, 2, 2, dtype=torch.uint8)
    with pytest.raises(DtypeError, match="expected scalar type Long but found Byte"):
        DF.nll_loss(
            d(_LOGITS_3D[:2, :3, :2].unsqueeze(-1).expand(2, 3, 2, 2).log_softmax(1)), d(spatial)
        )


def test_a_refusal_inside_a_loss_names_the_call_s_tensors(graph: dtorch.Graph) -> None:
    """A loss is made of steps, and a refused step names its own operands (here an
    intermediate sharded on the classes): the message ends with the placements the user
    passed, so the hint to redistribute is about tensors they have."""
    mesh = dtorch.init_device_mesh("cpu", 4)
    x, target = (
        place(_X, mesh, [S1], graph),
        place(torch.tensor([0, 1, 2, 3, 0]), mesh, [S0], graph),
    )
    weight = place(torch.rand(_X.shape[1]), mesh, [R], graph)
    with pytest.raises(PlacementError) as refused:  # the classes split, the targets too
        DF.nll_loss(x, target, weight=weight)
    assert str(refused.value).endswith(
        "(the call's tensors: input (S(1),), target (S(0),), weight (R,))"
    )


def test_a_loss_made_of_another_names_the_call_s_tensors_once(graph: dtorch.Graph) -> None:
    """smooth_l1_loss with beta 0 is l1_loss: the inner loss's suffix was repeated."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x, y = place(_X, mesh, [P], graph), place(_Y, mesh, [R], graph)
    with pytest.raises(PlacementError) as refused:
        DF.smooth_l1_loss(x, y, beta=0.0)
    assert str(refused.value).count("(the call's tensors:") == 1

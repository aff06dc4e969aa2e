"""``dtorch.nn.functional.embedding_bag`` and ``dtorch.nn.EmbeddingBag`` against torch on the
full tensors, on 1-D, 2-D and 3-D meshes, even and uneven: the one-mesh-dim table (bags of
2-D ids sharded, the embedding dim sharded, the vocab sharded or a Partial weight giving a
Partial for sum and mean), torch's values bit for bit wherever each device holds whole bags
and whole rows, and torch's refusals."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import dtorch
import dtorch.nn.functional as DF
from dtorch.errors import ParamError, PlacementError, ShapeError
from tests.api.ops_harness import ALL_MESHES, S0, S1, P, R, compare, limit_for, place, run_api

pytestmark = pytest.mark.timeout(120)

_G = torch.Generator().manual_seed(17)
_WEIGHT = torch.randn(11, 6, generator=_G)
_IDS = torch.randint(0, 11, (5, 4), generator=_G)
_FLAT = torch.randint(0, 11, (9,), generator=_G)
_OFFSETS = torch.tensor([0, 3, 3, 7])  # an empty bag among them
_MODES = ("sum", "mean", "max")


def _table(mode: str, offsets: bool) -> dict[tuple[Any, ...], Any]:
    table: dict[tuple[Any, ...], Any] = {(R, R): R, (R, S1): S1}
    if not offsets:
        table[(S0, R)] = S0
    if mode != "max":
        table.update({(R, S0): P, (R, P): P})
    return {row + (R,) * offsets: out for row, out in table.items()}


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize("padding_idx", [None, 3])
@pytest.mark.parametrize("mode", _MODES)
def test_bags_of_2d_ids(mode: str, padding_idx: int | None, mesh_shape, graph) -> None:  # type: ignore[no-untyped-def]
    want = F.embedding_bag(_IDS, _WEIGHT, mode=mode, padding_idx=padding_idx)
    run_api(
        graph,
        "embedding_bag",
        lambda ids, w: DF.embedding_bag(ids, w, mode=mode, padding_idx=padding_idx),
        [_IDS, _WEIGHT],
        mesh_shape,
        [want],
        table=_table(mode, offsets=False),
        limit=limit_for(mesh_shape, n_d=10),
        exact=mode == "max",  # a vocab-split sum adds its parts in another order
    )


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize("include_last_offset", [False, True])
@pytest.mark.parametrize("mode", _MODES)
def test_bags_of_1d_ids_with_offsets(mode, include_last_offset, mesh_shape, graph) -> None:  # type: ignore[no-untyped-def]
    offsets = torch.cat([_OFFSETS, torch.tensor([9])]) if include_last_offset else _OFFSETS
    kw = {"mode": mode, "include_last_offset": include_last_offset, "padding_idx": 2}
    want = F.embedding_bag(_FLAT, _WEIGHT, offsets, **kw)
    run_api(
        graph,
        "embedding_bag",
        lambda ids, w, o: DF.embedding_bag(ids, w, o, **kw),
        [_FLAT, _WEIGHT, offsets],
        mesh_shape,
        [want],
        table=_table(mode, offsets=True),
        limit=limit_for(mesh_shape, n_d=10),
        exact=mode == "max",
    )


@pytest.mark.parametrize(
    ("ids", "w", "psw", "out"),
    [(R, R, R, R), (S0, R, S0, S0), (S0, R, R, S0), (R, S1, R, S1), (R, S0, R, P), (R, P, R, P)],
)
def test_per_sample_weights(ids, w, psw, out, graph) -> None:  # type: ignore[no-untyped-def]
    weights = torch.rand(5, 4, generator=_G)
    mesh = dtorch.init_device_mesh("cpu", 2)
    got = DF.embedding_bag(
        place(_IDS, mesh, [ids], graph), place(_WEIGHT, mesh, [w], graph), mode="sum",
        per_sample_weights=place(weights, mesh, [psw], graph),
    )  # fmt: skip
    assert got.placements == [out]
    want = F.embedding_bag(_IDS, _WEIGHT, mode="sum", per_sample_weights=weights)
    compare(got.to_torch(), want, out != P, "per_sample_weights")


@pytest.mark.parametrize("placements", [[R], [S0], [S1]])
@pytest.mark.parametrize("mode", _MODES)
def test_whole_bags_and_rows_are_torchs_bits(mode: str, placements, graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", 2)
    ids = place(_IDS, mesh, [R] if placements == [S1] else placements, graph)
    weight = place(_WEIGHT, mesh, [R] if placements != [S1] else placements, graph)
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        got = DF.embedding_bag(ids, weight.to(dtype), mode=mode, padding_idx=1)
        want = F.embedding_bag(_IDS, _WEIGHT.to(dtype), mode=mode, padding_idx=1)
        compare(got.to_torch(), want, True, f"{mode} {dtype}")


def test_max_norm_renormalises_the_rows_in_place(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    ours = place(_WEIGHT * 3, mesh, [S0], graph)
    theirs = _WEIGHT * 3
    got = DF.embedding_bag(_IDS, ours, mode="sum", max_norm=2.0, norm_type=1.5)
    want = F.embedding_bag(_IDS, theirs, mode="sum", max_norm=2.0, norm_type=1.5)
    compare(got.to_torch(), want, False, "max_norm")
    compare(ours.to_torch(), theirs, False, "the weight")  # a 1.5-norm: dtorch's own norm
    assert ours.placements == [S0]


def test_legacy_argument_order_warns_as_torch(graph: dtorch.Graph) -> None:
    weight = place(_WEIGHT, dtorch.init_device_mesh("cpu", 2), [R], graph)
    with pytest.warns(UserWarning, match="Argument order of nn.functional.embedding_bag"):
        got = DF.embedding_bag(weight, _IDS)
    compare(got.to_torch(), F.embedding_bag(_IDS, _WEIGHT), True, "legacy order")


_REFUSALS: list[tuple[str, Callable[[Any, Any], Any], type[Exception], str]] = [
    ("mode", lambda ids, w: F.embedding_bag(ids, w, mode="median"), ParamError, "one of sum"),
    ("weights with mean", lambda ids, w: F.embedding_bag(ids, w, per_sample_weights=ids * 1.0),
     NotImplementedError, "only supported for mode='sum'"),
    ("2-d ids with offsets", lambda ids, w: F.embedding_bag(ids, w, torch.tensor([0])),
     ShapeError, "offsets has to be None"),
    ("1-d ids without", lambda ids, w: F.embedding_bag(ids[0], w), ShapeError, "1D Tensor"),
    ("3-d ids", lambda ids, w: F.embedding_bag(ids[None], w), ShapeError, "1D or 2D"),
    ("1-d weight", lambda ids, w: F.embedding_bag(ids, w[0]), ShapeError, "2D Tensor"),
    ("weights' shape", lambda ids, w: F.embedding_bag(ids, w, mode="sum",
     per_sample_weights=torch.ones(3)), ShapeError, "same shape as the input"),
    ("padding_idx", lambda ids, w: F.embedding_bag(ids, w, padding_idx=11), ParamError,
     "within num_embeddings"),
    ("max of a vocab split", lambda ids, w: F.embedding_bag(ids, w.redistribute(
     w.device_mesh, [S0]) if isinstance(w, dtorch.Tensor) else w, mode="max"), PlacementError,
     "embedding_bag: got"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "call", "error", "text"), _REFUSALS, ids=[r[0] for r in _REFUSALS]
)
def test_refusals(case, call, error, text, graph) -> None:  # type: ignore[no-untyped-def]
    if error is not PlacementError:
        with pytest.raises((ValueError, RuntimeError, NotImplementedError, AssertionError)):
            call(_IDS, _WEIGHT)  # torch refuses it too
    mesh = dtorch.init_device_mesh("cpu", 2)
    with pytest.raises(error, match=text):
        call(place(_IDS, mesh, [R], graph), place(_WEIGHT, mesh, [R], graph))


@pytest.mark.parametrize(
    ("offsets", "last"),
    [(torch.tensor([1, 3]), False), (torch.tensor([0, 12]), False), (torch.tensor([0, 4]), True)],
)
def test_bad_offsets_are_refused(offsets: torch.Tensor, last: bool, graph: dtorch.Graph) -> None:
    """A torch tensor's offsets are checked at the call, a dtorch one's when the value is
    fetched. With ``include_last_offset`` the last must be the input's length: torch's kernels
    read a shorter one differently (some run the last bag to the end, some stop)."""
    if not last:
        with pytest.raises(RuntimeError):
            F.embedding_bag(_FLAT, _WEIGHT, offsets)
    mesh = dtorch.init_device_mesh("cpu", 2)
    for w in (R, S0):
        weight = place(_WEIGHT, mesh, [w], graph)
        with pytest.raises(RuntimeError, match="offset"):
            DF.embedding_bag(_FLAT, weight, offsets, mode="sum", include_last_offset=last)
        out = DF.embedding_bag(_FLAT, weight, place(offsets, mesh, [R], graph), mode="sum",
                               include_last_offset=last)  # fmt: skip
        with pytest.raises(dtorch.DTorchError, match="offset"):
            out.to_torch()


def test_no_bags_and_empty_bags(graph: dtorch.Graph) -> None:
    """No bags at all (torch's kernel crashes the process on them: not called), and 2-D ids
    of bags of length 0 (torch's step error)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    weight = place(_WEIGHT, mesh, [R], graph)
    with pytest.raises(RuntimeError, match="last offset must be the input's length 6"):
        DF.embedding_bag(torch.zeros(6, dtype=torch.long), weight, torch.tensor([0]),
                         mode="sum", include_last_offset=True)  # fmt: skip
    none = torch.zeros(0, dtype=torch.long)
    out = DF.embedding_bag(none, weight, torch.tensor([0]), mode="sum", include_last_offset=True)
    assert out.shape == (0, 6) and out.to_torch().shape == (0, 6)
    empty = DF.embedding_bag(torch.zeros(0, dtype=torch.long), weight,
                             torch.zeros(0, dtype=torch.long), padding_idx=1)  # fmt: skip
    assert empty.to_torch().shape == (0, 6)
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        F.embedding_bag(torch.zeros(3, 0, dtype=torch.long), _WEIGHT)
    with pytest.raises(ShapeError, match="step must be nonzero"):
        DF.embedding_bag(torch.zeros(3, 0, dtype=torch.long), weight)


def test_the_layer_is_torchs(graph: dtorch.Graph) -> None:
    kw: dict[str, Any] = {"mode": "sum", "padding_idx": 2, "include_last_offset": True}
    torch.manual_seed(4)
    theirs = torch.nn.EmbeddingBag(11, 6, **kw)
    torch.manual_seed(4)
    ours = dtorch.nn.EmbeddingBag(11, 6, **kw)
    assert repr(ours) == repr(theirs)
    compare(ours.weight.to_torch(), theirs.weight.detach(), True, "drawn weight")
    offsets = torch.cat([_OFFSETS, torch.tensor([9])])
    with torch.no_grad():
        want = theirs(_FLAT, offsets)
    compare(ours(_FLAT, offsets).to_torch(), want, True, "forward")
    loaded = dtorch.nn.EmbeddingBag(11, 6, mode="max")
    loaded.load_state_dict(theirs.state_dict())
    compare(loaded.weight.to_torch(), theirs.weight.detach(), True, "loaded")
    frozen = dtorch.nn.EmbeddingBag.from_pretrained(_WEIGHT, mode="max")
    assert frozen.weight.requires_grad is False
    compare(frozen(_IDS).to_torch(), F.embedding_bag(_IDS, _WEIGHT, mode="max"), True, "frozen")


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_2d_ids_ignore_include_last_offset_as_torch(mode: str, graph: dtorch.Graph) -> None:
    """torch takes every row of 2-D ids as a bag whatever ``include_last_offset`` says; so do
    the vocab-split devices (they count their bags from the rows, not from the flag)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    want = F.embedding_bag(_IDS, _WEIGHT, mode=mode, include_last_offset=True)
    for w in (R, S0):
        got = DF.embedding_bag(_IDS, place(_WEIGHT, mesh, [w], graph), mode=mode,
                               include_last_offset=True)  # fmt: skip
        compare(got.to_torch(), want, w == R, f"{mode} {w}")


def test_padding_idx_must_be_an_int(graph: dtorch.Graph) -> None:
    weight = place(_WEIGHT, dtorch.init_device_mesh("cpu", 2), [R], graph)
    for bad in (1.7, True):
        with pytest.raises(TypeError, match="padding_idx must be an int"):
            DF.embedding_bag(_IDS, weight, padding_idx=bad)

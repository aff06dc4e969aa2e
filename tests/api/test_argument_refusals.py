"""Arguments of unusual types and sizes, as an argument fuzz found them: refused at the call
where torch refuses them (an error of torch's class, naming the argument), taken where torch
takes them (numpy integers), never failing later on the devices, and never leaving a cache,
a tensor or the graph in a state that breaks a later valid call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import dtorch
import dtorch.nn.functional as DF
from dtorch.errors import MeshError, PlacementError

pytestmark = pytest.mark.timeout(60)

_X = torch.arange(12.0).reshape(4, 3)
_IMG = torch.arange(96.0).reshape(2, 3, 4, 4) / 10


def _on(graph: dtorch.Graph, t: torch.Tensor) -> dtorch.Tensor:
    return dtorch.from_torch(t, device_mesh=dtorch.init_device_mesh("cpu", 2), graph=graph)


def _healthy(graph: dtorch.Graph) -> None:
    """A valid operator after a refusal computes as torch."""
    assert (_on(graph, _X) * 2).to_torch().equal(_X * 2)


def test_a_refused_interpolate_leaves_no_answer_for_an_equal_valid_one(graph) -> None:
    """True, 1 and numpy's 1 are equal and hash alike: a cached refusal of one was the answer
    for another (and a cached success let a refused one reach the devices)."""
    x = _on(graph, _IMG)
    with pytest.raises(TypeError, match="align_corners must be a bool"):
        DF.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=np.int64(1))
    got = DF.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=True)
    want = F.interpolate(_IMG, scale_factor=2.0, mode="bilinear", align_corners=True)
    torch.testing.assert_close(got.to_torch(), want)
    DF.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False).to_torch()
    with pytest.raises(TypeError):
        F.interpolate(_IMG, scale_factor=2.0, mode="bilinear", align_corners=0)
    with pytest.raises(TypeError, match="align_corners must be a bool"):
        DF.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=0)


def test_an_int_beyond_int64_written_into_a_float_tensor_is_refused_at_the_call(graph) -> None:
    """It was accepted, failed on the devices, and the tensor could never be read again."""
    y = _on(graph, _X).clone()
    for value in (2**63, 2**64 - 1):
        with pytest.raises(ValueError, match="Overflow when unpacking long long"):
            _X.clone()[0] = value
        with pytest.raises(ValueError, match="Overflow when unpacking long long"):
            y[0] = value
    assert y.to_torch().equal(_X)
    y[0] = 2**62  # within int64: a float tensor takes it
    want = _X.clone()
    want[0] = 2**62
    assert y.to_torch().equal(want)


def test_tensor_split_refuses_more_sections_than_int64_or_than_it_records(graph) -> None:
    """2**63 sections built a list of 2**63 bounds (a hang); torch refuses it at once."""
    x = _on(graph, _X)
    with pytest.raises(ValueError, match="Overflow when unpacking long long"):
        torch.tensor_split(_X, 2**63)
    with pytest.raises(ValueError, match="does not fit in int64"):
        x.tensor_split(2**63)
    with pytest.raises(ValueError, match="accepted: at most 1,048,576 sections"):
        x.tensor_split(2**40)
    assert [p.shape[0] for p in x.tensor_split(5)] == [1, 1, 1, 1, 0]
    _healthy(graph)


def test_an_int64_arange_with_a_bound_beyond_int64_is_refused_at_the_call(graph) -> None:
    with pytest.raises(RuntimeError, match="cannot be converted to type int64_t"):
        torch.arange(0, 5, 2**63)
    with pytest.raises(RuntimeError, match="cannot be converted to type int64_t"):
        dtorch.arange(0, 5, 2**63, graph=graph)
    got = dtorch.arange(0, 5, 2**63, dtype=torch.float32, graph=graph)  # a float one takes it
    assert got.to_torch().equal(torch.arange(0, 5, 2**63, dtype=torch.float32))
    _healthy(graph)


def test_logit_with_a_nan_eps_clamps_nothing_as_torch(graph) -> None:
    p = torch.tensor([0.0, 0.3, 1.0, 0.5])
    got = dtorch.logit(_on(graph, p), float("nan")).to_torch()
    torch.testing.assert_close(got, torch.logit(p, float("nan")))


#: (what, dtorch's call, torch's call or None (dtorch's own check), the error's class, words).
_REFUSED: list[tuple[str, Callable[..., Any], Callable[..., Any] | None, type, str]] = [
    ("size of a tuple", lambda t, i: t.size(()), lambda t, i: t.size(()), TypeError,
     "argument 'dim' must be int, not tuple"),
    ("one_hot of inf classes", lambda t, i: DF.one_hot(t.long(), float("inf")),
     lambda t, i: F.one_hot(t.long(), float("inf")), TypeError, "num_classes must be an int"),
    ("group_norm of 1.5 groups", lambda t, i: DF.group_norm(i, 1.5),
     lambda t, i: F.group_norm(i, 1.5), TypeError, "num_groups must be an int"),
    ("dropout's training a str", lambda t, i: DF.dropout(t, 0.5, training="no"),
     lambda t, i: F.dropout(t, 0.5, training="no"), TypeError, "training must be a bool"),
    ("nonzero's as_tuple a str", lambda t, i: t.nonzero(as_tuple="no"),
     lambda t, i: t.nonzero(as_tuple="no"), TypeError, "as_tuple must be a bool"),
    ("batch_norm training with eps 0", lambda t, i: DF.batch_norm(i, None, None, training=True,
     eps=0.0), lambda t, i: F.batch_norm(i, None, None, training=True, eps=0.0), ValueError,
     "eps must be positive during training"),
    ("batch_norm's momentum a str", lambda t, i: DF.batch_norm(i, None, None, training=True,
     momentum="a"), lambda t, i: F.batch_norm(i, None, None, training=True, momentum="a"),
     TypeError, "momentum must be a number"),
    ("interpolate to no pixels", lambda t, i: DF.interpolate(i, scale_factor=0.1,
     mode="bilinear"), lambda t, i: F.interpolate(i, scale_factor=0.1, mode="bilinear"),
     RuntimeError, "output sizes should be greater than 0"),
    ("kl_div's log_target a str",
     lambda t, i: DF.kl_div(t, t, reduction="sum", log_target="no"),
     lambda t, i: F.kl_div(t, t, reduction="sum", log_target="no"), TypeError,
     "log_target must be a bool"),
    ("nll_loss's ignore_index 1.5", lambda t, i: DF.nll_loss(t, (t[:, 0] % 3).long(),
     ignore_index=1.5), lambda t, i: F.nll_loss(t, (t[:, 0] % 3).long(), ignore_index=1.5),
     TypeError, "ignore_index must be an int"),
    ("Conv2d's kernel 1.5", lambda t, i: dtorch.nn.Conv2d(3, 2, 1.5),
     lambda t, i: torch.nn.Conv2d(3, 2, 1.5), TypeError, "kernel_size must be an int"),
    ("tril's diagonal beyond int64", lambda t, i: t.tril(2**63), lambda t, i: t.tril(2**63),
     ValueError, "does not fit in int64"),
    ("diag_embed's offset beyond int64", lambda t, i: dtorch.diag_embed(t, 2**63),
     lambda t, i: torch.diag_embed(t, 2**63), ValueError, "does not fit in int64"),
    ("sum over a numpy array", lambda t, i: t.sum(np.array([1])),
     lambda t, i: t.sum(np.array([1])), TypeError, "sum: dim must be an int"),
    ("adaptive pooling to one size", lambda t, i: DF.adaptive_avg_pool2d(i, [1]),
     lambda t, i: F.adaptive_avg_pool2d(i, [1]), RuntimeError, "output_size must be 2"),
    ("cosine_similarity's eps -1", lambda t, i: DF.cosine_similarity(t, t, eps=-1.0),
     lambda t, i: F.cosine_similarity(t, t, eps=-1.0), RuntimeError, "eps must be non-negative"),
    ("isclose's rtol nan", lambda t, i: dtorch.isclose(t, t, rtol=float("nan")),
     lambda t, i: torch.isclose(t, t, rtol=float("nan")), RuntimeError,
     "rtol must be greater than or equal to zero"),
    ("huber_loss's delta nan", lambda t, i: DF.huber_loss(t, t, delta=float("nan")),
     lambda t, i: F.huber_loss(t, t, delta=float("nan")), RuntimeError, "non-positive values"),
    ("smooth_l1_loss's beta nan", lambda t, i: DF.smooth_l1_loss(t, t, beta=float("nan")),
     lambda t, i: F.smooth_l1_loss(t, t, beta=float("nan")), RuntimeError, "negative values"),
    ("logsumexp over None", lambda t, i: t.logsumexp(None), lambda t, i: t.logsumexp(None),
     TypeError, "argument 'dim' must be an int or a tuple of ints, not None"),
    ("argmax over a list", lambda t, i: t.argmax(dim=[1]), lambda t, i: t.argmax(dim=[1]),
     TypeError, "argument 'dim' must be int, not list"),
    ("eye of a str", lambda t, i: dtorch.eye("a"), lambda t, i: torch.eye("a"), TypeError,
     "eye: n must be an int"),
    ("linspace of str steps", lambda t, i: dtorch.linspace(0, 1, "a"),
     lambda t, i: torch.linspace(0, 1, "a"), TypeError, "linspace: steps must be an int"),
    ("dim names not iterable",
     lambda t, i: dtorch.init_device_mesh("cpu", 2, ("a",)).check_all_dim_names_in_set(None),
     None, MeshError, "names must be a name or an iterable of names"),
    ("placements not a list", lambda t, i: dtorch.zeros(4, placements=0), None,
     PlacementError, "placements must be a list of one placement per mesh dimension"),
    ("a mesh shape of a dict", lambda t, i: dtorch.init_device_mesh("cpu", {}), None, MeshError,
     "mesh_shape must be a positive int"),
    ("unbind of a nested list", lambda t, i: dtorch.init_device_mesh("cpu", (2, 2)).unbind([[0]]),
     None, MeshError, "a mesh dimension is a name or an int"),
]  # fmt: skip


@pytest.mark.parametrize(("what", "ours", "theirs", "kind", "words"), _REFUSED,
                         ids=[case[0] for case in _REFUSED])  # fmt: skip
def test_refused_at_the_call_as_torch_refuses(what, ours, theirs, kind, words, graph) -> None:
    if theirs is not None:
        with pytest.raises(kind):
            theirs(_X, _IMG)
    with pytest.raises(kind, match=words):
        ours(_on(graph, _X), _on(graph, _IMG))
    _healthy(graph)


#: (what, a call of the tensor module given as ``m`` on the tensor ``t``): numpy integers where
#: torch takes them (several were refused, some with numpy's or Python's own words).
_NUMPY_INTS: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("roll's dims", lambda m, t: m.roll(t, 1, np.int64(0))),
    ("movedim's source", lambda m, t: m.movedim(t, np.int64(0), 1)),
    ("max's dim", lambda m, t: m.max(t, np.int64(1)).values),
    ("tril's diagonal", lambda m, t: m.tril(t, np.int64(1))),
    ("diagonal's offset", lambda m, t: m.diagonal(t, np.int64(1))),
    ("diag_embed's offset", lambda m, t: m.diag_embed(t, np.int64(-1))),
]


@pytest.mark.parametrize(("what", "call"), _NUMPY_INTS, ids=[case[0] for case in _NUMPY_INTS])
def test_numpy_integers_are_taken_as_torch_takes_them(what, call, graph) -> None:
    got = call(dtorch, _on(graph, _X)).to_torch()
    assert got.equal(call(torch, _X))


def test_one_element_integer_tensors_are_sizes_as_torch_takes_them(graph) -> None:
    """torch reads a size from a 0-d or one-element integer tensor (``__index__``)."""
    t = _on(graph, _X)
    for size in (dtorch.tensor(3), torch.tensor([3]), _on(graph, torch.tensor([2]))):
        assert t.new_zeros(size, 2).shape == _X.new_zeros(int(size), 2).shape
        assert dtorch.ones((size, 1)).to_torch().equal(torch.ones(int(size), 1))
    for refused in (dtorch.tensor(True), dtorch.tensor(2.0), dtorch.tensor([1, 2])):
        with pytest.raises(TypeError, match="sizes must be non-negative ints"):
            dtorch.zeros(refused)
    _healthy(graph)


def test_pooling_takes_a_numpy_stride_and_a_mesh_unbinds_tensor_dims(graph) -> None:
    got = DF.max_pool2d(_on(graph, _IMG), 2, np.int64(1)).to_torch()
    assert got.equal(F.max_pool2d(_IMG, 2, np.int64(1)))
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    assert mesh.unbind(torch.tensor([0, 1])) == mesh.unbind([0, 1])

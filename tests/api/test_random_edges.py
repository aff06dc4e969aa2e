"""Random draws against torch where they once differed: ``bernoulli_`` with a tensor of
probabilities draws in the view's memory order, the alpha dropout modules ignore ``inplace``
as torch's do, dropout's ``p`` is refused with torch's error classes, and a creation without
a size is torch's TypeError (drawing nothing); thread and process mode."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch

import dtorch
import dtorch.nn.functional as DF
from dtorch import Replicate, Shard
from tests.api.ops_harness import place

pytestmark = pytest.mark.timeout(120)

_VIEWS: list[tuple[str, Callable[[Any], Any]]] = [
    ("transpose", lambda x: x.t()),
    ("column slice", lambda x: x[:, 1:4]),
    ("stepped transpose", lambda x: x.t()[::2]),
    ("whole", lambda x: x),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("label", "view"), _VIEWS, ids=[v[0] for v in _VIEWS])
def test_bernoulli_of_a_tensor_of_probabilities_draws_in_memory_order(label, view, dtype, graph):
    probs = torch.rand(4, 5, generator=torch.Generator().manual_seed(1), dtype=dtype)
    mesh = dtorch.init_device_mesh("cpu", 2)
    for placements in ([Replicate()], [Shard(0)]):
        torch.manual_seed(0)
        want = view(torch.zeros(4, 5)).bernoulli_(view(probs))
        after = torch.get_rng_state()
        base = place(torch.zeros(4, 5), mesh, placements, graph)
        torch.manual_seed(0)
        got = view(base).bernoulli_(view(place(probs, mesh, placements, graph)))
        assert torch.equal(got.to_torch(), want), placements
        assert torch.equal(torch.get_rng_state(), after)


@pytest.mark.parametrize("name", ["AlphaDropout", "FeatureAlphaDropout"])
def test_alpha_dropout_modules_ignore_inplace_as_torch(name, graph) -> None:
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(2))
    torch.manual_seed(3)
    want = getattr(torch.nn, name)(0.5, inplace=True).train()(x.clone())
    t = place(x, dtorch.init_device_mesh("cpu", 2), [Shard(0)], graph)
    torch.manual_seed(3)
    got = getattr(dtorch.nn, name)(0.5, inplace=True).train()(t)
    assert torch.equal(got.to_torch(), want)
    assert torch.equal(t.to_torch(), x)  # torch's module passes no inplace: x untouched


_DROPOUTS = ["dropout", "dropout1d", "dropout2d", "alpha_dropout", "feature_alpha_dropout"]


@pytest.mark.parametrize("name", _DROPOUTS)
def test_dropout_probabilities_are_refused_with_torchs_classes(name, graph) -> None:
    x = torch.ones(2, 3, 4)
    t = place(x, dtorch.init_device_mesh("cpu", 2), [Shard(0)], graph)
    for p in (math.nan, -0.1, 1.5):
        with pytest.raises(Exception) as theirs:
            getattr(torch.nn.functional, name)(x, p, True)
        with pytest.raises(type(theirs.value), match="has to be between 0 and 1"):
            getattr(DF, name)(t, p, True)
    module = dtorch.nn.Dropout(math.nan)  # torch's test lets NaN through to the first call
    torch.nn.Dropout(math.nan)
    with pytest.raises(RuntimeError, match="has to be between 0 and 1"):
        module(t)


@pytest.mark.parametrize("name", ["zeros", "ones", "empty", "rand", "randn"])
def test_a_creation_without_a_size_is_torchs_type_error(name, graph) -> None:
    with pytest.raises(TypeError):
        getattr(torch, name)()
    state = torch.get_rng_state()
    with pytest.raises(TypeError, match=rf"{name}\(\) missing 1 required positional argument"):
        getattr(dtorch, name)()
    assert torch.equal(torch.get_rng_state(), state)  # nothing drawn
    assert getattr(dtorch, name)(()).shape == () == getattr(dtorch, name)(size=()).shape

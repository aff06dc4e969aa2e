"""``gumbel_softmax`` against torch's for the same seed: torch's noise however the logits are
sharded (and the generator left where torch leaves it), torch's values where the softmax dim
is whole, the hard one-hot, torch's warning, and the refusals."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import dtorch
from tests.api.ops_harness import S0, S1, P, R, place

pytestmark = pytest.mark.timeout(60)

_X = torch.randn(5, 7, generator=torch.Generator().manual_seed(31))


@pytest.mark.parametrize("hard", [False, True])
@pytest.mark.parametrize(("placements", "dim"), [([R], -1), ([S0], -1), ([S1], 0), ([S0], 1)])
def test_torchs_values_where_the_dim_is_whole(placements, dim, hard, graph) -> None:  # type: ignore[no-untyped-def]
    t = place(_X, dtorch.init_device_mesh("cpu", 2), placements, graph)
    torch.manual_seed(8)
    got = F.gumbel_softmax(t, tau=0.6, hard=hard, dim=dim)
    after = torch.rand(2)
    torch.manual_seed(8)
    want = F.gumbel_softmax(_X, tau=0.6, hard=hard, dim=dim)
    assert got.placements == placements
    assert torch.equal(got.to_torch(), want)
    assert torch.equal(after, torch.rand(2))  # the generator advanced as torch's


def test_a_sharded_softmax_dim(graph: dtorch.Graph) -> None:
    t = place(_X, dtorch.init_device_mesh("cpu", 2), [S1], graph)
    torch.manual_seed(8)
    got = F.gumbel_softmax(t, dim=1)
    torch.manual_seed(8)
    torch.testing.assert_close(got.to_torch(), F.gumbel_softmax(_X, dim=1))
    with pytest.raises(dtorch.PlacementError, match=r"^gumbel_softmax: scatter"):
        F.gumbel_softmax(t, hard=True, dim=1)
    with pytest.raises(dtorch.PlacementError, match=r"^gumbel_softmax: add"):
        F.gumbel_softmax(place(_X, dtorch.init_device_mesh("cpu", 2), [P], graph))


def test_eps_warns_as_torch(graph: dtorch.Graph) -> None:
    with pytest.warns(UserWarning, match="`eps` parameter is deprecated"):
        F.gumbel_softmax(dtorch.tensor(_X), eps=1e-5)


def test_hard_is_torchs_truthiness(graph: dtorch.Graph) -> None:
    torch.manual_seed(1)
    got = F.gumbel_softmax(dtorch.tensor(_X), hard=1)
    torch.manual_seed(1)
    assert torch.equal(got.to_torch(), F.gumbel_softmax(_X, hard=1))

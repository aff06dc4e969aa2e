"""``dtorch.<nn op>`` takes torch's top-level form (``torch.embedding(weight, indices)``,
``torch.batch_norm(input, weight, bias, running_mean, running_var, ...)``, ``torch.dropout(
input, p, train)``, ``torch.layer_norm``/``group_norm`` with their backend flags), compared with
those torch functions on the full tensors, sharded on a 2-device mesh, thread and process mode."""

from __future__ import annotations

import pytest
import torch

import dtorch
from dtorch import Replicate, Shard

pytestmark = pytest.mark.timeout(60)

_X = torch.randn(6, 4, 3, 3, generator=torch.Generator().manual_seed(0))


def _on(t: torch.Tensor, mesh: dtorch.DeviceMesh, shard: bool = False) -> dtorch.Tensor:
    return dtorch.from_torch(t, device_mesh=mesh, placements=[Shard(0) if shard else Replicate()])


def test_embedding_takes_weight_then_indices(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2,))
    weight, ids = torch.randn(5, 3), torch.tensor([[4, 0], [1, 1]])
    want = torch.embedding(weight, ids)
    got = dtorch.embedding(_on(weight, mesh, shard=True), _on(ids, mesh))
    torch.testing.assert_close(got.to_torch(), want)
    torch.testing.assert_close(dtorch.embedding(_on(weight, mesh), ids, 2).to_torch(), want)
    with pytest.raises(TypeError, match=r"torch.embedding's \(weight, indices\) order"):
        dtorch.embedding(_on(ids, mesh), _on(weight, mesh))


@pytest.mark.parametrize("training", [False, True])
def test_batch_norm_takes_torchs_argument_order(graph: dtorch.Graph, training: bool) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2,))
    w, b, mean, var = torch.randn(4), torch.randn(4), torch.randn(4), torch.rand(4) + 0.5
    mean_d, var_d = _on(mean, mesh), _on(var, mesh)
    want = torch.batch_norm(_X, w, b, mean, var, training, 0.1, 1e-5, True)
    got = dtorch.batch_norm(
        _on(_X, mesh, shard=True), _on(w, mesh), _on(b, mesh), mean_d, var_d, training, 0.1,
        1e-5, True,
    )  # fmt: skip
    torch.testing.assert_close(got.to_torch(), want)
    torch.testing.assert_close(mean_d.to_torch(), mean)  # updated in place when training
    torch.testing.assert_close(var_d.to_torch(), var)


def test_dropout_layer_norm_group_norm_rms_norm(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2,))
    x = _on(_X, mesh, shard=True)
    torch.manual_seed(3)
    want = torch.dropout(_X, 0.5, True)
    torch.manual_seed(3)
    assert torch.equal(dtorch.dropout(x, 0.5, True).to_torch(), want)
    assert torch.equal(dtorch.dropout(x, 0.5, False).to_torch(), _X)
    w = torch.randn(3, 3)
    got = dtorch.layer_norm(x, [3, 3], _on(w, mesh), None, 1e-5, True)
    torch.testing.assert_close(got.to_torch(), torch.layer_norm(_X, [3, 3], w, None, 1e-5, True))
    got = dtorch.group_norm(x, 2, None, None, 1e-5, True)
    torch.testing.assert_close(got.to_torch(), torch.group_norm(_X, 2, None, None, 1e-5, True))
    torch.testing.assert_close(dtorch.rms_norm(x, [3]).to_torch(), torch.rms_norm(_X, [3]))
    k = torch.randn(2, 4, 3, 3)
    got = dtorch.conv2d(x, _on(k, mesh), None, 1, 1)
    torch.testing.assert_close(got.to_torch(), torch.conv2d(_X, k, None, 1, 1))
    torch.testing.assert_close(dtorch.max_pool2d(x, 2).to_torch(), torch.max_pool2d(_X, 2))

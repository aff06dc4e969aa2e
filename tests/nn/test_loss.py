"""The loss layers against torch.nn's: the same constructor arguments give the same values,
reprs and state_dict keys (a class ``weight`` is a buffer); thread and process mode."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import torch

import dtorch
from dtorch import Replicate, Shard, nn

_G = torch.Generator().manual_seed(11)
_X = torch.randn((6, 4), generator=_G)
_Y = torch.randn((6, 4), generator=_G)
_T = torch.tensor([0, 3, 1, -100, 2, 3])
_W = torch.rand(4, generator=_G) + 0.5

#: class name, constructor keywords, the (input, target) pair of torch tensors.
_CASES: list[tuple[str, dict[str, Any], tuple[torch.Tensor, torch.Tensor]]] = [
    ("MSELoss", {}, (_X, _Y)),
    ("MSELoss", {"reduction": "sum"}, (_X, _Y)),
    ("L1Loss", {"reduction": "none"}, (_X, _Y)),
    ("SmoothL1Loss", {"beta": 0.5}, (_X, _Y)),
    ("HuberLoss", {"delta": 0.3}, (_X, _Y)),
    ("BCELoss", {"weight": _W}, (_X.sigmoid(), _Y.sigmoid())),
    ("BCEWithLogitsLoss", {"pos_weight": _W, "reduction": "sum"}, (_X, _Y.sigmoid())),
    ("KLDivLoss", {"reduction": "batchmean"}, (_X.log_softmax(1), _Y.softmax(1))),
    ("KLDivLoss", {"reduction": "sum", "log_target": True}, (_X, _Y.log_softmax(1))),
    ("NLLLoss", {"weight": _W}, (_X.log_softmax(1), _T)),
    ("CrossEntropyLoss", {}, (_X, _T)),
    (
        "CrossEntropyLoss",
        {"weight": _W, "label_smoothing": 0.2, "ignore_index": 3},
        (_X, _T.clamp(min=0)),
    ),
    ("CrossEntropyLoss", {"size_average": False}, (_X, _T)),
]


@pytest.mark.parametrize(
    ("cls", "kwargs", "pair"), _CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(_CASES)]
)
def test_loss_layers_match_torch(
    cls: str, kwargs: dict[str, Any], pair: tuple[torch.Tensor, torch.Tensor], graph: dtorch.Graph
) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    with pytest.warns(UserWarning) if "size_average" in kwargs else contextlib.nullcontext():
        ref = getattr(torch.nn, cls)(**kwargs)
    with pytest.warns(UserWarning) if "size_average" in kwargs else contextlib.nullcontext():
        layer = getattr(nn, cls)(
            **kwargs,
            **({"device_mesh": mesh} if "weight" in kwargs or "pos_weight" in kwargs else {}),
        )
    x, y = (dtorch.from_torch(t, device_mesh=mesh, placements=[Shard(0)]) for t in pair)
    want = ref(*pair)
    got = layer(x, y)
    assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape)
    torch.testing.assert_close(got.to_torch(), want)
    assert repr(layer) == repr(ref) and layer.reduction == ref.reduction
    assert list(layer.state_dict()) == list(ref.state_dict())
    for name, buffer in layer.named_buffers():
        assert buffer.placements == [Replicate()]
        assert torch.equal(buffer.to_torch(), dict(ref.named_buffers())[name])


def test_loss_layers_refuse_what_torch_refuses() -> None:
    with pytest.raises(TypeError, match="delta must be a float or int"):
        nn.HuberLoss(delta="1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="cannot assign 'list' object to buffer 'weight'"):
        nn.CrossEntropyLoss(weight=[1.0, 2.0])

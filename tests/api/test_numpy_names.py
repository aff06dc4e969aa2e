"""torch's NumPy spellings, ``axis=`` for ``dim=`` and ``keepdims=`` for ``keepdim=``, as
functions and methods, compared with torch on the full tensor (a sharded and a replicated dim of
a 2-device mesh), thread and process mode."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import dtorch
from dtorch import Replicate, Shard

pytestmark = pytest.mark.timeout(60)

_T = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))
_INDEX = torch.tensor([[0, 2], [1, 1], [5, 0], [3, 4]])

#: name, call(lib, x) with lib = torch or dtorch and x a tensor of lib
_CALLS: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("sum", lambda lib, x: x.sum(axis=1, keepdims=True)),
    ("mean", lambda lib, x: lib.mean(x, axis=(0, 1))),
    ("prod", lambda lib, x: x.prod(axis=1)),
    ("amax", lambda lib, x: x.amax(axis=1, keepdims=True)),
    ("max", lambda lib, x: x.max(axis=1, keepdims=True)),
    ("min", lambda lib, x: lib.min(x, axis=1)),
    ("argmax", lambda lib, x: x.argmax(axis=1)),
    ("any", lambda lib, x: (x > 0).any(axis=1)),
    ("all", lambda lib, x: (x > 0).all(axis=1, keepdims=True)),
    ("var", lambda lib, x: x.var(axis=1, keepdims=True)),
    ("std", lambda lib, x: x.std(axis=1)),
    ("logsumexp", lambda lib, x: x.logsumexp(axis=1)),
    ("softmax", lambda lib, x: x.softmax(axis=1)),
    ("log_softmax", lambda lib, x: x.log_softmax(axis=1)),
    ("cumsum", lambda lib, x: x.cumsum(axis=1)),
    ("count_nonzero", lambda lib, x: lib.count_nonzero(x > 0, axis=1)),
    ("cat", lambda lib, x: lib.cat([x, x], axis=1)),
    ("concat", lambda lib, x: lib.concat([x, x], axis=1)),
    ("concatenate", lambda lib, x: lib.concatenate([x, x], axis=0)),
    ("stack", lambda lib, x: lib.stack([x, x], axis=2)),
    ("chunk", lambda lib, x: x.chunk(2, axis=1)),
    ("unbind", lambda lib, x: x.unbind(axis=1)),
    ("unsqueeze", lambda lib, x: x.unsqueeze(axis=1)),
    ("squeeze", lambda lib, x: x.unsqueeze(2).squeeze(axis=2)),
    ("narrow", lambda lib, x: x.narrow(axis=1, start=1, length=3)),
    ("index_select", lambda lib, x: x.index_select(axis=1, index=_INDEX[0])),
    ("gather", lambda lib, x: x.gather(axis=1, index=_INDEX)),
    ("sort", lambda lib, x: x.sort(axis=1)),
    ("repeat_interleave", lambda lib, x: x.repeat_interleave(2, axis=1)),
    ("var_mean", lambda lib, x: lib.var_mean(x, axis=1, keepdims=True)),
    ("std_mean", lambda lib, x: lib.std_mean(x, axis=1)),
    ("nansum", lambda lib, x: lib.nansum(x, axis=1)),
    ("nanmean", lambda lib, x: lib.nanmean(x, axis=1, keepdims=True)),
    ("argsort", lambda lib, x: x.argsort(axis=1)),
    ("topk", lambda lib, x: x.topk(2, axis=1)),
    ("diff", lambda lib, x: lib.diff(x, axis=1)),
    ("tensor_split", lambda lib, x: x.tensor_split(2, axis=1)),
    ("select", lambda lib, x: x.select(axis=1, index=2)),
]


def _as_torch(value: Any) -> Any:
    if isinstance(value, dtorch.Tensor):
        return value.to_torch()
    if isinstance(value, tuple):
        return tuple(_as_torch(v) for v in value)
    return value


@pytest.mark.parametrize("placement", [Shard(0), Replicate()], ids=["S(0)", "R"])
@pytest.mark.parametrize(("name", "call"), _CALLS, ids=[name for name, _ in _CALLS])
def test_numpy_names_as_in_torch(
    graph: dtorch.Graph, name: str, call: Callable[[Any, Any], Any], placement: Any
) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    if name == "gather":  # a torch index is Replicate, which gather takes beside R or P only
        placement = Replicate()
    x = dtorch.from_torch(_T, device_mesh=mesh, placements=[placement])
    got, want = _as_torch(call(dtorch, x)), call(torch, _T)
    torch.testing.assert_close(tuple(got) if isinstance(got, tuple) else got, tuple(want)
                               if isinstance(want, tuple) else want)  # fmt: skip


def test_a_dim_given_twice_is_refused(graph: dtorch.Graph) -> None:
    x = dtorch.ones(2, 3)
    with pytest.raises(TypeError, match="multiple values for argument 'dim'"):
        x.sum(1, axis=1)
    with pytest.raises(TypeError, match="multiple values for argument 'dim'"):
        x.sum(dim=1, axis=1)

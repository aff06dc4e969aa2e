"""``dropout`` with torch.nn.functional's signature plus DTorch's ``generator``.

The oracle, matched bit for bit however the input is sharded (the tensor taken as contiguous):
``torch.manual_seed(s); torch.nn.functional.dropout(x, p)`` on the CPU, i.e. ``x *
torch.empty_like(x).bernoulli_(1 - p, generator=g).div_(1 - p)`` with ``g`` the default
generator (or the ``generator`` given). The operator carries a snapshot of the generator; the
devices redraw the FULL mask from it and keep their slice (``dtorch.kernels.local.embedding``),
and the caller's generator advances as torch's would, so later draws match torch's too. Not
training, or ``p == 0``, returns ``input`` itself (torch draws nothing either); ``p == 1``
gives zeros without drawing.

Example:
    >>> import torch, dtorch
    >>> x = torch.ones(6)
    >>> _ = torch.manual_seed(1)
    >>> out = dtorch.nn.functional.dropout(dtorch.tensor(x), 0.5).to_torch()
    >>> _ = torch.manual_seed(1)
    >>> torch.equal(out, torch.nn.functional.dropout(x, 0.5))
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.dims import as_flag
from dtorch.api.ops.convert import written
from dtorch.api.ops.random_fill import generator_source
from dtorch.api.ops.scalars import as_real
from dtorch.api.record import record_one, tensor_arg
from dtorch.errors import ParamError
from dtorch.ir.params import DropoutParam
from dtorch.ir.random_draw import draws
from dtorch.kernels.local.embedding import dropout_mask

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def probability(name: str, p: Any) -> float:
    """A dropout's ``p``, checked as torch checks it: a real number in [0, 1], else a
    ParamError (torch's ValueError for a number outside, its RuntimeError for NaN: a
    ParamError is both).

    Example:
        >>> probability("dropout", 0.25)
        0.25
    """
    p = as_real(f"{name}: p", p)
    if not 0.0 <= p <= 1.0:
        raise ParamError(f"{name}: dropout probability has to be between 0 and 1, but got {p}")
    return p


def dropout(
    input: Tensor,
    p: float = 0.5,
    training: bool = True,
    inplace: bool = False,
    *,
    generator: torch.Generator | None = None,
) -> Tensor:
    """``torch.nn.functional.dropout`` (see the module for the exact oracle); ``inplace``
    changes ``input``'s shards and returns it.

    Example:
        >>> import torch, dtorch
        >>> g = torch.Generator().manual_seed(0)
        >>> dtorch.nn.functional.dropout(dtorch.ones(4), 1.0, generator=g).tolist()
        [0.0, 0.0, 0.0, 0.0]
    """
    p = probability("dropout", p)
    training = as_flag(training, "dropout", "training")
    tensor_arg("dropout", input)
    if not training or p == 0.0 or input.numel() == 0:
        return input
    return written(input, lambda: _dropped(input, float(p), generator), inplace)


def _dropped(input: Tensor, p: float, generator: torch.Generator | None) -> Tensor:
    # the generator's state copied and advanced in one step for other threads (draws), and
    # advanced only once the operator is recorded (its rule refuses an integer input)
    source = generator_source("dropout", generator)
    with draws():
        snapshot = torch.Generator().set_state(source.get_state())
        out = record_one("dropout", DropoutParam(p, True, snapshot), (input,), 4)
        if p < 1.0:  # advance the caller's generator as torch's dropout does (1 draws nothing)
            dropout_mask(tuple(input.shape), input.dtype, p, source)
    return out

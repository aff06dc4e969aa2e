"""``Dropout``: torch.nn.Dropout's constructor (plus the ``device=``/``device_mesh=`` (one of
them at most) and ``dtype=`` every dtorch layer takes, unused: it has no parameters). In
training mode it is ``dtorch.nn.functional.dropout``, bit-identical to torch's for the same
seed however the input is sharded; in eval mode it returns its input.

Example:
    >>> import torch, dtorch
    >>> m = dtorch.nn.Dropout(0.25)
    >>> x = torch.ones(8)
    >>> _ = torch.manual_seed(3)
    >>> out = m(dtorch.from_torch(x)).to_torch()
    >>> _ = torch.manual_seed(3)
    >>> torch.equal(out, torch.nn.Dropout(0.25)(x)), m, m.eval()(dtorch.ones(2)).tolist()
    (True, Dropout(p=0.25, inplace=False), [1.0, 1.0])
"""

from __future__ import annotations

import torch

from dtorch.api.ops.dropout import dropout
from dtorch.api.tensor import Tensor
from dtorch.ir.mesh import DeviceMesh
from dtorch.nn.modules.linear import Device, check_mesh_or_device
from dtorch.nn.modules.module import Module


class Dropout(Module):
    """Zeroes each element with probability ``p`` in training mode, scaling the others by
    ``1 / (1 - p)``; ``inplace=True`` writes into the input."""

    def __init__(
        self,
        p: float = 0.5,
        inplace: bool = False,
        *,
        device: Device = None,
        dtype: torch.dtype | None = None,
        device_mesh: DeviceMesh | None = None,
    ) -> None:
        super().__init__()
        check_mesh_or_device(type(self).__name__, device_mesh, device)  # as layers with weights
        if p < 0 or p > 1:  # torch's test: NaN passes here, refused by the first call
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input: Tensor) -> Tensor:
        return dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


__all__ = ["Dropout"]

"""TensorBase: the handle part of ``dtorch.Tensor`` - metadata, values and release.

Metadata never waits; values wait for the devices. Only the owning handle of a value releases
it when garbage collected; aliases (``detach``) keep the owner alive instead.

Example:
    >>> import dtorch
    >>> t = dtorch.zeros(2, 3)
    >>> t.size(), t.numel(), t.detach().tolist()
    (torch.Size([2, 3]), 6, [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from dtorch.api.dims import normalize_dims
from dtorch.errors import ShapeError
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.operator import Operand
from dtorch.ir.placement import Placement

if TYPE_CHECKING:
    from dtorch.api.future import TensorFuture
    from dtorch.api.graph import Graph
    from dtorch.api.tensor import Tensor


class TensorBase:
    """A (distributed) tensor of a dtorch graph; see the module docstring.

    ``dtorch.Tensor(torch_tensor, device_mesh=None, placements=None, dtype=None, graph=None,
    device=None)`` distributes a full torch tensor, like ``dtorch.from_torch``.
    """

    __slots__ = ("__weakref__", "_base", "_graph", "_operand")

    _graph: Graph
    _operand: Operand
    _base: TensorBase | None

    @classmethod
    def _wrap(cls, graph: Graph, operand: Operand) -> Tensor:
        tensor: Tensor = object.__new__(cls)  # type: ignore[assignment]
        tensor._graph = graph
        tensor._operand = operand
        tensor._base = None
        return tensor

    def _alias(self) -> Tensor:
        """A new handle to the same value (``detach``): it keeps this one alive."""
        tensor = self._wrap(self._graph, self._operand)
        tensor._base = self if self._base is None else self._base
        return tensor

    def __del__(self) -> None:
        # Only the owning handle releases; aliases keep the owner alive through ``_base``.
        try:
            if self._base is None:
                self._graph.executor.release(self._operand.id)
        except AttributeError:  # a half-built handle (its __init__ raised): nothing to free
            pass

    # --- metadata (never waits) -------------------------------------------------------------
    @property
    def shape(self) -> torch.Size:
        return torch.Size(self._operand.shape)

    def size(self, dim: int | None = None) -> Any:
        if dim is None:
            return self.shape
        return self._operand.shape[normalize_dims(dim, self.ndim)[0]]

    @property
    def ndim(self) -> int:
        return len(self._operand.shape)

    def dim(self) -> int:
        return self.ndim

    def numel(self) -> int:
        return math.prod(self._operand.shape)

    def nelement(self) -> int:
        return self.numel()

    @property
    def dtype(self) -> torch.dtype:
        return self._operand.dtype

    @property
    def device(self) -> torch.device:
        """The device of a single-device tensor; the device type of a distributed one."""
        mesh = self._operand.mesh
        if mesh.is_distributed:
            return mesh.device_type
        return mesh.first_device()

    @property
    def device_mesh(self) -> DeviceMesh:
        return self._operand.mesh

    @property
    def placements(self) -> list[Placement]:
        return list(self._operand.placements)

    @property
    def is_dtensor(self) -> bool:
        return self._operand.mesh.is_distributed

    @property
    def graph(self) -> Graph:
        return self._graph

    @property
    def id(self) -> int:
        """The operand id (stable across processes and save/load)."""
        return self._operand.id

    def is_floating_point(self) -> bool:
        return self._operand.dtype.is_floating_point

    def is_contiguous(self) -> bool:
        """Always True: dtorch values have no user-visible strides (kernels accept any local
        layout, ``view`` included), so nothing a program can do depends on contiguity."""
        return True

    def __len__(self) -> int:
        if not self._operand.shape:
            raise TypeError("len() of a 0-d tensor")
        return self._operand.shape[0]

    def __repr__(self) -> str:
        return f"dtorch.Tensor({self._operand.describe()}, id={self._operand.id})"

    # --- values (wait for the devices) ------------------------------------------------------
    def to_torch_async(self) -> TensorFuture:
        """A future of the full torch tensor (Shard concatenated, Replicate one copy, Partial
        summed)."""
        from dtorch.api.values import to_torch_async

        return to_torch_async(self)  # type: ignore[arg-type]  # self is always a Tensor

    def to_torch(self) -> torch.Tensor:
        return self.to_torch_async().get()

    def numpy(self) -> np.ndarray:
        return self.to_torch().numpy()

    def item(self) -> Any:
        if self.numel() != 1:
            raise ShapeError(
                f"item() needs a tensor of one element, this one has shape {list(self.shape)}"
            )
        return self.to_torch().item()

    def tolist(self) -> Any:
        return self.to_torch().tolist()

    def equal(self, other: Tensor) -> bool:
        """True when both tensors have the same shape and values (waits for both)."""
        return self.shape == other.shape and bool(torch.equal(self.to_torch(), other.to_torch()))

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError(
                "the truth value of a tensor with more than one element is ambiguous"
            )
        return bool(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __index__(self) -> int:
        if self.dtype.is_floating_point or self.dtype.is_complex:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        array = self.numpy()
        return array if dtype is None else array.astype(dtype)

    __hash__ = object.__hash__  # identity, like torch.Tensor (== records an operator)

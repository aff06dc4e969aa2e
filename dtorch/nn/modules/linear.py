"""``Linear`` and ``Identity``, and the placement plan the tensor-parallel Linears share.

``Linear(in_features, out_features, bias=True, device=None, dtype=None, *,
device_mesh=None)`` is torch.nn.Linear on a mesh: ``weight`` (out_features, in_features) and
``bias`` (out_features) are Replicate on every mesh dim, drawn as torch draws them (uniform on
``[-1/sqrt(in_features), 1/sqrt(in_features)]`` from torch's default generator, the same
values torch.nn.Linear draws); the input passes as given (a batch sharded on a ``dp``
mesh dim stays sharded). The mesh is named as the creation functions name it
(``resolve_mesh``): ``device_mesh=``, or ``device=`` (``"cpu"``, ``"cuda:1"``,
``torch.device("cpu", 1)``: a one-device mesh), not both; neither is the default graph's
default mesh.

The tensor-parallel layers (``dtorch.nn.modules.parallel_linear``) are Linears with a
``TpPlan``: the placements of the weight, the bias, the input and the output on one mesh dim
found by name (``tp_dim``, "tp" by default).

Example:
    >>> import torch, dtorch
    >>> ref = torch.nn.Linear(3, 2)
    >>> m = dtorch.nn.Linear(3, 2)
    >>> m.load_state_dict(ref.state_dict())
    <All keys matched successfully>
    >>> x = torch.randn(4, 3)
    >>> torch.allclose(m(dtorch.from_torch(x)).to_torch(), ref(x))
    True
    >>> m
    Linear(in_features=3, out_features=2, bias=True)
"""

from __future__ import annotations

import functools
import inspect
import math
import operator
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

from dtorch.api.create import mesh_for
from dtorch.api.creation import empty, uniform
from dtorch.api.graph import Graph
from dtorch.api.ops.linalg import linear
from dtorch.api.tensor import Tensor
from dtorch.errors import MeshError, ParamError
from dtorch.ir.dtypes import as_dtype, is_dtype
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.placement import Placement, Replicate
from dtorch.nn.modules.module import Module
from dtorch.nn.parameter import Parameter

_M = TypeVar("_M", bound=Module)


@dataclass(frozen=True, slots=True)
class TpPlan:
    """Placements of a Linear on its tp mesh dim. ``weight``/``bias``: where the parameters
    live; ``input``/``output``: what ``forward``'s input and output are redistributed to
    (None: left as they are). Every other mesh dim holds the parameters Replicate and leaves
    the input and output alone."""

    weight: Placement
    bias: Placement
    input: Placement | None = None
    output: Placement | None = None


#: What a layer's ``device=`` takes (a one-device mesh, as the creation functions read it).
Device = str | torch.device | None


def check_mesh_or_device(layer: str, device_mesh: Any, device: Any) -> None:
    """``device_mesh`` and ``device`` both name the layer's mesh: one of them at most."""
    if device_mesh is not None and device is not None:
        raise MeshError(
            f"{layer}: give device_mesh or device, not both (got device_mesh={device_mesh!r}, "
            f"device={device!r})"
        )


def placement_keywords(cls: type[_M]) -> type[_M]:
    """Class decorator: ``cls``'s ``__init__`` also takes torch's ``device=`` and ``dtype=``
    and DTorch's ``device_mesh=``, as every layer does (docs/nn.md). A layer without
    parameters checks them (one of ``device``/``device_mesh`` at most) and ignores them; one
    whose ``__init__`` takes ``device_mesh`` itself (a loss with a ``weight`` buffer) gets
    ``device=`` as the one-device mesh it names.

    Example:
        >>> import dtorch
        >>> @placement_keywords
        ... class Twice(dtorch.nn.Module):
        ...     def forward(self, x):
        ...         return 2 * x
        >>> Twice(device="cpu")(dtorch.ones(1)).tolist()
        [2.0]
    """
    init = cls.__init__
    takes_mesh = "device_mesh" in inspect.signature(init).parameters

    @functools.wraps(init)
    def __init__(
        self: Any, *args: Any, device: Any = None, dtype: Any = None, **kwargs: Any
    ) -> None:
        mesh = kwargs.get("device_mesh") if takes_mesh else kwargs.pop("device_mesh", None)
        check_mesh_or_device(cls.__name__, mesh, device)
        if takes_mesh and device is not None:
            kwargs["device_mesh"] = resolve_mesh(cls.__name__, None, device)
        init(self, *args, **kwargs)

    cls.__init__ = __init__  # type: ignore[method-assign]
    return cls


def resolve_mesh(layer: str, device_mesh: Any, device: Any) -> DeviceMesh:
    """The layer's mesh, read as the creation functions read it: ``device_mesh``, or
    ``device`` (a one-device mesh), or the default graph's default mesh.

    Example:
        >>> import torch, dtorch
        >>> resolve_mesh("Linear", None, torch.device("cpu", 1))
        DeviceMesh('cpu', [1])
    """
    check_mesh_or_device(layer, device_mesh, device)  # the layer's name in the message
    return mesh_for(Graph.default_graph(), device_mesh, device)


def check_features(layer: str, **sizes: Any) -> list[int]:
    """Feature counts as ints: anything torch takes as a size (``operator.index``: a numpy
    int, a bool as torch takes it), non-negative (torch's layers fail later, less clearly).

    Example:
        >>> import numpy as np
        >>> check_features("Linear", in_features=np.prod((2, 3)), out_features=True)
        [6, 1]
    """
    return [_feature(layer, name, size) for name, size in sizes.items()]


def _feature(layer: str, name: str, size: Any) -> int:
    # torch's classes: TypeError for a non-int, RuntimeError (a ParamError is one) for a negative
    try:
        count = operator.index(size)
    except TypeError:
        raise TypeError(f"{layer}: {name} must be a non-negative int, got {size!r}") from None
    if count < 0:
        raise ParamError(f"{layer}: {name} must be a non-negative int, got {size!r}")
    return count


def check_float(layer: str, dtype: Any) -> torch.dtype | None:
    """Layers with drawn weights need a floating-point dtype (or None: the graph's); torch's
    ``dtype=float`` is float64."""
    if dtype is not None and not (is_dtype(dtype) and as_dtype(layer, dtype).is_floating_point):
        raise TypeError(f"{layer}: dtype must be a floating-point torch.dtype, got {dtype!r}")
    return None if dtype is None else as_dtype(layer, dtype)


def check_tp_dim(layer: str, tp_dim: Any) -> str:
    """The tensor-parallel layers find their mesh dim by name: ``tp_dim`` must be a str."""
    if not isinstance(tp_dim, str):
        raise TypeError(f"{layer}: tp_dim must be a mesh dim name (a str), got {tp_dim!r}")
    return tp_dim


def unsplit_size_one(placement: Placement, shape: tuple[int, ...]) -> Placement:
    """A Shard of a dim of size 1 is Replicate, as ``redistribute_by_dict`` (the layers'
    input hook) makes it of the input: a Row layer with ``in_features=1`` then meets a
    Replicate input with a Replicate weight (its output is Replicate, not Partial).

    Example:
        >>> from dtorch import Shard
        >>> unsplit_size_one(Shard(1), (4, 1)), unsplit_size_one(Shard(1), (4, 2))
        (Replicate(), Shard(dim=1))
    """
    if placement.is_shard() and shape[placement.get_shard_index() % len(shape)] == 1:
        return Replicate()
    return placement


def uniform_(param: Tensor, bound: float) -> None:
    """Fill ``param`` with uniform values on ``[-bound, bound]``, drawn from torch's default
    generator exactly as ``torch.nn.init.uniform_`` draws them (one Create and one Copy)."""
    drawn = uniform(param.shape, -bound, bound, dtype=param.dtype, graph=param.graph,
                    device_mesh=param.device_mesh, placements=param.placements)  # fmt: skip
    param.copy_(drawn)


class Linear(Module):
    """``y = x @ weight.T + bias``; see the module docstring.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.Linear(4, 3, bias=False, dtype=dtorch.float64)
        >>> m.weight.shape, m.weight.dtype, m.bias
        (torch.Size([3, 4]), torch.float64, None)
        >>> dtorch.nn.Linear(4, 3, device="cpu:1").weight.device_mesh
        DeviceMesh('cpu', [1])
    """

    #: The tp placement plan (None: Replicate parameters, no redistribution).
    tp_plan: TpPlan | None = None
    #: The name of the tensor-parallel mesh dim (the parallel subclasses set it).
    tp_dim: str | None = None

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: Device = None,
        dtype: torch.dtype | None = None,
        *,
        device_mesh: DeviceMesh | None = None,
    ) -> None:
        super().__init__()
        layer = type(self).__name__
        in_features, out_features = check_features(
            layer, in_features=in_features, out_features=out_features
        )
        dtype = check_float(layer, dtype)
        self.in_features, self.out_features = in_features, out_features
        mesh = resolve_mesh(layer, device_mesh, device)
        weight, bias_placements = self._param_placements(mesh)
        shape = (out_features, in_features)
        self.weight = Parameter(empty(shape, dtype=dtype, device_mesh=mesh, placements=weight))
        if bias:
            value = empty(out_features, dtype=dtype, device_mesh=mesh, placements=bias_placements)
            self.bias = Parameter(value)
        else:
            self.register_parameter("bias", None)
        self._set_redistribution()
        self.reset_parameters()

    def _tp_index(self, mesh: DeviceMesh) -> int | None:
        """The tp mesh dim of ``mesh`` (None: no plan, or the mesh has no such dim)."""
        if self.tp_plan is None or self.tp_dim is None:
            return None
        return mesh.dim_name_index(self.tp_dim)

    def _param_placements(self, mesh: DeviceMesh) -> tuple[list[Placement], list[Placement]]:
        weight: list[Placement] = [Replicate()] * mesh.ndim
        bias: list[Placement] = [Replicate()] * mesh.ndim
        tp = self._tp_index(mesh)
        if tp is not None and self.tp_plan is not None:
            shape = (self.out_features, self.in_features)
            weight[tp] = unsplit_size_one(self.tp_plan.weight, shape)
            bias[tp] = unsplit_size_one(self.tp_plan.bias, shape[:1])
        return weight, bias

    def _set_redistribution(self) -> None:
        plan, tp_dim = self.tp_plan, self.tp_dim
        if plan is None or tp_dim is None:
            return
        if plan.input is not None:
            self.input_placements = {tp_dim: plan.input}
        if plan.output is not None:
            self.output_placements = {tp_dim: plan.output}

    def reset_parameters(self) -> None:
        """Draw the weight and the bias again, as torch.nn.Linear does."""
        bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
        uniform_(self.weight, bound)
        if self.bias is not None:
            uniform_(self.bias, bound)

    def forward(self, input: Tensor) -> Tensor:
        return linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        bias = self.bias is not None
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={bias}"


class NonDynamicallyQuantizableLinear(Linear):
    """``Linear`` under torch's name for ``MultiheadAttention.out_proj`` (torch keeps it apart
    for quantization; here it is the same layer, so reprs and ``isinstance`` checks match).

    Example:
        >>> import dtorch
        >>> dtorch.nn.MultiheadAttention(4, 2).out_proj
        NonDynamicallyQuantizableLinear(in_features=4, out_features=4, bias=True)
    """


class Identity(Module):
    """Returns its input; takes and ignores any arguments (torch.nn.Identity).

    Example:
        >>> import dtorch
        >>> dtorch.nn.Identity(54, unused="x")(dtorch.ones(2)).tolist()
        [1.0, 1.0]
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Any) -> Any:
        return input


__all__ = ["Identity", "Linear", "NonDynamicallyQuantizableLinear", "TpPlan"]

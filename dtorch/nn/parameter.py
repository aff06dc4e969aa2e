"""``dtorch.nn.parameter``: ``Parameter`` and ``Buffer``, the tensors a Module registers.

Both are ``dtorch.Tensor`` subclasses (not wrappers): a Parameter goes into every operator as
the tensor it is, hashes by identity and shares its value with the tensor it was built from
(as ``torch.nn.Parameter(t)`` shares ``t``'s storage). Assigning one as a Module attribute
registers it (``module.w = Parameter(...)`` a parameter, ``module.b = Buffer(...)`` a buffer).
Operators on them return plain ``dtorch.Tensor`` values.

dtorch records no gradients: ``requires_grad`` is kept as a flag (torch's default, True, for
parameters) and ``grad`` as an attribute (None until a program sets it; ``Module.zero_grad``
clears it) so that programs that read or set them run; nothing differentiates.

Example:
    >>> import torch, dtorch
    >>> from dtorch.nn.parameter import Parameter
    >>> mesh = dtorch.init_device_mesh("cpu", 2)
    >>> w = Parameter(dtorch.ones(4, 2, device_mesh=mesh, placements=[dtorch.Shard(0)]))
    >>> isinstance(w, dtorch.Tensor), w.placements, (w * 2).sum().item()
    (True, [Shard(dim=0)], 16.0)
    >>> Parameter(torch.zeros(3)).tolist()
    [0.0, 0.0, 0.0]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.tensor import Tensor

if TYPE_CHECKING:
    from dtorch.api.graph import Graph
    from dtorch.ir.operator import Operand


def _source(cls: str, data: Any, kwargs: dict[str, Any]) -> Tensor:
    """The dtorch tensor a Parameter/Buffer stands for: ``data`` itself when it is one (its
    value is shared, converted when keywords ask for it), else ``data`` distributed like
    ``dtorch.Tensor(data, **kwargs)`` (None: an empty float tensor, as torch)."""
    if data is None:
        data = torch.empty(0)
    if not isinstance(data, (Tensor, torch.Tensor)):
        raise TypeError(
            f"{cls}: data must be a dtorch.Tensor or a torch.Tensor, got {type(data).__name__}"
        )
    if isinstance(data, Tensor) and not kwargs:
        return data
    return Tensor(data, **kwargs)


def _check_grad(param: Parameter, grad: Any) -> None:
    """torch's checks of an assigned ``grad``: a tensor of the parameter's shape and dtype."""
    if not isinstance(grad, Tensor):
        raise TypeError(
            "assigned grad expected to be a dtorch.Tensor or None but got grad of type "
            f"{type(grad).__name__}"
        )
    if grad.shape != param.shape:
        raise RuntimeError(
            f"assigned grad has data of a different size: {list(grad.shape)}, the parameter "
            f"is {list(param.shape)}"
        )
    if grad.graph is not param.graph or grad.device_mesh != param.device_mesh:
        raise RuntimeError(
            f"assigned grad is on another {'graph' if grad.graph is not param.graph else 'mesh'}"
            f" ({grad.device_mesh!r}) than the parameter ({param.device_mesh!r}); accepted: a "
            "tensor of the parameter's graph and mesh (redistribute or move it first)"
        )
    if grad.dtype != param.dtype:
        raise RuntimeError(
            f"assigned grad has data of a different type: {grad.dtype}, the parameter is "
            f"{param.dtype}"
        )


class _Marked(Tensor):
    """A Tensor subclass whose aliases (``detach``, ``data``, the hidden owner) are plain
    Tensors, as torch's ``Parameter.detach()`` is a plain tensor. It takes attributes of the
    program's own (``p.no_weight_decay = True``), as a torch tensor does: ``copy.deepcopy``
    copies them, ``copy.copy`` gets its own dict of the same values, and ``Module.to`` keeps
    them (the object is rebound in place)."""

    __slots__ = ("__dict__",)

    @classmethod
    def _wrap(cls, graph: Graph, operand: Operand) -> Tensor:
        return Tensor._wrap(graph, operand)

    def _twin(self, source: Any, memo: dict[int, Any] | None) -> Any:
        made = super()._twin(source, memo)
        if memo is None:  # a shallow copy: the same values in a dict of its own
            object.__setattr__(made, "__dict__", dict(vars(self)))
        return made


class Parameter(_Marked):
    """A tensor that is a Module parameter: ``Parameter(data=None, requires_grad=True, **kw)``.

    ``data`` is a dtorch tensor (its value is shared, not copied) or a torch tensor
    (distributed as ``dtorch.Tensor(data, **kw)``: ``device_mesh=``, ``placements=``,
    ``dtype=``, ``graph=``, ``device=``).

    Example:
        >>> import dtorch
        >>> t = dtorch.zeros(2)
        >>> p = dtorch.nn.Parameter(t)
        >>> p.id == t.id, p.requires_grad, p
        (True, True, Parameter containing: dtorch.Tensor(...))
    """

    # settable here, where a plain Tensor's are read-only (``dtorch.api.tensor_grad``)
    __slots__ = ("_grad", "_requires_grad")
    _FORMATS_VALUE = False  # torch formats only plain tensors' values: f"{p:.2f}" raises

    def __init__(self, data: Any = None, requires_grad: bool = True, **kwargs: Any) -> None:
        source = _source(type(self).__name__, data, kwargs)
        self._name = None
        self._share(source)
        self._grad: Tensor | None = None  # torch's attribute; dtorch computes none itself
        self._requires_grad = False
        self.requires_grad_(requires_grad)

    @property
    def requires_grad(self) -> bool:
        """Whether this parameter is marked as wanting gradients (a flag: dtorch computes
        none); set it to a bool, True only on floating point and complex parameters."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if type(value) is not bool:
            kind = type(value)
            raise RuntimeError(
                f"requires_grad must be a bool, got {kind.__module__}.{kind.__qualname__} {value!r}"
            )
        self.requires_grad_(value)

    @property
    def grad(self) -> Tensor | None:
        """The gradient a program set (None until one does): a dtorch tensor of this
        parameter's shape and dtype, as torch checks an assigned ``grad``."""
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None:
            _check_grad(self, value)
        self._grad = value

    def requires_grad_(self, requires_grad: bool = True) -> Parameter:
        """torch's: set the ``requires_grad`` flag and return the parameter; only floating
        point and complex parameters may require gradients (torch's RuntimeError).

        Example:
            >>> import dtorch
            >>> p = dtorch.nn.Parameter(dtorch.zeros(2))
            >>> p.requires_grad_(False) is p, p.requires_grad
            (True, False)
        """
        wanted = bool(requires_grad)
        if wanted and not (self.dtype.is_floating_point or self.dtype.is_complex):
            raise RuntimeError(
                "Only Tensors of floating point and complex dtype can require gradients"
            )
        self._requires_grad = wanted
        return self

    def __repr__(self) -> str:
        return f"Parameter containing: {Tensor.__repr__(self)}"


class Buffer(_Marked):
    """A tensor that is a Module buffer when assigned as an attribute:
    ``Buffer(data=None, *, persistent=True, **kw)`` (``persistent=False``: left out of
    ``state_dict``). ``data`` as for ``Parameter``.

    Example:
        >>> import dtorch
        >>> b = dtorch.nn.Buffer(dtorch.zeros(2), persistent=False)
        >>> b.persistent, b.tolist()
        (False, [0.0, 0.0])
    """

    __slots__ = ("persistent",)

    def __init__(self, data: Any = None, *, persistent: bool = True, **kwargs: Any) -> None:
        source = _source(type(self).__name__, data, kwargs)
        self._name = None
        self._share(source)
        self.persistent = bool(persistent)

    def __repr__(self) -> str:
        return f"Buffer containing: {Tensor.__repr__(self)}"


__all__ = ["Buffer", "Parameter"]

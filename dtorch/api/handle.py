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

import copy
import math
import weakref
from typing import TYPE_CHECKING, Any, NoReturn, SupportsIndex, cast

import numpy as np
import torch

from dtorch.api.dims import normalize_dim, normalize_dims
from dtorch.api.python_numbers import PythonNumbers
from dtorch.api.record import _OWN_FRAMES, tensor_arg
from dtorch.api.strides import Layout, contiguous_strides, layout
from dtorch.api.values import to_torch_async
from dtorch.errors import ParamError, ShapeError
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.operator import Operand
from dtorch.ir.placement import Placement
from dtorch.ir.span import caller_span

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeAlias, TypeGuard

    from dtorch.api.future import TensorFuture
    from dtorch.api.graph import Graph
    from dtorch.api.tensor import Tensor

    #: Makes a new handle of a value: ``new(graph, operand)`` (``Tensor._wrap``).
    NewHandle: TypeAlias = Callable[[Graph, Operand], Tensor]


_PRUNE_AT = 16  # an owner's list of sharers drops its dead entries past this length


def _enlist(owner: TensorBase, handle: TensorBase) -> None:
    """Note ``handle`` among the handles of ``owner``'s value (weakly: plain references, as a
    weak set would compare tensors with ``==``, which records an operator)."""
    refs: list[weakref.ref[TensorBase]] | None = getattr(owner, "_sharers", None)
    if refs is None:
        refs = owner._sharers = []
    elif len(refs) >= _PRUNE_AT:
        refs[:] = [ref for ref in refs if ref() is not None]
    refs.append(weakref.ref(handle))


class TensorBase(PythonNumbers):
    """A (distributed) tensor of a dtorch graph; see the module docstring.

    ``dtorch.Tensor(torch_tensor, device_mesh=None, placements=None, dtype=None, graph=None,
    device=None)`` distributes a full torch tensor, like ``dtorch.from_torch``.
    """

    __slots__ = ("__weakref__", "_base", "_graph", "_name", "_operand", "_sharers", "_strides")

    _graph: Graph
    _operand: Operand
    _base: TensorBase | None
    _sharers: list[weakref.ref[TensorBase]]  # an owner's: the handles of its value
    #: The global strides torch would give the value, where known (``dtorch.api.strides``);
    #: unset on most operators' results (read through ``strides.known``).
    _strides: Layout

    #: Makes the handles of operator results: ``Tensor._wrap``, set where Tensor is defined.
    #: Subclasses inherit it, so operators on a typed alias (``LongTensor``) or a Parameter
    #: return plain Tensors, as torch's do. The recorder (``dtorch.api.record``) calls it on an
    #: input, so no operator module imports Tensor; creation is given a handle class instead.
    _result: NewHandle  # a class attribute (not ClassVar: mypy would bind it as a method)

    @classmethod
    def _wrap(cls, graph: Graph, operand: Operand) -> Tensor:
        tensor: Tensor = object.__new__(cls)  # type: ignore[assignment]
        tensor._graph = graph
        tensor._operand = operand
        tensor._base = None
        tensor._name = None
        return tensor

    def _owner(self) -> TensorBase:
        """The handle that releases this value; a handle that owns it itself hands that to a
        hidden owner first, so that ``data = other`` can rebind it without freeing aliases."""
        if self._base is None:
            self._base = self._result(self._graph, self._operand)
            _enlist(self._base, self)
        return self._base

    def _share(self, source: TensorBase) -> None:
        """This handle stands for ``source``'s value, which ``source``'s owner keeps alive:
        this handle releases nothing itself (a constructor, a copy, ``data = other``)."""
        self._graph, self._operand, self._base = source._graph, source._operand, source._owner()
        self._strides = layout(source)  # the same value, the same layout
        _enlist(self._base, self)

    def _alias(self) -> Tensor:
        """A new handle to the same value (``detach``): it keeps the owner alive."""
        tensor = self._result(self._graph, self._operand)  # a plain Tensor, as torch's
        tensor._base = self._owner()
        tensor._strides = layout(self)
        _enlist(tensor._base, tensor)
        return tensor

    def _shared(self) -> bool:
        """Whether another live handle stands for this value (then a program that read the
        value cannot tell through which handle it did)."""
        owner = self._base
        for ref in getattr(owner, "_sharers", ()):
            handle = ref()  # identity only (== records an operator); a handle since rebound
            if handle is not None and handle is not self and handle._base is owner:
                return True  # (its _base another owner) no longer stands for this value
        return False

    def _rebind(self, other: TensorBase) -> None:
        """This handle now stands for ``other``'s value (``t.data = other``); a program that
        holds the old value as a constant follows (``Executor.rebind``), unless another handle
        of the old value lives on (eager code reading that one would not follow)."""
        same = other._graph is self._graph
        new = other._operand if same else None
        where = caller_span(_OWN_FRAMES)  # the user's ``t.data = other``
        self._graph.executor.rebind(self._operand.id, new, shared=self._shared(), span=where)
        if self._base is None:  # no alias was ever taken: the old value has no other handle
            self._graph.executor.release(self._operand.id)
        self._share(other)

    @property
    def data(self) -> Tensor:
        """A new handle to the same value (torch's ``.data``); ``t.data = other`` rebinds ``t``
        to ``other``'s value in place (``t`` stays the same object; ``other`` is shared, not
        copied, as in torch).

        Example:
            >>> import dtorch
            >>> t = dtorch.zeros(2)
            >>> t.data = dtorch.ones(3)
            >>> t.tolist(), t.data.shape
            ([1.0, 1.0, 1.0], torch.Size([3]))
        """
        return self._alias()

    @data.setter
    def data(self, other: TensorBase) -> None:
        if not isinstance(other, TensorBase):
            raise TypeError(f"data: expected a dtorch.Tensor, got {type(other).__name__}")
        with self._graph._writes:  # not between another thread's in-place read and write-back
            self._rebind(other)

    def set_name(self, name: str | None) -> None:
        """A user label of this handle (shown by ``repr``; not part of the value).

        Example:
            >>> import dtorch
            >>> t = dtorch.zeros(1)
            >>> t.set_name("w"); t.get_name()
            'w'
        """
        if name is not None and not isinstance(name, str):
            raise TypeError(f"set_name: expected a str or None, got {type(name).__name__}")
        self._name = name

    def get_name(self) -> str | None:
        """The label given by ``set_name`` (None when unnamed).

        Example:
            >>> import dtorch
            >>> t = dtorch.zeros(1)
            >>> t.get_name() is None, t.set_name("w"), t.get_name()
            (True, None, 'w')
        """
        return self._name

    # --- copy and pickle ----------------------------------------------------------------------
    def __copy__(self) -> TensorBase:
        """``copy.copy``: another handle of this class to the same value (torch's shallow copy
        shares the storage too); it keeps the value alive on its own, so either may go first.

        Example:
            >>> import copy, dtorch
            >>> t = dtorch.zeros(2)
            >>> c = copy.copy(t)
            >>> del t
            >>> c.add_(1).tolist()
            [1.0, 1.0]
        """
        return self._twin(self, None)

    def __deepcopy__(self, memo: dict[int, Any]) -> TensorBase:
        """``copy.deepcopy``: a handle of this class to a copy of the value (``clone``: same
        mesh, placements and graph; the graph itself is shared, as a device would be), as
        torch's deep copy copies the storage; so ``copy.deepcopy(model)`` works.

        Example:
            >>> import copy, dtorch
            >>> t = dtorch.zeros(2)
            >>> c = copy.deepcopy(t)
            >>> _ = c.add_(1)
            >>> t.tolist(), c.tolist()
            ([0.0, 0.0], [1.0, 1.0])
        """
        clone: TensorBase = cast(Any, self).clone()  # every handle is a dtorch.Tensor
        return self._twin(clone, memo)

    def _twin(self, source: TensorBase, memo: dict[int, Any] | None) -> TensorBase:
        """A handle of this class to ``source``'s value, with this handle's name and the slots
        a subclass adds (a Parameter's ``requires_grad``): shared, or deep copies with
        ``copy.deepcopy``'s ``memo`` (entered first, so a slot that refers back finds it)."""
        made = object.__new__(type(self))
        made._share(source)
        made._name = self._name
        if memo is not None:
            memo[id(self)] = made
        for name in _extra_slots(type(self)):
            if hasattr(self, name):
                value = getattr(self, name)
                setattr(made, name, value if memo is None else copy.deepcopy(value, memo))
        return made

    def __reduce_ex__(self, protocol: SupportsIndex) -> NoReturn:
        """A dtorch tensor is not pickled: its value lives on its graph's devices."""
        raise TypeError(
            "a dtorch.Tensor cannot be pickled: its value lives on the devices of its graph; "
            "pickle t.to_torch() (a torch tensor) instead, or save a traced program with "
            "Program.save"
        )

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
        """torch's ``size(dim=None)``: the global shape (not a shard's), or the size of one dim
        (a negative one counts from the end); never waits.

        Example:
            >>> import dtorch
            >>> mesh = dtorch.init_device_mesh("cpu", 2)
            >>> t = dtorch.zeros(4, 3, device_mesh=mesh, placements=[dtorch.Shard(0)])
            >>> t.size(), t.size(0), t.size(-1)
            (torch.Size([4, 3]), 4, 3)
        """
        if dim is None:
            return self.shape
        if isinstance(dim, (bool, tuple, list)) or not hasattr(dim, "__index__"):
            raise TypeError(f"size(): argument 'dim' must be int, not {type(dim).__name__}")
        return self._operand.shape[normalize_dims(dim, self.ndim, op="size", needs_a_dim=True)[0]]

    @property
    def ndim(self) -> int:
        return len(self._operand.shape)

    def dim(self) -> int:
        """The number of dims of the tensor (``ndim``, not the mesh's); never waits.

        Example:
            >>> import dtorch
            >>> dtorch.zeros(2, 3).dim(), dtorch.tensor(1.0).dim()
            (2, 0)
        """
        return self.ndim

    def numel(self) -> int:
        """The number of elements of the global tensor (not of a shard); never waits.

        Example:
            >>> import dtorch
            >>> mesh = dtorch.init_device_mesh("cpu", 2)
            >>> dtorch.numel(dtorch.zeros(4, 3, device_mesh=mesh, placements=[dtorch.Shard(0)]))
            12
        """
        tensor_arg("numel", self)  # dtorch.numel(x) is this method
        return math.prod(self._operand.shape)

    def nelement(self) -> int:
        """torch's alias of ``numel()``: the elements of the global tensor; never waits.

        Example:
            >>> import dtorch
            >>> dtorch.zeros(2, 3).nelement()
            6
        """
        return self.numel()

    @property
    def dtype(self) -> torch.dtype:
        return self._operand.dtype

    @property
    def device(self) -> torch.device:
        """The first device of the tensor's mesh, as a ``torch.device``: CPU device 0 is
        ``torch.device("cpu")`` (as in torch), other devices carry their index (``cuda:1``).

        Example:
            >>> import dtorch
            >>> dtorch.zeros(2).device
            device(type='cpu')
        """
        return self._operand.mesh.first_device()

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

    @property
    def is_cuda(self) -> bool:
        return self._operand.mesh.device_type.type == "cuda"

    @property
    def is_cpu(self) -> bool:
        return self._operand.mesh.device_type.type == "cpu"

    @property
    def is_meta(self) -> bool:
        """False: a dtorch tensor always holds values on its devices (a torch meta tensor has
        none). ``is_sparse`` and ``is_quantized`` are False too (dtorch's layouts are strided,
        its dtypes plain); code such as ``torch.nn.init.trunc_normal_`` reads them.

        Example:
            >>> import dtorch
            >>> t = dtorch.zeros(2)
            >>> t.is_meta, t.is_sparse, t.is_quantized
            (False, False, False)
        """
        return False

    is_sparse = is_quantized = is_meta

    def is_complex(self) -> bool:
        """Whether the dtype is complex, as torch's; ``is_signed()`` likewise; never waits.

        Example:
            >>> import dtorch
            >>> t = dtorch.zeros(2, dtype=dtorch.uint8)
            >>> t.is_complex(), t.is_signed(), dtorch.ones(1).is_signed()
            (False, False, True)
        """
        return self._operand.dtype.is_complex

    def is_signed(self) -> bool:
        return self._operand.dtype.is_signed

    @property
    def itemsize(self) -> int:
        """Bytes per element, as torch's (``element_size()``); ``nbytes`` of the full tensor.

        Example:
            >>> import dtorch
            >>> t = dtorch.zeros(2, 3, dtype=dtorch.float16)
            >>> t.itemsize, t.element_size(), t.nbytes
            (2, 2, 12)
        """
        return self.dtype.itemsize

    def element_size(self) -> int:
        """Bytes per element of the dtype, as torch's (``itemsize``); never waits.

        Example:
            >>> import dtorch
            >>> dtorch.zeros(2, dtype=dtorch.float16).element_size()
            2
        """
        return self.itemsize

    @property
    def nbytes(self) -> int:
        return self.numel() * self.itemsize

    def ndimension(self) -> int:
        """torch's alias of ``dim()``: the number of dims; never waits.

        Example:
            >>> import dtorch
            >>> dtorch.zeros(2, 3, 4).ndimension()
            3
        """
        return self.ndim

    def is_floating_point(self) -> bool:
        """True when the dtype is a floating point one (not complex); never waits.

        Example:
            >>> import dtorch
            >>> dtorch.is_floating_point(dtorch.ones(2)), dtorch.arange(2).is_floating_point()
            (True, False)
        """
        tensor_arg("is_floating_point", self)  # dtorch.is_floating_point(x) too
        return self._operand.dtype.is_floating_point

    def is_contiguous(self) -> bool:
        """Always True (DTorch's answer). Where layout matters, dtorch follows torch on the
        global tensor: ``contiguous``, ``reshape`` and ``flatten`` copy exactly where torch
        would (after a transpose, a column slice; ``dtorch.api.strides``), else they are
        views whose writes reach the input; a ``view`` torch refuses copies (a program that
        checked ``is_contiguous()`` first must not fail).

        Example:
            >>> import dtorch
            >>> dtorch.zeros(2, 3).t().is_contiguous()  # torch: False
            True
        """
        return True

    def stride(self, dim: int | None = None) -> Any:
        """The row-major strides of the global shape (DTorch's ``is_contiguous()`` is True,
        and these are the strides that agree with it), or the one of ``dim``, as torch's
        ``stride()`` / ``stride(dim)``.

        Example:
            >>> import dtorch
            >>> t = dtorch.zeros(2, 3, 4)
            >>> t.stride(), t.stride(-1)
            ((12, 4, 1), 1)
        """
        strides = contiguous_strides(tuple(self.shape))
        if dim is None:
            return strides
        return strides[normalize_dim(dim, self.ndim, op="stride", needs_a_dim=True)]

    def storage_offset(self) -> int:
        """0: dtorch keeps no storage offsets (its views are values of their own layout)."""
        return 0

    def is_same_size(self, other: TensorBase) -> bool:
        """Whether ``other`` has this tensor's shape, as torch's ``is_same_size``."""
        tensor_arg("is_same_size", other)
        return self.shape == other.shape

    def __len__(self) -> int:
        if not self._operand.shape:
            raise TypeError("len() of a 0-d tensor")
        return self._operand.shape[0]

    def __repr__(self) -> str:
        name = "" if self._name is None else f", name={self._name!r}"
        return f"dtorch.Tensor({self._operand.describe()}, id={self._operand.id}{name})"

    # --- values (wait for the devices) ------------------------------------------------------
    def to_torch_async(self) -> TensorFuture:
        """A future of the full torch tensor (Shard concatenated, Replicate one copy, Partial
        summed), returned at once; its ``get()`` waits for the devices.

        Example:
            >>> import dtorch
            >>> future = (dtorch.arange(3) * 2).to_torch_async()
            >>> future.get().tolist()
            [0, 2, 4]
        """
        return to_torch_async(self)

    def to_torch(self) -> torch.Tensor:
        """The full value as a torch tensor on the CPU (waits for the devices): Shard
        concatenated, Replicate one copy, Partial summed.

        Example:
            >>> import dtorch
            >>> t = dtorch.ones(2, device_mesh=dtorch.init_device_mesh("cpu", 2))  # Replicate
            >>> t.to_torch(), t.view([dtorch.Partial()]).to_torch()  # the parts summed
            (tensor([1., 1.]), tensor([2., 2.]))
        """
        return self.to_torch_async().get()

    def full_tensor(self, *, grad_placements: Any = None) -> torch.Tensor:
        """DTensor's name of ``to_torch()``: the full value as a torch tensor. Its
        ``grad_placements`` concern the backward pass, which dtorch does not record: only
        None is taken.

        Example:
            >>> import dtorch
            >>> dtorch.arange(3, device_mesh=dtorch.init_device_mesh("cpu", 2)).full_tensor()
            tensor([0, 1, 2])
        """
        if grad_placements is not None:
            raise ParamError(
                "full_tensor: grad_placements concern gradients, which dtorch does not record; "
                "accepted: grad_placements=None"
            )
        return self.to_torch()

    def numpy(self) -> np.ndarray:
        """The full value as a numpy array, ``to_torch().numpy()`` (waits for the devices; a
        dtype numpy lacks, bfloat16, raises torch's TypeError).

        Example:
            >>> import dtorch
            >>> dtorch.arange(3).numpy()
            array([0, 1, 2])
        """
        return self.to_torch().numpy()

    def item(self) -> Any:
        """The value of a one-element tensor as a Python number (waits for the devices); any
        other size raises a ShapeError (a ValueError, where torch raises a RuntimeError).

        Example:
            >>> import dtorch
            >>> dtorch.tensor([2.5]).item(), dtorch.arange(4).sum().item()
            (2.5, 6)
        """
        if self.numel() != 1:
            raise ShapeError(
                f"item() needs a tensor of one element, this one has shape {list(self.shape)}"
            )
        return self.to_torch().item()

    def tolist(self) -> Any:
        """The full value as (nested) Python lists, ``to_torch().tolist()`` (waits for the
        devices; the shards are put together as ``to_torch`` does).

        Example:
            >>> import dtorch
            >>> mesh = dtorch.init_device_mesh("cpu", 2)
            >>> dtorch.arange(4, device_mesh=mesh, placements=[dtorch.Shard(0)]).tolist()
            [0, 1, 2, 3]
        """
        return self.to_torch().tolist()

    def equal(self, other: Tensor) -> bool:
        """True when both tensors have the same shape and values (waits for both); meshes and
        placements do not matter, a torch tensor is refused (TypeError).

        Example:
            >>> import dtorch
            >>> mesh = dtorch.init_device_mesh("cpu", 2)
            >>> s = dtorch.arange(4, device_mesh=mesh, placements=[dtorch.Shard(0)])
            >>> s.equal(dtorch.arange(4)), s.equal(dtorch.arange(3))
            (True, False)
        """
        if not isinstance(other, TensorBase):
            raise TypeError(
                f"equal: expected a dtorch.Tensor, got {type(other).__qualname__} of "
                f"{type(other).__module__}; convert torch "
                "tensors with dtorch.from_torch(...) first, or compare t.to_torch() with it"
            )
        return self.shape == other.shape and bool(torch.equal(self.to_torch(), other.to_torch()))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        array = self.numpy()
        return array if dtype is None else array.astype(dtype)

    #: numpy defers to the tensor's reflected operator, as it does to torch.Tensor (whose
    #: value is also 1000): ``np.float64(0.5) * t`` is a dtorch Tensor, not a gathered array.
    __array_priority__ = 1000

    __hash__ = object.__hash__  # identity, like torch.Tensor (== records an operator)


def is_tensor(value: object) -> TypeGuard[Tensor]:
    """``isinstance(value, TensorBase)`` for the operator modules, typed: every handle is a
    ``dtorch.Tensor`` (or a subclass), whose methods they call."""
    return isinstance(value, TensorBase)


_OWN_SLOTS = frozenset(TensorBase.__slots__)


def _extra_slots(cls: type) -> list[str]:
    """The slots a handle class adds to ``TensorBase``'s (a Parameter's ``requires_grad``)."""
    return [
        name
        for klass in cls.__mro__
        for name in getattr(klass, "__slots__", ())
        if name not in _OWN_SLOTS
    ]

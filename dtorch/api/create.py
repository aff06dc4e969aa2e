"""Recording Create operators for a given handle class: the core of the creation functions.

``dtorch.api.creation`` (``zeros``, ``from_torch``, ...) calls these with ``Tensor``; the
operator modules and ``Tensor.__init__`` call them with a handle class of their own (an
input's), so that none of them imports ``dtorch.api.tensor``, which imports them.

The keywords: ``device_mesh``, ``placements``, ``dtype``, ``graph`` and ``device`` (``device``
and ``device_mesh`` are mutually exclusive; without either the graph's default mesh is used;
without ``placements`` every mesh dimension is Replicate).

Example:
    >>> import torch, dtorch
    >>> from dtorch.api.handle import TensorBase, is_tensor
    >>> t = distribute(dtorch.Tensor, torch.arange(3))
    >>> isinstance(t, TensorBase), t.tolist()
    (True, [0, 1, 2])
"""

from __future__ import annotations

import functools
import math
import operator
import os
import sys
import warnings
from collections.abc import Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from dtorch.api.graph import Graph, mesh_of, resolved
from dtorch.api.handle import TensorBase, is_tensor
from dtorch.api.ops.convert import cast, clone
from dtorch.api.record import emit_one
from dtorch.api.redistribute import normalized, redistribute
from dtorch.api.strides import ROW_MAJOR, mark
from dtorch.errors import MeshError, ParamError, ShapeError
from dtorch.ir.dtypes import as_dtype
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.opkind import CreateKind
from dtorch.ir.params import CreateParam
from dtorch.ir.placement import Partial, Placement, Replicate
from dtorch.ir.rules import OutputMeta
from dtorch.ir.rules.ints import check_scalars, check_sizes, check_storage
from dtorch.ir.rules.registry import check_summable
from dtorch.ir.subsplit import check_marks

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def graph_or_default(graph: Graph | None, name: str = "") -> Graph:
    """``graph``, else the calling thread's default graph (TypeError for anything else,
    naming ``name``, the creation function, where given)."""
    if graph is None:
        return Graph.default_graph()
    graph = resolved(graph)
    if not isinstance(graph, Graph):
        raise TypeError(
            f"{name}{': ' if name else ''}graph must be a dtorch.Graph (or None: the default "
            f"graph), got {type(graph).__module__}.{type(graph).__name__} {graph!r}"
        )
    return graph


def mesh_for(graph: Graph, device_mesh: Any, device: Any) -> DeviceMesh:
    """The mesh the keywords name (the graph's default mesh when neither is given)."""
    if device_mesh is not None and device is not None:
        raise MeshError("give device_mesh or device, not both")
    if device_mesh is not None:
        if not isinstance(device_mesh, DeviceMesh):
            raise MeshError(
                f"device_mesh must be a dtorch.DeviceMesh, got {type(device_mesh).__name__}"
            )
    else:
        device_mesh = graph.default_device_mesh if device is None else mesh_of(device)
    graph.require(device_mesh, "create")
    return device_mesh


def shape_of(size: Sequence[Any]) -> tuple[int, ...]:
    """torch's ``*size`` convention: ints, or one tuple/list/torch.Size of ints."""
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = tuple(size[0])
    size = tuple(_held_int(s) for s in size)
    for s in size:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)):  # torch: TypeError
            raise TypeError(
                f"sizes must be non-negative ints (or one tuple of them), got {tuple(size)!r}"
            )
        if s < 0:
            raise ShapeError(
                f"sizes must be non-negative ints (or one tuple of them), got {tuple(size)!r}"
            )
    return tuple(int(s) for s in size)


def _held_int(s: Any) -> Any:
    """An integer tensor of one element (torch's or dtorch's) as its int, as torch reads a
    size; anything else as it is, for the check that follows."""
    if not isinstance(s, (torch.Tensor, TensorBase)) or s.numel() != 1:
        return s
    exact = not (s.dtype.is_floating_point or s.dtype.is_complex or s.dtype == torch.bool)
    return operator.index(s) if exact else s


def float_dtype(graph: Graph | None, dtype: torch.dtype | None) -> torch.dtype:
    """``dtype``, else the graph's default (floating) dtype."""
    return dtype if dtype is not None else graph_or_default(graph).default_dtype


#: The public name of a creation kind where it is not the kind's own (messages).
_CALLED = {CreateKind.FROM_TENSOR: "from_torch"}


def create(
    cls: type[TensorBase],
    kind: CreateKind,
    shape: tuple[int, ...],
    dtype: torch.dtype,
    *,
    graph: Graph | None,
    device_mesh: Any,
    device: Any,
    placements: Sequence[Placement] | None,
    args: tuple[Any, ...] = (),
    generator: torch.Generator | None = None,
    value: torch.Tensor | None = None,
    strides: tuple[int, ...] = (),
) -> Tensor:
    """Record a Create operator, its result made by ``cls``; every creation function ends here
    (``strides``: a random fill's view layout, ``CreateParam.strides``)."""
    dtype = as_dtype(kind.name.lower(), dtype)  # float, int, bool, complex as torch reads them
    check_sizes(kind.name.lower(), shape)  # as torch refuses them: ints of 64 bits only
    check_storage(kind.name.lower(), shape, dtype)
    check_scalars(kind.name.lower(), args)
    if kind is CreateKind.FULL:  # full, full_like, new_full, fill_
        _check_fill(shape, args[0], dtype)
    g = graph_or_default(graph, kind.name.lower())
    mesh = mesh_for(g, device_mesh, device)
    if placements is None:
        placements = (Replicate(),) * mesh.ndim
    called = _CALLED.get(kind, kind.name.lower())
    placed = normalized(called, placements, mesh, len(shape))
    check_marks(called, shape, placed)  # the kernel slices each segment of a marked dim
    if kind == CreateKind.EMPTY:  # nothing to sum: an empty Partial is an empty Replicate
        placed = tuple(Replicate() if isinstance(p, Partial) else p for p in placed)
    check_summable(called, dtype, placed)
    param = CreateParam(kind, shape, dtype, mesh, placed, args, generator, value, strides=strides)
    out = OutputMeta(shape, dtype, placed)
    made = emit_one(cls._result, g, kind.name.lower(), param, (), out, mesh)
    return mark(made, ROW_MAJOR)  # a new tensor: row-major, as torch's


def _check_fill(shape: tuple[int, ...], fill: bool | int | float, dtype: torch.dtype) -> None:
    """torch's refusal of a fill its dtype cannot hold (nan or 300 for uint8, 2**63 for int64,
    70000 for float16), at the call rather than at the fetch."""
    why = _fill_refusal(dtype, min(math.prod(shape), 2), type(fill).__name__, fill)
    if why is not None:
        raise ParamError(f"full: fill_value {fill!r} for dtype {dtype}: {why}")


@functools.lru_cache(maxsize=1024)
def _fill_refusal(
    dtype: torch.dtype, count: int, kind: str, fill: bool | int | float
) -> str | None:
    """torch's own check, on at most two elements (torch lets one float16 element overflow to
    inf); cached: torch's call costs the recording thread a GIL hand-over in a busy graph.
    ``kind`` keeps 1, 1.0 and True apart (they are equal keys)."""
    try:
        torch.full((count,), fill, dtype=dtype)
    except RuntimeError as error:
        return str(error)
    return None


#: dtorch's own source directory: frames there are not the user's.
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

_KEYWORDS = frozenset({"graph", "device_mesh", "device", "placements"})


def placement_keywords(kw: dict[str, Any]) -> dict[str, Any]:
    """The placement keywords, with a clear error for anything else."""
    unknown = set(kw) - _KEYWORDS - {"requires_grad", "layout", "pin_memory"}
    if unknown:
        raise TypeError(
            f"unexpected keyword(s) {sorted(unknown)}; accepted: {sorted(_KEYWORDS)} and dtype"
        )
    if kw.get("requires_grad"):
        raise ValueError(
            "dtorch tensors do not record gradients; requires_grad=True is not supported"
        )
    _check_storage(kw.get("layout"), kw.get("pin_memory"))
    return {k: kw.get(k) for k in _KEYWORDS}


def _check_storage(layout: Any, pin_memory: Any) -> None:
    """torch's ``layout``/``pin_memory`` keywords: only what dtorch makes (dense tensors on
    the mesh's devices) is accepted; anything else was ignored, giving another tensor."""
    if layout is not None and layout is not torch.strided:
        if not isinstance(layout, torch.layout):
            raise TypeError(f"layout must be a torch.layout, got {type(layout).__name__}")
        raise ParamError(
            f"layout={layout} is not supported: dtorch tensors are dense; accepted: "
            "torch.strided (the default)"
        )
    if pin_memory:
        raise ParamError(
            "pin_memory=True is not supported: dtorch tensors live on their mesh's devices, "
            "not in the client's page-locked memory; accepted: pin_memory=False"
        )


def distribute(
    cls: type[TensorBase], data: torch.Tensor, *, dtype: torch.dtype | None = None, **kw: Any
) -> Tensor:
    """``from_torch``: distribute a full torch tensor (Shard chunks it, Replicate copies it,
    Partial puts the value on the first rank of that mesh dimension and zeros elsewhere)."""
    if not isinstance(data, torch.Tensor):
        raise TypeError(f"from_torch needs a torch.Tensor, got {type(data).__name__}")
    if data.layout != torch.strided or data.is_quantized or data.is_meta or data.is_nested:
        what = "nested" if data.is_nested else str(data.layout)
        raise ParamError(
            f"from_torch: a {what} {data.dtype} tensor on {data.device} is not supported "
            "(sparse, quantized, meta and nested tensors are not); accepted: a dense strided "
            "tensor with data, e.g. data.to_dense(), data.dequantize() or "
            "nested.to_padded_tensor(0.0)"
        )
    value = data.detach().to("cpu", dtype or data.dtype, copy=True).contiguous()
    shape, kind = tuple(value.shape), CreateKind.FROM_TENSOR
    return create(cls, kind, shape, value.dtype, value=value, **placement_keywords(kw))


def beside(like: TensorBase, value: torch.Tensor) -> Tensor:
    """``value`` (a full torch tensor) Replicate on ``like``'s mesh and graph, as ``like``'s
    handle class: a torch operand (an index, a 0-d tensor) of an operator on ``like``.

    Example:
        >>> import dtorch, torch
        >>> t = dtorch.zeros(2, device_mesh=dtorch.init_device_mesh("cpu", 2))
        >>> beside(t, torch.arange(3)).placements
        [Replicate()]
    """
    return distribute(type(like), value, graph=like.graph, device_mesh=like.device_mesh)


def from_data(
    cls: type[TensorBase], data: Any, *, dtype: torch.dtype | None = None, **kw: Any
) -> Tensor:
    """``tensor``: ``torch.tensor(data)`` distributed like ``distribute`` (Python floats take
    the graph's default dtype; data with a dtype of its own, a NumPy array or scalar, keeps
    it, as in torch); a dtorch tensor is copied (``copy_of``)."""
    if is_tensor(data):
        return copy_of(data, dtype, kw)
    if isinstance(data, torch.Tensor):
        return distribute(cls, data, dtype=dtype, **kw)
    try:
        value = torch.tensor(data, dtype=dtype)
    except TypeError:  # dtorch tensors in the lists (torch's len() of one fails): their values
        value = torch.tensor(_fetched(data), dtype=dtype)
    if dtype is None and value.dtype == torch.get_default_dtype() and not hasattr(data, "dtype"):
        value = value.to(float_dtype(kw.get("graph"), None))  # Python floats were in it
    return distribute(cls, value, **kw)


#: How deep dtorch walks nested lists (of data, of an index) itself: deeper ones, and lists
#: that hold themselves, are left as they are for torch to take or refuse with its own error.
NESTING = 256


def _fetched(data: Any, within: list[int] | None = None) -> Any:
    """Nested lists and tuples with each dtorch tensor in them as its torch value (which
    ``torch.tensor`` takes as it takes a torch tensor there: a one-element one as a number);
    ``within``: the ids of the lists around ``data``."""
    if is_tensor(data):
        return data.to_torch()
    within = [] if within is None else within
    if not isinstance(data, (list, tuple)) or len(within) >= NESTING:
        return data
    if id(data) in within:  # torch's words; its own walk would meet a dtorch tensor first
        raise TypeError("tensor: self-referential lists are incompatible")
    within.append(id(data))
    try:
        return [_fetched(item, within) for item in data]
    finally:
        within.pop()


def copy_of(source: Tensor, dtype: torch.dtype | None, kw: dict[str, Any]) -> Tensor:
    """``tensor(t)`` of a dtorch tensor, as ``torch.tensor`` of a torch tensor: a copy (with
    torch's warning), converted to what the keywords ask for (else the source's dtype, mesh
    and placements).

    Example:
        >>> import warnings, dtorch
        >>> t = dtorch.zeros(2)
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     c = copy_of(t, None, {})
        >>> _ = c.add_(1)
        >>> t.tolist(), c.tolist()
        ([0.0, 0.0], [1.0, 1.0])
    """
    converted = from_dtorch(source, dtype, kw)  # bad keywords raise before the warning
    warnings.warn(
        "To copy construct from a tensor, it is recommended to use sourceTensor.detach()."
        "clone(), rather than dtorch.tensor(sourceTensor).",
        UserWarning,
        stacklevel=_user_level(),
    )
    return clone(converted)


# How many frames up the user's call is (``dtorch.tensor`` is called through the module's
# ``__call__`` or as ``dtorch.api.creation.tensor``), for the warning's line.
def _user_level() -> int:
    frame: FrameType | None = sys._getframe(2)
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(_OWN_DIR):
        frame, level = frame.f_back, level + 1
    return level


def construct(
    cls: type[TensorBase], fixed: torch.dtype | None, args: tuple[Any, ...], kw: dict[str, Any]
) -> Tensor:
    """``dtorch.Tensor(...)`` as torch's constructor: ``()`` an empty float tensor of shape
    ``(0,)``; sizes or a ``torch.Size`` an uninitialised tensor (``empty``); a torch tensor is
    distributed (``from_torch``); a dtorch tensor is shared, not copied (torch's
    ``torch.Tensor(t)`` aliases too), converted when keywords ask for it; other data (lists,
    numpy) as ``tensor`` with a float dtype. ``fixed``: the dtype of a typed alias.

    Example:
        >>> import torch, dtorch
        >>> dtorch.Tensor(2, 3).shape, dtorch.Tensor().shape, dtorch.LongTensor([1, 2]).dtype
        (torch.Size([2, 3]), torch.Size([0]), torch.int64)
    """
    given = kw.pop("dtype", None)
    dtype = given if fixed is None else fixed
    if len(args) == 1 and is_tensor(args[0]):
        return from_dtorch(args[0], dtype, kw)
    if len(args) == 1 and isinstance(args[0], torch.Tensor):
        return distribute(cls, args[0], dtype=dtype, **kw)
    dtype = float_dtype(kw.get("graph"), dtype)
    if all(isinstance(a, int) and not isinstance(a, bool) for a in args):
        return _empty(cls, args or (0,), dtype, kw)
    if len(args) == 1 and isinstance(args[0], torch.Size):
        return _empty(cls, args, dtype, kw)
    if len(args) == 1:
        return from_data(cls, args[0], dtype=dtype, **kw)
    raise TypeError(
        f"Tensor: got {[type(a).__name__ for a in args]}; accepted: (), sizes, a torch.Size, "
        "a torch tensor, a dtorch tensor or data (lists, numpy)"
    )


# ``dtorch.Tensor(2, 3)``: an uninitialised tensor, as ``empty``.
def _empty(
    cls: type[TensorBase], size: tuple[Any, ...], dtype: torch.dtype, kw: dict[str, Any]
) -> Tensor:
    return create(cls, CreateKind.EMPTY, shape_of(size), dtype, **placement_keywords(kw))


def from_dtorch(source: Tensor, dtype: torch.dtype | None, kw: dict[str, Any]) -> Tensor:
    """The source's value (an alias) converted to what the keywords ask for: moved first,
    then cast, so a Partial source moved to Replicate (``device=``) is summed before a cast
    to an integer dtype, which torch's value needs."""
    mesh, placements = kw.pop("device_mesh", None), kw.pop("placements", None)
    device = kw.pop("device", None)
    kw.pop("graph", None)
    placement_keywords(kw)
    result = source._alias()
    if device is not None or mesh is not None or placements is not None:
        target = mesh_for(source.graph, mesh, device) if mesh or device else source.device_mesh
        result = redistribute(result, target, placements)
    return result if dtype is None else cast(result, dtype)

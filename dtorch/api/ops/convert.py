"""Conversions and copies: dtype casts, ``clone``, ``copy_``, ``detach``, and the moves and
redistributions of ``to``.

Example:
    >>> import torch, dtorch
    >>> t = dtorch.arange(3)
    >>> t.float().dtype, t.to(torch.int8).tolist(), t.clone().tolist()
    (torch.float32, [0, 1, 2], [0, 1, 2])
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import torch

from dtorch.api.dims import as_int
from dtorch.api.graph import mesh_of
from dtorch.api.handle import TensorBase
from dtorch.api.record import (
    infer,
    record,
    record_inferred,
    record_one,
    redistribute_to,
    tensor_arg,
)
from dtorch.api.redistribute import move, redistribute
from dtorch.api.strides import ROW_MAJOR, is_contiguous, known, mark, overlapping, preserved
from dtorch.errors import DtypeError, MeshError, ParamError, ShapeError
from dtorch.ir.device import TORCH_MAX_INDEX, parse_device
from dtorch.ir.dtypes import as_dtype, is_dtype
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.params import (
    ActivationParam,
    BroadcastBinaryParam,
    CastParam,
    ClampParam,
    CloneParam,
    ContiguousParam,
    CopyParam,
    IndexEntry,
)
from dtorch.ir.placement import Replicate
from dtorch.ir.rules.elementwise import broadcast_or_reason, in_place_refusal

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

_T = TypeVar("_T")
_P = ParamSpec("_P")
_R = TypeVar("_R")

_CLONE = CloneParam()
_COPY = CopyParam()
_ROW_MAJOR = ContiguousParam()  # of a private copy: a view of it where row-major already
_ROW_MAJOR_COPY = ContiguousParam(copy=True)


def written(input: Tensor, result: Callable[[], Tensor], inplace: bool) -> Tensor:
    """torch's ``inplace=`` flag of a function: ``result()`` written into ``input`` (which is
    returned) under the write lock when ``inplace``, as ``writer`` does; else ``result()``.

    Example:
        >>> import dtorch
        >>> t = dtorch.tensor([-1.0, 2.0])
        >>> written(t, lambda: t.clamp(min=0), True) is t, t.tolist()
        (True, [0.0, 2.0])
    """
    if not inplace:
        return result()
    with input._graph._writes:
        return input.copy_(result())


def activated(
    name: str, param: ActivationParam, input: Tensor, inplace: bool, known: int = 1
) -> Tensor:
    """``param``'s activation of ``input`` with torch's ``inplace=`` flag: in place, one
    operator whose devices write ``input``'s shards (torch's ``relu_``: no temporary and no
    write-back copy, unlike ``written``), recorded under the write lock; ``input`` is
    returned. ``known``: the dtorch frames above this one (``record_one``'s).

    Example:
        >>> import dtorch
        >>> from dtorch.ir.opkind import ActivationKind
        >>> t = dtorch.tensor([-1.0, 2.0])
        >>> activated("relu", ActivationParam(ActivationKind.RELU), t, True) is t, t.tolist()
        (True, [0.0, 2.0])
    """
    if not inplace:
        return record_one(name, param, (input,), known + 1)
    tensor_arg(name, input)
    with input._graph._writes:
        writable(name, input)
        record(name, _in_place_form(param), (input,))
    return input


def wrote(name: str, inner: str, param: InPlaceParam, inputs: tuple[TensorBase, ...]) -> bool:
    """Record ``param``'s in-place form (``name``), whose devices write ``inputs[0]``'s
    shards, where the out-of-place result (``inner``) has that tensor's dtype, shape and
    placements (``in_place_refusal``); False, recording nothing, where it has not (the
    caller writes the result back). The out-of-place operator's refusals raise here.

    Example:
        >>> import dtorch
        >>> from dtorch.ir.params import ClampParam
        >>> from dtorch.ir.scalar import Scalar
        >>> t = dtorch.tensor([-2.0, 3.0])
        >>> wrote("clamp_", "clamp", ClampParam(Scalar.of(0.0)), (t,)), t.tolist()
        (True, [0.0, 3.0])
    """
    found = infer(inner, param, inputs)
    if in_place_refusal(found[1], inputs[0]._operand) is not None:
        return False
    record_inferred(name, _in_place_form(param), inputs, found)  # the in-place rule's check
    return True


#: The params with an in-place form (``wrote``, ``activated``).
InPlaceParam = BroadcastBinaryParam | ClampParam | ActivationParam


@functools.lru_cache(maxsize=1024)
def _in_place_form(param: InPlaceParam) -> InPlaceParam:
    # cached: ``dataclasses.replace`` costs more than the rest of an in-place call
    return dataclasses.replace(param, in_place=True)


def writer(fn: Callable[Concatenate[_T, _P], _R]) -> Callable[Concatenate[_T, _P], _R]:
    """``fn``, whose first argument is the tensor it writes, run holding that tensor's
    graph's write lock: an in-place operator records a read of the tensor and a write-back,
    and another thread's write recorded between the two would be lost, where each of
    torch's in-place operators is one call (four threads adding 1 to one tensor 2,000 times
    each had reached about 2,200, not 8,000).

    Example:
        >>> import threading, dtorch
        >>> t = dtorch.zeros(1)
        >>> def add() -> None:
        ...     for _ in range(50):
        ...         t.add_(1)
        >>> threads = [threading.Thread(target=add) for _ in range(4)]
        >>> _ = [thread.start() for thread in threads]; _ = [thread.join() for thread in threads]
        >>> t.item()
        200.0
    """

    @functools.wraps(fn)
    def run(target: _T, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        lock = getattr(getattr(target, "_graph", None), "_writes", None)
        if lock is None:  # not a dtorch tensor: fn's own TypeError says so
            return fn(target, *args, **kwargs)
        with lock:
            return fn(target, *args, **kwargs)

    return run


def cast(t: Tensor, dtype: torch.dtype) -> Tensor:
    """``t`` converted to ``dtype`` (the same handle when it already has it, like torch)."""
    dtype = as_dtype("to", dtype)  # torch's .to(float) and .to(dtype=int) too
    if dtype == t.dtype:
        return t
    return _preserving(record("to", CastParam(dtype), (t,))[0], t)


#: The memory formats of torch's copies that dtorch keeps (no channels-last layouts).
PLAIN_FORMATS = (torch.preserve_format, torch.contiguous_format)


def checked_format(name: str, given: Any, accepted: tuple[Any, ...] = PLAIN_FORMATS) -> Any:
    """``given`` as a ``memory_format=`` of ``name`` (one of ``accepted``); a channels-last
    format is refused (dtorch keeps torch's default layouts only), anything else is not a
    memory format (TypeError).

    Example:
        >>> checked_format("clone", torch.contiguous_format)
        torch.contiguous_format
    """
    if any(given is fmt for fmt in accepted):
        return given
    if not isinstance(given, torch.memory_format):
        raise TypeError(
            f"{name}: memory_format must be a torch.memory_format, got {type(given).__name__}"
        )
    raise ParamError(
        f"{name}: memory_format={given} is not supported: dtorch keeps torch's default "
        f"(row-major) layouts only; accepted: {', '.join(map(str, accepted))}"
    )


def cuda_device(device: Any) -> str:
    """``cuda()``'s ``device`` as a device string, as torch takes it: None (``"cuda"``), an
    index, ``"cuda:1"`` or a CUDA ``torch.device``; another device type is refused.

    Example:
        >>> cuda_device(None), cuda_device(1), cuda_device(torch.device("cuda", 0))
        ('cuda', 'cuda:1', 'cuda:0')
    """
    if device is None:
        return "cuda"
    if isinstance(device, (str, torch.device)):
        kind, index = parse_device(device)
        if kind != "cuda":
            raise MeshError(f"cuda: invalid device {device!r}, must be a cuda device")
        return "cuda" if index is None else f"cuda:{index}"
    return f"cuda:{as_int('cuda', 'device', device)}"


def clone(input: Tensor, *, memory_format: Any = torch.preserve_format) -> Tensor:
    """A copy of ``input`` with its shape, dtype, mesh and placements (a Partial stays Partial):
    later in-place writes to either do not reach the other. ``memory_format``: torch's
    ``preserve_format`` (the copy keeps ``input``'s memory order, as torch's) or
    ``contiguous_format`` (row-major).

    Example:
        >>> import dtorch
        >>> t = dtorch.arange(3)
        >>> c = dtorch.clone(t).add_(1)
        >>> t.tolist(), c.tolist()
        ([0, 1, 2], [1, 2, 3])
    """
    fmt = torch.preserve_format if memory_format is None else memory_format  # torch's None
    if checked_format("clone", fmt) is torch.preserve_format:
        return _preserving(record("clone", _CLONE, (input,))[0], input)
    return _row_major_copy(input)


def cast_in(name: str, t: Tensor, dtype: torch.dtype, memory_format: Any) -> Tensor:
    """The cast method ``name`` (``t.float()``...) with torch's ``memory_format``: the copy
    in ``t``'s memory order (``preserve_format``) or row-major (``contiguous_format``); ``t``
    itself where it has ``dtype`` already, as torch returns it either way.

    Example:
        >>> import dtorch
        >>> t = dtorch.arange(6).view(2, 3).T
        >>> cast_in("float", t, torch.float32, torch.contiguous_format).view(-1).tolist()
        [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    """
    fmt = checked_format(name, memory_format)
    out = cast(t, dtype)
    if out is t or fmt is torch.preserve_format:
        return out
    return _made_row_major(name, out)  # the cast's own copy, in place of a second copy


def _row_major_copy(t: Tensor) -> Tensor:
    """``clone(memory_format=torch.contiguous_format)``: a row-major copy, in one copy where
    ``t``'s strides are known (a contiguous copy where torch's layout is another)."""
    strides = known(t)
    if strides is not None and not is_contiguous(t.shape, strides):
        return mark(record("clone", _ROW_MAJOR_COPY, (t,))[0], ROW_MAJOR)
    return _made_row_major("clone", record("clone", _CLONE, (t,))[0])


def _made_row_major(name: str, fresh: Tensor) -> Tensor:
    """``fresh`` (a copy nothing else holds) laid out row-major: kept where its strides are
    known row-major, copied where known otherwise, made row-major on the devices (which lay a
    copy out as they may) where unknown."""
    strides = known(fresh)
    if strides is not None and is_contiguous(fresh.shape, strides):
        return mark(fresh, ROW_MAJOR)
    param = _ROW_MAJOR if strides is None else _ROW_MAJOR_COPY
    return mark(record(name, param, (fresh,))[0], ROW_MAJOR)


def _preserving(out: Tensor, t: Tensor) -> Tensor:
    """``out``, a copy of ``t`` in torch's ``preserve_format``, with its global strides where
    ``t``'s are known (``dtorch.api.strides``)."""
    strides = known(t)
    return out if strides is None else mark(out, preserved(t.shape, strides))


@writer
def copy_(dst: Tensor, src: Tensor) -> Tensor:
    """Copy ``src``'s values into ``dst`` in place (broadcasting ``src`` and converting it to
    ``dst``'s dtype, both inside the one Copy operator); returns ``dst``.

    A ``src`` on another mesh is first redistributed onto ``dst``'s mesh - with ``dst``'s
    placements when the shapes agree; when ``src`` broadcasts, Partial where ``dst`` is
    Partial and Replicate elsewhere - so the copy itself is local to every device (spec 002
    3.5.4: a cross-mesh Copy).
    """
    if isinstance(src, TensorBase) and isinstance(dst, TensorBase):
        mesh = dst.device_mesh
        if src.device_mesh != mesh:
            if src.shape == dst.shape:
                placements = dst.placements
            else:
                placements = [p if p.is_partial() else Replicate() for p in dst.placements]
            src = redistribute(src, mesh, placements)
    writable("copy_", dst)
    record("copy_", _COPY, (dst, src))
    return dst


def writable(name: str, target: Tensor, index: Sequence[IndexEntry] | None = None) -> None:
    """torch's refusal to write ``target`` (or its basic-index region ``target[index]``) in
    place where its elements share memory - an ``expand``-ed view, whose repeated elements
    would each be written (``strides.overlapping``): a ShapeError with torch's words.

    Example:
        >>> import dtorch
        >>> e = dtorch.zeros(3).expand(2, 3)
        >>> e.add_(1)
        Traceback (most recent call last):
        ...
        dtorch.errors.ShapeError: add_: unsupported operation: more than one element of ...
    """
    if overlapping(target, index):
        raise ShapeError(
            f"{name}: unsupported operation: more than one element of the written-to tensor "
            "refers to a single memory location. Please clone() the tensor before performing "
            "the operation."
        )


def fits(name: str, target: Tensor, *operands: Any) -> None:
    """torch's check of an in-place operator's tensor operands, before the operator is
    recorded (whose placement rule would refuse first): ``target``'s elements may not share
    memory (``writable``), and each operand must broadcast to its shape without growing it."""
    writable(name, target)
    for operand in operands:
        if isinstance(operand, (TensorBase, torch.Tensor)):
            # dtorch's cached broadcast: torch.broadcast_shapes costs 25 us (symbolic guards)
            shape = broadcast_or_reason((tuple(target.shape), tuple(operand.shape)))
            if isinstance(shape, str):
                continue  # not broadcastable at all: the operator's own ShapeError says so
            if shape != tuple(target.shape):
                raise ShapeError(
                    f"{name}: output with shape {list(target.shape)} doesn't match the "
                    f"broadcast shape {list(shape)}"
                )


def assign(name: str, target: Tensor, result: Tensor, *, overlapping: bool = False) -> Tensor:
    """``target``'s values replaced by ``result`` (computed from ``target``) in place: torch's
    in-place ``op_`` and ``op=``, which every alias and view of ``target`` sees. The result
    must have ``target``'s shape and a dtype torch casts to ``target``'s; it is moved to
    ``target``'s placements first when the operator chose others (a Replicate operand sharded
    like the other one); returns ``target``. ``overlapping``: the writer may write a tensor
    whose elements share memory (``fill_``, ``masked_fill_``: they set values and read none
    back); torch refuses every other one there (``writable``).

    Example:
        >>> import dtorch
        >>> t = dtorch.arange(4)
        >>> row = t[1:3]
        >>> row += 10
        >>> t.tolist()
        [0, 11, 12, 3]
    """
    if not overlapping:
        writable(name, target)
    if tuple(result.shape) != tuple(target.shape):
        raise ShapeError(
            f"{name}: output with shape {list(target.shape)} doesn't match the broadcast shape "
            f"{list(result.shape)}"
        )
    if not torch.can_cast(result.dtype, target.dtype):
        raise DtypeError(
            f"{name}: result type {result.dtype} can't be cast to the desired output type "
            f"{target.dtype}"
        )
    wanted = target._operand.placements
    if result._operand.placements != wanted:
        result = redistribute_to(result, target.device_mesh, wanted)
    record(name, _COPY, (target, result))
    return target


def detach(input: Tensor) -> Tensor:
    """A new handle to the same value, as torch's ``detach`` shares storage: an in-place write
    through either is seen by both (dtorch records no gradients, so nothing else changes).

    Example:
        >>> import dtorch
        >>> t = dtorch.arange(3)
        >>> _ = dtorch.detach(t).add_(1)
        >>> t.tolist()
        [1, 2, 3]
    """
    tensor_arg("detach", input)
    return input._alias()


def type_as(t: Tensor, other: Tensor) -> Tensor:
    """torch's ``type_as``: ``t`` cast to ``other``'s dtype (``t`` itself when it has it); only
    the dtype is read, not ``other``'s mesh or placements, and ``other`` must be a dtorch
    tensor (a TypeError otherwise).

    Example:
        >>> import dtorch
        >>> dtorch.arange(3).type_as(dtorch.zeros(1)).tolist()
        [0.0, 1.0, 2.0]
    """
    if not isinstance(other, TensorBase):
        raise TypeError(f"type_as: expected a dtorch.Tensor, got {type(other).__name__}")
    return cast(t, other.dtype)


_LEGACY_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.uint8,
                  torch.int8, torch.int16, torch.int32, torch.int64, torch.bool,
                  torch.complex64, torch.complex128)  # fmt: skip


@functools.cache
def _type_names() -> dict[str, torch.dtype]:
    """torch's legacy type names (``torch.FloatTensor``) -> their dtypes; built at first use,
    so importing dtorch makes no tensors."""
    return {torch.empty(0, dtype=d).type(): d for d in _LEGACY_DTYPES}


_CUDA_PREFIX = "torch.cuda."


def type_name(t: Tensor) -> str:
    """torch's ``t.type()``: the legacy type name, ``torch.cuda.`` on a CUDA mesh.

    Example:
        >>> import dtorch
        >>> type_name(dtorch.zeros(2, dtype=dtorch.int64))
        'torch.LongTensor'
    """
    name = torch.empty(0, dtype=t.dtype).type()
    return name.replace("torch.", _CUDA_PREFIX, 1) if t.is_cuda else name


def to_type(t: Tensor, dtype: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
    """torch's ``Tensor.type``: the type name without ``dtype``; else ``t`` as that type - a
    ``torch.dtype``, a type name (``"torch.IntTensor"``; a ``torch.cuda.`` one moves to CUDA,
    a plain one to the CPU, as torch), torch's or dtorch's typed class (``torch.IntTensor``,
    ``dtorch.IntTensor``). ``t`` itself when nothing changes.

    Example:
        >>> import torch, dtorch
        >>> t = dtorch.zeros(2)
        >>> t.type(), t.type(torch.int32).dtype, t.type("torch.DoubleTensor").dtype
        ('torch.FloatTensor', torch.int32, torch.float64)
    """
    if set(kwargs) - {"async"}:
        raise TypeError(f"type: unexpected keyword(s) {sorted(set(kwargs) - {'async'})}")
    if dtype is None:
        return type_name(t)
    wanted, cuda = _type_target(dtype)
    if cuda is not None and cuda != t.is_cuda:
        t = to(t, "cuda" if cuda else "cpu")
    return cast(t, wanted)


def _type_target(dtype: Any) -> tuple[torch.dtype, bool | None]:
    """(dtype, on CUDA: True/False, None where the argument names no device)."""
    if isinstance(dtype, torch.dtype):
        return dtype, None
    if isinstance(dtype, str):
        cuda = dtype.startswith(_CUDA_PREFIX)
        name = dtype.replace(_CUDA_PREFIX, "torch.", 1)
        names = _type_names()
        if name not in names:
            raise ValueError(
                f"invalid type: {dtype!r}; accepted: a torch.dtype or one of "
                f"{', '.join(sorted(names))} (or their torch.cuda. names)"
            )
        return names[name], cuda
    if isinstance(dtype, type(torch.FloatTensor)):  # torch.IntTensor, torch.cuda.IntTensor
        return dtype.dtype, bool(dtype.is_cuda)
    typed = getattr(dtype, "_DTYPE", None) if isinstance(dtype, type) else None
    if isinstance(typed, torch.dtype) and issubclass(dtype, TensorBase):  # dtorch.IntTensor
        return typed, None  # dtorch's typed classes name no device
    raise TypeError(
        f"type: expected a torch.dtype, a type name or a typed tensor class, got {dtype!r}"
    )


def parse_to_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """The arguments of ``Tensor.to`` as ``(target, dtype)``: ``target`` is a DeviceMesh, a
    ``torch.device`` or None (stay where it is), ``dtype`` a ``torch.dtype`` or None (keep it).

    Accepted, positional or keyword (``device=``, ``device_mesh=``, ``dtype=``): a mesh, a device
    (string or ``torch.device``), a dtype, or another dtorch tensor (its mesh and its dtype).

    Example:
        >>> import torch, dtorch
        >>> parse_to_args(("cpu", torch.float64), {})
        (device(type='cpu'), torch.float64)
    """
    kwargs = dict(kwargs)
    target = kwargs.pop("device", None)
    mesh = kwargs.pop("device_mesh", None)
    dtype = kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)
    kwargs.pop("copy", None)
    if kwargs:
        raise TypeError(
            f"to: unexpected keyword(s) {sorted(kwargs)}; accepted: device, device_mesh, dtype, "
            "non_blocking, copy"
        )
    if target is not None and mesh is not None:
        raise TypeError("to: device and device_mesh are mutually exclusive")
    target = mesh if target is None else target
    for arg in args:
        if is_dtype(arg):  # also .to(float), float64 as in torch
            dtype = arg
        elif isinstance(arg, TensorBase):
            target, dtype = arg.device_mesh, arg.dtype
        else:
            target = arg
    return _as_target(target), dtype


def _as_target(target: Any) -> Any:
    """A device string becomes a ``torch.device`` (a clear MeshError when it is not one)."""
    if target is None or isinstance(target, (DeviceMesh, torch.device)):
        return target
    if not _is_device(target):
        return mesh_of(target)
    if isinstance(target, str) and (parse_device(target)[1] or 0) > TORCH_MAX_INDEX:
        return mesh_of(target)  # "cpu:300": a torch.device would wrap the id
    return torch.device(target)


def _is_device(target: Any) -> bool:
    # mesh_of raises the error message listing what ``to`` accepts
    try:
        torch.device(target)
    except (RuntimeError, TypeError):
        return False
    return True


def to(t: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """``to(dtype)``, ``to(mesh)``, ``to(device)``, ``to(device_or_mesh, dtype)``,
    ``to(other_tensor)`` (its mesh and dtype), or the keywords ``device``, ``device_mesh``,
    ``dtype``. A mesh of another shape (with more than one device) is refused: use
    ``redistribute``; one device gathers the full value there. ``memory_format=``: torch's
    preserve and contiguous formats change nothing; a channels-last one is refused."""
    if "memory_format" in kwargs:
        kwargs = dict(kwargs)
        checked_format("to", kwargs.pop("memory_format"))
    target, dtype = parse_to_args(args, kwargs)
    if isinstance(target, DeviceMesh):
        _check_same_shape(t, target)
    result = t if target is None or _already_there(t, target) else move(t, target)
    result = result if dtype is None else cast(result, dtype)
    return clone(result) if result is t and kwargs.get("copy") else result  # torch: a new tensor


def _check_same_shape(t: Tensor, mesh: DeviceMesh) -> None:
    """``to`` keeps the placements, so a multi-device mesh must have the tensor's mesh shape."""
    if len(mesh.device_ids) > 1 and mesh.shape != t.device_mesh.shape:
        raise MeshError(
            f"to: cannot move a tensor on a mesh of shape {list(t.device_mesh.shape)} to a "
            f"mesh of shape {list(mesh.shape)}; accepted: a mesh of the same shape or one "
            "device; use redistribute(device_mesh, placements) for another shape"
        )


def _already_there(t: Tensor, target: Any) -> bool:
    """A bare device type (``"cpu"``, ``torch.device("cuda")``) of the tensor's own mesh, or
    the tensor's own ``device``: as in torch, ``cpu()`` of a CPU tensor and ``x.to(x.device)``
    are the tensor itself, however it is distributed."""
    if not isinstance(target, (str, torch.device)):
        return False
    mesh = mesh_of(target)  # a clear MeshError for anything that is not a device
    if len(mesh.device_ids) != 1 or mesh.device_type != t.device_mesh.device_type:
        return False
    return _bare(target) or torch.device(target) == t.device


def _bare(target: str | torch.device) -> bool:
    """True for a device type without an index (``"cpu"``, ``torch.device("cuda")``)."""
    return (target if isinstance(target, torch.device) else torch.device(target)).index is None

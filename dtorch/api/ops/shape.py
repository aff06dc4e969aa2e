"""Shape operators: views, squeeze/unsqueeze, transpose/permute, expand, chunk/unbind,
cat/stack. Repetition and rolling are ``dtorch.api.ops.repeats``; basic indexing and the
slices made from it (``narrow``, ``split``) are ``dtorch.api.ops.basic_index``.

Example:
    >>> import dtorch
    >>> t = dtorch.arange(12).view(3, 4)
    >>> t.reshape(2, 6).tolist()[1], t.transpose(0, 1).shape
    ([6, 7, 8, 9, 10, 11], torch.Size([4, 3]))
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.dims import as_size, normalize_dim, normalize_dims, numpy_names
from dtorch.api.handle import TensorBase
from dtorch.api.ops.convert import checked_format
from dtorch.api.ops.elementwise import unary
from dtorch.api.record import not_a_tensor, record, tensor_arg
from dtorch.api.strides import (
    ROW_MAJOR,
    contiguous_strides,
    expanded,
    is_contiguous,
    known,
    layout,
    mark,
    mark_some,
    some,
    unsqueezed,
    view_strides,
)
from dtorch.errors import DimError, ParamError, ShapeError
from dtorch.ir.dtypes import as_dtype, is_dtype
from dtorch.ir.opkind import MathKind
from dtorch.ir.params import (
    ChunkParam,
    ConcatParam,
    ContiguousParam,
    ExpandParam,
    FlattenParam,
    PermuteParam,
    ReshapeParam,
    SqueezeParam,
    TransposeParam,
    UnsqueezeParam,
    ViewDtypeParam,
    ViewParam,
)

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def sizes(args: Sequence[Any], name: str = "shape", what: str = "sizes") -> tuple[int, ...]:
    """torch's ``*shape`` convention: ints, or one sequence of ints. Anything else (a str,
    None, a float that is no whole number, inf) is a TypeError naming ``name`` and ``what``."""
    if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)):
        args = tuple(args[0])
    return tuple([a if a.__class__ is int else as_size(a, name, what) for a in args])


_sizes = sizes  # for ``unflatten``, whose torch keyword is ``sizes``


def infer_shape(name: str, shape: tuple[int, ...], numel: int) -> tuple[int, ...]:
    """Resolve one -1 in a target shape the way torch does (ShapeError when impossible)."""
    unknown = [i for i, s in enumerate(shape) if s == -1]
    known = math.prod(s for s in shape if s != -1)
    if len(unknown) > 1 or any(s < -1 for s in shape):
        raise ShapeError(
            f"{name}: shape {list(shape)} is invalid (at most one -1, no other negatives)"
        )
    if unknown:
        if known == 0 or numel % known:
            raise ShapeError(f"{name}: shape {list(shape)} is invalid for input of size {numel}")
        return tuple(numel // known if s == -1 else s for s in shape)
    if known != numel:
        raise ShapeError(f"{name}: shape {list(shape)} is invalid for input of size {numel}")
    return shape


def view(t: Tensor, *shape: Any, size: Any = None, dtype: torch.dtype | None = None) -> Tensor:
    """torch's ``view``: ``view(*shape)``, ``view(shape)``, ``view(size=shape)``, or
    ``view(dtype)`` / ``view(dtype=dtype)`` (``view_dtype``).

    Example:
        >>> import dtorch
        >>> t = dtorch.ones(2, 3)
        >>> view(t, size=(6,)).shape, view(t, dtorch.int32).dtype
        (torch.Size([6]), torch.int32)
    """
    tensor_arg("view", t)
    if (size is not None) + (dtype is not None) + bool(shape) > 1:
        raise TypeError("view: give one of *shape, size= or dtype=, not several")
    if dtype is not None or (len(shape) == 1 and is_dtype(shape[0])):  # view(int) too
        return view_dtype(t, shape[0] if dtype is None else dtype)
    target = infer_shape("view", sizes(shape if size is None else (size,), "view"), t.numel())
    return _reshaped("view", ViewParam(target), t, target)


def view_dtype(t: Tensor, dtype: torch.dtype) -> Tensor:
    """torch's ``view(dtype)``: the same bits read as ``dtype``. Each device reads its own
    shard, whatever the placements, except Partial (the bits of the parts do not add up to
    the bits of the sum: refused). Where the element size differs, the last dim's size
    changes by the ratio, as in torch, so it must not be sharded.

    Example:
        >>> import dtorch
        >>> t = dtorch.tensor([1.0, -2.0])
        >>> t.view(dtorch.int32).tolist(), t.view(dtorch.int16).shape
        ([1065353216, -1073741824], torch.Size([4]))
    """
    return record("view", ViewDtypeParam(as_dtype("view", dtype)), (t,))[0]


def reshape(input: Tensor, *sizes_: Any, shape: Any = None) -> Tensor:
    """``reshape(*sizes)``, ``reshape(sizes)`` or torch's keyword ``reshape(shape=...)`` (one
    -1 at most). A view where torch's would be one; a shard is kept only where each device's
    piece stays its chunk of the result (else a PlacementError: redistribute first).

    Example:
        >>> import dtorch
        >>> dtorch.reshape(dtorch.arange(6), (2, -1)).tolist()
        [[0, 1, 2], [3, 4, 5]]
    """
    tensor_arg("reshape", input)
    wanted = sizes(sizes_ if shape is None else (shape,), "reshape")
    target = infer_shape("reshape", wanted, input.numel())
    return _reshaped("reshape", ReshapeParam(target), input, target)


def _reshaped(
    name: str, param: ViewParam | ReshapeParam | FlattenParam, t: Tensor, target: tuple[int, ...]
) -> Tensor:
    """Record a reshape of ``t`` to ``target``. Where ``t``'s strides are known, torch's choice
    is made for every device, whose shard alone cannot always tell (``strides``): a copy of
    ``t`` first where torch could not view it, else a view wherever the shard allows one."""
    strides = known(t)
    if strides is None:
        return record(name, param, (t,))[0]
    viewed = view_strides(t.shape, strides, target)
    if viewed is None:
        t, viewed = record(name, _COPY, (t,))[0], contiguous_strides(target)
    else:  # torch views: so must every device that can (its shard may look otherwise)
        param = dataclasses.replace(param, view=True)
    return mark(record(name, param, (t,))[0], viewed)


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Dims ``start_dim`` to ``end_dim`` merged into one (a ``reshape``; its placement rules).

    Example:
        >>> import dtorch
        >>> t = dtorch.zeros(2, 3, 4)
        >>> dtorch.flatten(t).shape, dtorch.flatten(t, 1).shape
        (torch.Size([24]), torch.Size([2, 12]))
    """
    tensor_arg("flatten", input)
    start, end = (
        normalize_dims((start_dim, end_dim), input.ndim, op="flatten") if input.ndim else (0, 0)
    )
    if start > end:
        raise ShapeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    shape = input.shape
    target = (*shape[:start], math.prod(shape[start : end + 1]), *shape[end + 1 :])
    return _reshaped("flatten", FlattenParam(start, end), input, target)


@numpy_names
def squeeze(input: Tensor, dim: int | Sequence[int] | None = None) -> Tensor:
    """The dims of size 1 removed: all of them, or those of ``dim`` (an int or a tuple; a
    listed dim of another size stays). Shards move with their dims.

    Example:
        >>> import dtorch
        >>> t = dtorch.zeros(2, 1, 3, 1)
        >>> dtorch.squeeze(t).shape, dtorch.squeeze(t, 1).shape
        (torch.Size([2, 3]), torch.Size([2, 3, 1]))
    """
    tensor_arg("squeeze", input)
    if dim is None:
        dims = tuple(i for i, s in enumerate(input.shape) if s == 1)
    else:
        dims = normalize_dims(dim, input.ndim, op="squeeze")
        dims = dims if input.ndim else ()  # torch: dim 0 or -1 of a 0-d tensor is itself
    out = record("squeeze", SqueezeParam(dims), (input,))[0]
    gone = {d for d in dims if input.shape[d] == 1}
    return mark_some(out, tuple(s for d, s in enumerate(some(input)) if d not in gone))


@numpy_names
def unsqueeze(input: Tensor, dim: int) -> Tensor:
    """A dim of size 1 inserted at ``dim`` (negative: counted from the end of the result).
    Shards move with their dims.

    Example:
        >>> import dtorch
        >>> t = dtorch.tensor([1, 2])
        >>> dtorch.unsqueeze(t, 0).tolist(), dtorch.unsqueeze(t, -1).tolist()
        ([[1, 2]], [[1], [2]])
    """
    tensor_arg("unsqueeze", input)
    d = normalize_dim(dim, input.ndim + 1, op="unsqueeze")
    out = record("unsqueeze", UnsqueezeParam(d), (input,))[0]
    return mark_some(out, unsqueezed(input.shape, some(input), d))


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """Dims ``dim0`` and ``dim1`` swapped; a shard moves with its dim.

    Example:
        >>> import dtorch
        >>> mesh = dtorch.init_device_mesh("cpu", 2)
        >>> t = dtorch.ones(4, 2, device_mesh=mesh, placements=[dtorch.Shard(0)])
        >>> dtorch.transpose(t, 0, 1).shape, dtorch.transpose(t, 0, 1).placements
        (torch.Size([2, 4]), [Shard(dim=1)])
    """
    tensor_arg("transpose", input)
    a, b = normalize_dims((dim0, dim1), input.ndim, op="transpose")
    if not input.ndim:  # torch: dims 0 and -1 of a 0-d tensor; nothing moves (a view)
        return _permuted(record("transpose", PermuteParam(()), (input,))[0], input, ())
    order = list(range(input.ndim))
    order[a], order[b] = b, a
    return _permuted(record("transpose", TransposeParam(a, b), (input,))[0], input, order)


def _permuted(out: Tensor, input: Tensor, order: Sequence[int]) -> Tensor:
    """``out`` (``input``'s dims in ``order``) with its strides, where ``input``'s are known."""
    strides = some(input)
    return mark_some(out, tuple(strides[d] for d in order))


#: torch's warnings of a 0-D tensor's (conjugate) transposes, which it then returns as they
#: are (``mT``) or conjugated.
_ZERO_D = {
    "mT": "Tensor.mT is deprecated on 0-D tensors. This function is the identity in these cases.",
    "mH": "Tensor.mH is deprecated on 0-D tensors. Consider using x.conj().",
    "adjoint": "adjoint() is deprecated on 0-D tensors. Consider using x.conj().",
    "H": "Tensor.H is deprecated on 0-D tensors. Consider using x.conj().",
}


def matrix_transpose(input: Tensor, name: str = "mT") -> Tensor:
    """torch's ``t.mT``: the last two dims swapped; ``t.mH``, ``adjoint()`` and ``t.H``:
    conjugated too (a copy of a complex tensor: torch's is a lazy conjugate view; a real one's
    is ``mT``). A 0-D tensor is returned (conjugated) with torch's deprecation warning.

    Example:
        >>> import dtorch
        >>> dtorch.zeros(4, 2, 3).mT.shape
        torch.Size([4, 3, 2])
    """
    tensor_arg(name, input)
    if input.ndim == 0:
        warnings.warn(_ZERO_D[name], UserWarning, stacklevel=3)
        conjugate = name != "mT" and input.dtype.is_complex
        return unary(MathKind.CONJ, name, input) if conjugate else input
    if input.ndim < 2:
        raise ShapeError(
            f"tensor.{name} is only supported on matrices or batches of matrices. Got "
            f"{input.ndim}-D tensor."
        )
    swapped = transpose(input, -2, -1)
    if name in ("mH", "adjoint", "H") and input.dtype.is_complex:
        return unary(MathKind.CONJ, name, swapped)  # a copy: torch's is a lazy conjugate view
    return swapped


def permute(input: Tensor, *order: Any, dims: Any = None) -> Tensor:
    """``permute(*dims)``, ``permute(dims)`` or torch's keyword ``permute(dims=...)``: the
    dims in that order; shards move with their dims.

    Example:
        >>> import dtorch
        >>> dtorch.permute(dtorch.zeros(2, 3, 4), (2, 0, 1)).shape
        torch.Size([4, 2, 3])
    """
    tensor_arg("permute", input)
    if not order and dims is None:  # torch's own refusal, also for a 0-d tensor
        raise TypeError('permute() missing 1 required positional arguments: "dims"')
    wanted = sizes(order if dims is None else (dims,), "permute", "dims")
    normal = normalize_dims(wanted, input.ndim, op="permute")
    if sorted(normal) != list(range(input.ndim)):
        raise ShapeError(f"permute: {list(wanted)} is not a permutation of {input.ndim} dims")
    return _permuted(record("permute", PermuteParam(normal), (input,))[0], input, normal)


def expand(t: Tensor, *shape: Any) -> Tensor:
    tensor_arg("expand", t)
    target = list(sizes(shape, "expand"))
    offset = len(target) - t.ndim
    if offset < 0:
        raise ShapeError(f"expand: {target} has fewer dims than the tensor's {list(t.shape)}")
    for i, size in enumerate(t.shape):
        if target[offset + i] == -1:
            target[offset + i] = size
    out = record("expand", ExpandParam(tuple(target)), (t,))[0]
    return mark_some(out, expanded(t.shape, some(t), target))  # stride-0 dims: known anyway


def contiguous(t: Tensor, memory_format: Any = torch.contiguous_format) -> Tensor:
    """torch's ``contiguous()``: the same values, dtype and placements (a Partial stays
    Partial) as a new handle, where torch returns ``t`` itself when it is contiguous. It
    shares memory with ``t`` exactly where torch's would on the full tensor (in-place
    writes through it reach ``t``) and copies where torch's copies (after a transpose).
    ``memory_format``: ``torch.contiguous_format``, or ``preserve_format`` where no copy is
    needed (torch refuses it otherwise, as here); no channels-last layouts.

    Example:
        >>> import dtorch
        >>> t = dtorch.zeros(2)
        >>> _ = t.contiguous().add_(1)  # a view here: the write reaches t
        >>> t.tolist(), dtorch.arange(4).reshape(2, 2).t().contiguous().tolist()
        ([1.0, 1.0], [[0, 2], [1, 3]])
    """
    fmt = checked_format("contiguous", memory_format)
    strides = known(t)  # where they say torch copies, every device copies; where not, none
    if fmt is torch.preserve_format and strides is not None and not is_contiguous(t.shape, strides):
        raise ParamError(
            "contiguous: preserve memory format is unsupported by the contiguous operator"
        )
    if strides is None:
        return mark(record("contiguous", _CONTIGUOUS, (t,))[0], ROW_MAJOR)
    if is_contiguous(t.shape, strides):  # torch returns t itself, strides and all
        return mark(record("contiguous", _ITSELF, (t,))[0], layout(t))
    return mark(record("contiguous", _COPY, (t,))[0], ROW_MAJOR)


_CONTIGUOUS = ContiguousParam()
#: A contiguous copy on every device, whatever the shards look like (torch copies).
_COPY = ContiguousParam(copy=True)
#: The shard itself on every device, whatever it looks like (torch returns the tensor).
_ITSELF = ContiguousParam(view=True)


@numpy_names
def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """``input`` cut into ``chunks`` pieces along ``dim`` (torch's sizes: the last may be
    smaller, and there may be fewer). The chunked dim must not be sharded; the others keep
    their shards.

    Example:
        >>> import dtorch
        >>> [c.tolist() for c in dtorch.chunk(dtorch.arange(5), 3)]
        [[0, 1], [2, 3], [4]]
    """
    return _chunk("chunk", input, chunks, dim)


def _chunk(name: str, t: Tensor, chunks: int, dim: int) -> tuple[Tensor, ...]:
    tensor_arg(name, t)
    chunks = as_size(
        chunks, name, "chunks", "an int greater than 0"
    )  # chunk(True) failed on the devices
    if chunks <= 0:
        raise ShapeError(f"{name}: chunks must be positive, got {chunks}")
    if not t.ndim and name == "chunk":
        raise ShapeError("chunk expects at least a 1-dimensional tensor")  # torch's words
    parts = record(name, ChunkParam(chunks, normalize_dim(dim, t.ndim, op=name)), (t,))
    strides = known(t)  # each part a slice of dim: the input's strides
    return parts if strides is None else tuple(mark(part, strides) for part in parts)


@numpy_names
def unbind(input: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    """The slices along ``dim`` (one Chunk operator, recorded as ``unbind`` so that its
    errors name what the user called), each squeezed. The unbound dim must not be sharded.

    Example:
        >>> import dtorch
        >>> [c.tolist() for c in dtorch.unbind(dtorch.tensor([[1, 2], [3, 4]]), dim=1)]
        [[1, 3], [2, 4]]
    """
    tensor_arg("unbind", input)
    d = normalize_dim(dim, input.ndim, op="unbind", needs_a_dim=True)
    if input.shape[d] == 0:
        return ()
    return tuple(squeeze(part, d) for part in _chunk("unbind", input, input.shape[d], d))


@numpy_names
def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """``tensors`` joined along ``dim``. Along a sharded dim each device keeps its local
    pieces and the result is marked ``Shard(dim, sub_split_coordinates=...)``, the bounds of
    the parts (DTorch's behaviour, ``docs/compatibility.md``); values are torch's.

    Example:
        >>> import dtorch
        >>> mesh = dtorch.init_device_mesh("cpu", 2)
        >>> a = dtorch.arange(4, device_mesh=mesh, placements=[dtorch.Shard(0)])
        >>> dtorch.cat([a, a]).tolist(), dtorch.cat([a, a]).placements
        ([0, 1, 2, 3, 0, 1, 2, 3], [Shard(dim=0, sub_split_coordinates=(4,))])
    """
    tensors = _tensor_list("cat", tensors)
    kept = [t for t in tensors if t.shape != (0,)]
    if kept and len(kept) < len(tensors) and any(t.ndim != 1 for t in kept):
        return _cat_skipping_empties(tensors, kept, dim)
    return record(
        "cat", ConcatParam(normalize_dim(dim, tensors[0].ndim, op="cat")), tuple(tensors)
    )[0]


def _cat_skipping_empties(tensors: list[Tensor], kept: list[Tensor], dim: int) -> Tensor:
    """torch's legacy rule: 1-D empty inputs beside tensors of other ranks are skipped (an
    accumulator started as ``tensor([])``); they still take part in the result's dtype."""
    dtype = functools.reduce(torch.promote_types, [t.dtype for t in tensors])
    out = cat(kept, dim)
    return out if out.dtype == dtype else out.to(dtype)


@numpy_names
def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """``tensors`` (of one shape) joined along a new dim ``dim``; shards move with their dims.

    Example:
        >>> import dtorch
        >>> dtorch.stack([dtorch.tensor([1, 2]), dtorch.tensor([3, 4])], dim=1).tolist()
        [[1, 3], [2, 4]]
    """
    tensors = _tensor_list("stack", tensors)
    d = normalize_dim(dim, tensors[0].ndim + 1, op="stack")
    return record("stack", ConcatParam(d, stack=True), tuple(tensors))[0]


def _tensor_list(name: str, tensors: Sequence[Any]) -> list[Tensor]:
    if isinstance(tensors, (TensorBase, torch.Tensor, str)) or not hasattr(tensors, "__iter__"):
        raise TypeError(
            f"{name}: expected a non-empty tuple or list of dtorch.Tensor, got "
            f"{type(tensors).__module__}.{type(tensors).__name__}"
        )
    tensors = list(tensors)
    if not tensors:  # torch's RuntimeError (a ParamError is one)
        raise ParamError(f"{name}: expected a non-empty tuple or list of dtorch.Tensor, got none")
    for i, t in enumerate(tensors):
        if not isinstance(t, TensorBase):
            raise not_a_tensor(name, f"tensors[{i}]", t)
    return tensors


# --- composites of the operators above -----------------------------------------------------
def movedim(input: Tensor, source: Any, destination: Any) -> Tensor:
    """``torch.movedim`` (and ``moveaxis``): the dims of ``source`` moved to the positions of
    ``destination``, the others in their order; one ``permute``.

    Example:
        >>> import dtorch
        >>> t = dtorch.zeros(2, 3, 4)
        >>> t.movedim(0, -1).shape, dtorch.movedim(t, (0, 1), (2, 0)).shape
        (torch.Size([3, 4, 2]), torch.Size([3, 4, 2]))
    """
    tensor_arg("movedim", input)
    src, dst = _dim_list(input, source, "source"), _dim_list(input, destination, "destination")
    if len(src) != len(dst):
        raise ShapeError(
            f"movedim: Invalid source or destination dims: source ({list(src)} dims) should "
            f"contain the same number of dims as destination ({list(dst)} dims)"
        )
    if not input.ndim:  # dims 0 and -1 name the tensor itself: nothing moves
        return record("movedim", PermuteParam(()), (input,))[0]
    order: list[int | None] = [None] * input.ndim
    for s, d in zip(src, dst, strict=True):
        order[d] = s
    rest = iter(d for d in range(input.ndim) if d not in src)
    dims = tuple(next(rest) if o is None else o for o in order)
    return _permuted(record("movedim", PermuteParam(dims), (input,))[0], input, dims)


def _dim_list(t: Tensor, dims: Any, what: str) -> tuple[int, ...]:
    # movedim's dims of one side, normalised, each at most once (torch's words)
    normal = normalize_dims(dims, t.ndim, op="movedim")
    if len(set(normal)) != len(normal):
        raise ShapeError(f"movedim: repeated dim in `{what}` ({list(dims)})")
    return normal


def unflatten(input: Tensor, dim: int, sizes: Any) -> Tensor:
    """``torch.unflatten``: ``dim`` split into ``sizes`` (at most one -1); a ``reshape``.

    Example:
        >>> import dtorch
        >>> dtorch.zeros(2, 12).unflatten(1, (3, -1)).shape
        torch.Size([2, 3, 4])
    """
    tensor_arg("unflatten", input)
    d = normalize_dim(dim, input.ndim, op="unflatten")
    if not input.ndim:
        raise DimError("unflatten: cannot unflatten a 0-d tensor; accepted: a tensor of >= 1 dim")
    wanted = _sizes((sizes,), "unflatten")  # torch's keyword ``sizes`` shadows the helper
    if not wanted:
        raise ShapeError("unflatten: sizes must be non-empty")
    size = input.shape[d]
    try:
        middle = infer_shape("unflatten", wanted, size)
    except ShapeError:
        raise ShapeError(
            f"unflatten: Provided sizes {list(wanted)} don't multiply up to the size of dim {d} "
            f"({size}) in the input tensor; accepted: sizes whose product is {size} (one -1 "
            "at most)"
        ) from None
    target = (*input.shape[:d], *middle, *input.shape[d + 1 :])
    return _reshaped("unflatten", ReshapeParam(target), input, target)

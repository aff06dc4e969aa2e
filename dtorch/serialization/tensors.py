"""torch.Tensor and torch.Generator as payload nodes.

A tensor is its dtype (stable code), its shape, and its raw bytes, which go to the payload's
data section (64-byte aligned) instead of the MessagePack document, so they are copied exactly
once on the way out (into the payload) and at most once on the way in:

* by default every decoded tensor owns a private copy of its bytes;
* with ``alias_tensors=True`` and a writable input buffer (a ``bytearray``, a writable
  ``memoryview``), decoded tensors are views of that buffer: no copy, the tensor keeps the
  buffer alive, and writes through either are visible in both. A read-only input (``bytes``)
  is never aliased, because torch has no read-only tensors.

Tensors are decoded on the CPU. Every plain dtype of ``dtorch.ir.dtypes`` travels (bfloat16,
bool, complex, float8, uint16/32/64, the sub-byte and bits dtypes); quantized dtypes, sparse
layouts and meta tensors are refused with a SerializationError naming them.

A generator is its device and its state bytes; the restored generator draws the same numbers
the original would have drawn next.

Example:
    >>> import torch
    >>> from dtorch.serialization import serialize, deserialize
    >>> t = torch.arange(6, dtype=torch.bfloat16).reshape(2, 3).T  # not contiguous
    >>> torch.equal(deserialize(serialize(t)), t)
    True
"""

from __future__ import annotations

from typing import Any

import torch

from dtorch.errors import DeserializationError, SerializationError
from dtorch.ir.dtypes import PLAIN_DTYPES
from dtorch.ir.sharding import capped_product
from dtorch.serialization.columns import show
from dtorch.serialization.fields import BlobField, DtypeField, PrimField, TupleField
from dtorch.serialization.registry import Field, NodeType

_INT64_MAX = 2**63 - 1
_DEVICE_KINDS = ("cpu", "cuda")


def tensor_bytes(tensor: torch.Tensor) -> memoryview:
    """The row-major bytes of ``tensor`` (a view when it is already a contiguous CPU tensor)."""
    if tensor.layout != torch.strided:
        raise SerializationError(
            f"cannot serialize a tensor with layout {tensor.layout}; convert it with "
            f".to_dense() first"
        )
    if tensor.dtype not in PLAIN_DTYPES:
        raise SerializationError(
            f"cannot serialize a tensor of dtype {tensor.dtype}: quantized dtypes are not "
            f"supported (dequantize first)"
        )
    if tensor.device.type == "meta":
        raise SerializationError("cannot serialize a meta tensor: it holds no data")
    flat = tensor.detach().cpu().resolve_conj().resolve_neg().contiguous().reshape(-1)
    return memoryview(clean_bools(flat).view(torch.uint8).numpy())  # type: ignore[arg-type]


def clean_bools(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor``, or for a bool tensor one whose bytes are 0 and 1 only: torch.empty leaves
    any byte in a bool tensor (torch reads each nonzero one as True), and readers of dtorch's
    payloads refuse other bytes (``restore_tensor``), so none is ever written.

    Example:
        >>> junk = torch.tensor([0, 1, 2, 255], dtype=torch.uint8).view(torch.bool)
        >>> clean_bools(junk).view(torch.uint8).tolist()
        [0, 1, 1, 1]
    """
    if tensor.dtype is not torch.bool:
        return tensor
    return tensor.view(torch.uint8).ne(0)


def copy_clean(target: torch.Tensor, value: torch.Tensor) -> None:
    """``target.copy_(value)``, bool bytes made 0 and 1 as ``clean_bools`` makes them (in
    place: a large value's shared-memory copy, which costs no allocation).

    Example:
        >>> target = torch.zeros(3, dtype=torch.bool)
        >>> copy_clean(target, torch.tensor([0, 7, 1], dtype=torch.uint8).view(torch.bool))
        >>> target.view(torch.uint8).tolist()
        [0, 1, 1]
    """
    target.copy_(value)
    if target.dtype is torch.bool:
        target.view(torch.uint8).clamp_(max=1)


def restore_tensor(dtype: torch.dtype, shape: tuple[int, ...], data: Any) -> torch.Tensor:
    """The tensor of ``dtype`` and ``shape`` over ``data`` (checked against the shape)."""
    if dtype not in PLAIN_DTYPES:  # quantized: the encoder refuses them, so no payload has one
        raise DeserializationError(
            f"a tensor of dtype {dtype}: quantized dtypes are not supported (the encoder refuses "
            "them)"
        )
    if any(d < 0 or d > _INT64_MAX for d in shape):
        raise DeserializationError(f"tensor shape {shape} has a dimension outside 0..2**63-1")
    numel = capped_product(shape, len(data))  # linear, whatever the payload declares
    if numel * dtype.itemsize != len(data):
        needs = (
            f"more than the {len(data)} bytes the payload holds"
            if numel > len(data)
            else f"{numel * dtype.itemsize} bytes, the payload holds {len(data)}"
        )
        raise DeserializationError(f"a {dtype} tensor of shape {show(list(shape))} needs {needs}")
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    raw = torch.frombuffer(data, dtype=torch.uint8)
    if dtype is torch.bool and int(raw.max()) > 1:
        raise DeserializationError("a bool tensor holds bytes other than 0 and 1")
    return raw.view(dtype).reshape(shape)


def _explode_tensors(objs: list[Any]) -> list[list[Any]]:
    return [[t.dtype for t in objs], [tuple(t.shape) for t in objs], list(map(tensor_bytes, objs))]


def _build_tensors(columns: list[list[Any]], count: int) -> list[Any]:
    return list(map(restore_tensor, *columns))


def tensor_type() -> NodeType:
    """The node type of ``torch.Tensor`` (exactly that class; subclasses are refused)."""
    fields = (
        Field("dtype", DtypeField()),
        Field("shape", TupleField(PrimField(frozenset({int})))),
        Field("data", BlobField()),
    )
    return NodeType("torch.Tensor", torch.Tensor, fields, _explode_tensors, _build_tensors)


def restore_generator(device: str, state: bytes) -> torch.Generator:
    """A generator on ``device`` (cpu or cuda) whose state is ``state``."""
    try:
        where = torch.device(device)
    except (RuntimeError, ValueError):
        raise DeserializationError(f"generator device {show(device)} is not a device") from None
    if where.type not in _DEVICE_KINDS:
        raise DeserializationError(
            f"generator device {show(device)} is not accepted; accepted: {', '.join(_DEVICE_KINDS)}"
        )
    raw = torch.frombuffer(bytearray(state), dtype=torch.uint8) if state else torch.empty(0)
    try:
        generator = torch.Generator(device=where)
        generator.set_state(raw.to(torch.uint8))
    except RuntimeError as exc:
        raise DeserializationError(f"cannot restore a {where} generator: {exc}") from None
    return generator


def _explode_generators(objs: list[Any]) -> list[list[Any]]:
    states = [bytes(g.get_state().numpy()) for g in objs]
    return [[str(g.device) for g in objs], states]


def _build_generators(columns: list[list[Any]], count: int) -> list[Any]:
    return list(map(restore_generator, *columns))


def generator_type() -> NodeType:
    """The node type of ``torch.Generator``: device and state."""
    fields = (
        Field("device", PrimField(frozenset({str}))),
        Field("state", PrimField(frozenset({bytes}))),
    )
    return NodeType(
        "torch.Generator", torch.Generator, fields, _explode_generators, _build_generators
    )

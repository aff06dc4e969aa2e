"""The codec: graph IR values <-> MessagePack payloads, for the wire and for files.

``serialize`` accepts a registered record (operators, operands, params, meshes, placements,
spans, scalars, ...), a ``torch.Tensor``, a ``torch.Generator``, a ``torch.dtype``, an IR
enum, or plain containers (list, tuple, dict, str, int, float, bool, None, bytes) of them,
nested. A value referenced twice is written once and comes back as one object; a value that
contains itself is refused. ``deserialize`` turns any bytes into the value or a
DeserializationError (a subclass names the cause: UnknownTypeError, BadReferenceError,
MissingFieldError, UnsupportedVersionError). No pickle, eval or import-by-name anywhere.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.placement import Shard
    >>> mesh = init_device_mesh("cpu", 2)
    >>> a = Operand(1, (4, 8), torch.float32, mesh, (Shard(0),))
    >>> b = Operand(2, (4, 8), torch.float32, mesh, (Shard(0),))
    >>> x, y = deserialize(serialize((a, b)))
    >>> x == a and x.mesh is y.mesh
    True
"""

from __future__ import annotations

from typing import Any

from dtorch.errors import DeserializationError, SerializationError
from dtorch.ir.operator import ExecuteBatch
from dtorch.serialization.equality import assert_structural_equal
from dtorch.serialization.files import deserialize_from_file, serialize_to_file
from dtorch.serialization.reader import deserialize_value, node_counts
from dtorch.serialization.wire import FORMAT_VERSION
from dtorch.serialization.writer import serialize_value

__all__ = [
    "FORMAT_VERSION",
    "assert_structural_equal",
    "decode_batch",
    "deserialize",
    "deserialize_from_file",
    "encode_batch",
    "node_counts",
    "serialize",
    "serialize_to_file",
]


def serialize(obj: Any) -> bytes:
    """``obj`` as one self-describing payload (SerializationError if it holds a value of an
    unregistered type, an int beyond 64 bits, or a reference cycle).

    Example:
        >>> from dtorch.ir.span import Span
        >>> deserialize(serialize([Span("m.py", 3, 1), None, b"raw"]))
        [m.py:3:1, None, b'raw']
    """
    return serialize_value(obj)


def deserialize(data: bytes | bytearray | memoryview, *, alias_tensors: bool = False) -> Any:
    """The value a payload holds; any malformed input raises DeserializationError.

    Tensors own a copy of their bytes unless ``alias_tensors`` is true and ``data`` is
    writable: then they are views of ``data`` (no copy; writes show through both ways, and
    they keep ``data`` alive). Read-only input (``bytes``) is never aliased.

    Example:
        >>> import torch
        >>> buffer = bytearray(serialize(torch.zeros(2)))
        >>> t = deserialize(buffer, alias_tensors=True)
        >>> _ = t.fill_(1.0)
        >>> torch.equal(deserialize(buffer), torch.ones(2))
        True
    """
    return deserialize_value(data, alias_tensors=alias_tensors)


def encode_batch(batch: ExecuteBatch) -> bytes:
    """The wire message of spec 000: one payload for any number of receivers.

    Example:
        >>> decode_batch(encode_batch(ExecuteBatch((), (), (3, 4)))).no_hold
        (3, 4)
    """
    if type(batch) is not ExecuteBatch:
        raise SerializationError(f"encode_batch takes an ExecuteBatch, got {type(batch).__name__}")
    return serialize_value(batch)


def decode_batch(data: bytes | bytearray | memoryview) -> ExecuteBatch:
    """The ExecuteBatch of an ``encode_batch`` payload (DeserializationError otherwise)."""
    batch = deserialize_value(data)
    if type(batch) is not ExecuteBatch:
        raise DeserializationError(
            f"expected an ExecuteBatch payload, got a {type(batch).__name__}"
        )
    return batch

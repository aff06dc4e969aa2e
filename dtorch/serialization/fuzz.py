"""Payload mutators for robustness tests: malformed inputs built from valid payloads.

Used by ``tests/serialization`` (bounded, in CI) and ``benchmarks/fuzz_codec.py`` (long
campaigns), both starting from ``sample_payloads()``. Each mutator takes a seeded
``random.Random`` and a valid payload and returns bytes that ``deserialize`` must turn into a
value or a DeserializationError - nothing else. Mutating the MessagePack document itself and
re-framing it with correct sizes gets past the frame checks, so the deeper validation (types,
references, columns) is exercised too.

Example:
    >>> import random
    >>> from dtorch.serialization import serialize
    >>> data = mutate(random.Random(0), serialize([1, 2, 3]))
    >>> isinstance(data, bytes)
    True
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from typing import Any

import msgpack
import torch

from dtorch.ir.mesh import DeviceMesh, init_device_mesh
from dtorch.ir.operator import ExecuteBatch, Operand, Operator
from dtorch.ir.opkind import BinaryKind, CreateKind, ReduceKind
from dtorch.ir.params import (
    BroadcastBinaryParam,
    ConvertParam,
    CreateParam,
    GetItemParam,
    OpParam,
    ReduceParam,
    SliceIndex,
)
from dtorch.ir.placement import Partial, Replicate, Shard
from dtorch.ir.scalar import Scalar
from dtorch.ir.span import Span
from dtorch.serialization.wire import FORMAT_VERSION, MAGIC, frame, unframe
from dtorch.serialization.writer import serialize_value

Mutator = Callable[[random.Random, bytes], bytes]

_ODD_VALUES: tuple[Any, ...] = (
    None, True, -1, 0, 1, 2**63 - 1, -(2**63), 2**64 - 1, 1.5, float("nan"), "", "ir.Span",
    b"\x00", [], [[]], [0], [-1], [10**9], [[0, 1], [2, 3]], {"k": 1},
)  # fmt: skip


def split(payload: bytes) -> tuple[int, bytes, bytes]:
    """Version, document and data section of a valid payload."""
    version, document, data = unframe(memoryview(payload))
    return version, bytes(document), bytes(data)


def reframe(document: bytes, data: bytes = b"", version: int = FORMAT_VERSION) -> bytes:
    """A payload around ``document`` and ``data`` whose frame sizes are right."""
    return b"".join(frame(document, [memoryview(data)], len(data), version))


def random_bytes(rng: random.Random, payload: bytes) -> bytes:
    """Random bytes, sometimes behind a valid magic."""
    data = rng.randbytes(rng.randrange(0, 96))
    return MAGIC + data if rng.random() < 0.5 else data


def truncate(rng: random.Random, payload: bytes) -> bytes:
    """The payload cut short at a random byte."""
    return payload[: rng.randrange(0, len(payload))]


def flip_bits(rng: random.Random, payload: bytes) -> bytes:
    """One, two or eight random bits of the payload flipped (the frame included)."""
    data = bytearray(payload)
    for _ in range(rng.choice((1, 1, 2, 8))):
        position = rng.randrange(len(data))
        data[position] ^= 1 << rng.randrange(8)
    return bytes(data)


def splice(rng: random.Random, payload: bytes) -> bytes:
    """Delete, duplicate or insert a run of bytes."""
    start = rng.randrange(len(payload))
    end = min(len(payload), start + rng.randrange(1, 16))
    choice = rng.randrange(3)
    if choice == 0:
        return payload[:start] + payload[end:]
    if choice == 1:
        return payload[:end] + payload[start:]
    return payload[:start] + rng.randbytes(end - start) + payload[start:]


def document_bytes(rng: random.Random, payload: bytes) -> bytes:
    """Bit flips and cuts inside the document, re-framed so the frame checks pass."""
    version, document, data = split(payload)
    return reframe(flip_bits(rng, document) if document else document, data, version)


def absurd_length(rng: random.Random, payload: bytes) -> bytes:
    """A MessagePack array, map, str or bin header in the document claims ~4 GiB."""
    version, document, data = split(payload)
    position = rng.randrange(len(document) + 1)
    marker = rng.choice((b"\xdd", b"\xdf", b"\xdb", b"\xc6"))
    length = rng.choice((b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x00\x10\x00\x00"))
    return reframe(document[:position] + marker + length + document[position:], data, version)


def deep_nesting(rng: random.Random, payload: bytes) -> bytes:
    """A document nested far deeper than any real one."""
    depth = rng.choice((100, 1_000, 100_000))
    return reframe(b"\x91" * depth + b"\x00")


def frame_header(rng: random.Random, payload: bytes) -> bytes:
    """A frame header with a random version, flags or sizes."""
    data = bytearray(payload)
    field = rng.choice(((4, "<H"), (6, "<H"), (8, "<Q"), (16, "<Q")))
    value = rng.choice((0, 1, 2, 255, 2**16 - 1)) if field[1] == "<H" else rng.getrandbits(64)
    struct.pack_into(field[1], data, field[0], value)
    return bytes(data)


def tree(rng: random.Random, payload: bytes) -> bytes:
    """Replace, drop or duplicate one value anywhere in the document tree."""
    version, document, data = split(payload)
    root = msgpack.unpackb(document, use_list=True)
    holders = _arrays(root)
    if not holders:
        return payload
    holder = rng.choice(holders)
    if not holder:
        holder.append(rng.choice(_ODD_VALUES))
    else:
        index = rng.randrange(len(holder))
        action = rng.randrange(4)
        if action == 0:
            holder[index] = rng.choice(_ODD_VALUES)
        elif action == 1:
            del holder[index]
        elif action == 2:
            holder.insert(index, holder[index])
        else:
            holder[index] = _nudge(rng, holder[index])
    return reframe(msgpack.packb(root), data, version)


def _arrays(root: Any) -> list[list[Any]]:
    found, stack = [], [root]
    while stack:
        value = stack.pop()
        if isinstance(value, list):
            found.append(value)
            stack.extend(value)
    return found


def _nudge(rng: random.Random, value: Any) -> Any:
    """An int shifted a little (a reference or a count off by a few), else something odd."""
    if type(value) is int:
        return value + rng.choice((-2, -1, 1, 2, 1000))
    return rng.choice(_ODD_VALUES)


#: Every mutator, by name (the campaign reports outcomes per mutator).
MUTATORS: dict[str, Mutator] = {
    "random bytes": random_bytes,
    "truncate": truncate,
    "flip bits": flip_bits,
    "splice": splice,
    "document bits": document_bytes,
    "absurd length": absurd_length,
    "deep nesting": deep_nesting,
    "frame header": frame_header,
    "tree": tree,
}


def mutate(rng: random.Random, payload: bytes) -> bytes:
    """One random mutation of ``payload``."""
    return MUTATORS[rng.choice(sorted(MUTATORS))](rng, payload)


def sample_payloads() -> list[bytes]:
    """Valid payloads covering every part of the format, for the mutators to start from: two
    ExecuteBatches (params of several kinds, shared meshes, spans and layouts), tensors of
    several dtypes with a generator, containers of every native type, and a lone record."""
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    span = Span("model.py", 3, 1)
    values: list[Any] = [_three_operators(mesh, span), _ten_operators(mesh, span)]
    values += [
        {"t": torch.arange(6, dtype=torch.int16).reshape(2, 3), "g": _generator(0)},
        [torch.arange(12, dtype=torch.bfloat16).reshape(3, 4), _generator(7), torch.ones(())],
        [[1, 2.5, "x", b"y", None], (mesh, mesh), {"k": [span]}],
        {"mesh": mesh, "again": mesh, "nested": [[1, 2.5], ("x", b"y", None)]},
        Span("f.py", 1, 2),
    ]
    return [serialize_value(value) for value in values]


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _three_operators(mesh: DeviceMesh, span: Span) -> ExecuteBatch:
    """A Create with a fill value, a Mul by a scalar and a GetItem with slices."""
    layout = (Shard(0), Replicate())
    create = CreateParam(CreateKind.FULL, (4, 4), torch.float32, mesh, layout, (1.5,))
    ops = (
        Operator(1, "full_1", create, (), (1,), span),
        Operator(2, "mul_2", BroadcastBinaryParam(BinaryKind.MUL, Scalar.of(2)), (1,), (2,), span),
        Operator(3, "get_3", GetItemParam((SliceIndex(0, 2), 1, None)), (2,), (3,), span),
    )
    operands = tuple(Operand(i, (4, 4), torch.float32, mesh, layout) for i in (1, 2, 3))
    return ExecuteBatch(ops, operands, (1,))


def _ten_operators(mesh: DeviceMesh, span: Span) -> ExecuteBatch:
    """Five param kinds in turn over two meshes, one span and one layout shared by all."""
    layout = (Shard(0), Replicate())
    params: list[OpParam] = [
        CreateParam(CreateKind.RANDN, (8, 4), torch.float32, mesh, layout, (), None, None),
        BroadcastBinaryParam(BinaryKind.ADD, Scalar.of(0.5), True),
        ReduceParam(ReduceKind.SUM, (1,), True, torch.float64),
        ConvertParam(init_device_mesh("cpu", 4), (Partial(),)),
        GetItemParam((SliceIndex(0, 4, 2), 1, None)),
    ]
    operators = tuple(
        Operator(i, f"op_{i}", params[i % len(params)], (i,), (i + 1,), span) for i in range(10)
    )
    operands = tuple(Operand(i + 1, (8, 4), torch.float32, mesh, layout) for i in range(10))
    return ExecuteBatch(operators, operands, (1, 2))

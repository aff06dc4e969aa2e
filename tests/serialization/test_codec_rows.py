"""The row paths against the column paths: the same payloads' values, the same errors.

The row writer (``rowwriter``) and the reader's row decoders (``rows``) are fast paths for
small values; each must give exactly what the column writer and the column decoders give,
and leave to them whatever it does not take.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dtorch.errors import DeserializationError, SerializationError
from dtorch.ir.mesh import init_device_mesh
from dtorch.ir.operator import ExecuteBatch, Operand, Operator
from dtorch.ir.opkind import BinaryKind, CreateKind
from dtorch.ir.params import (
    BroadcastBinaryParam,
    CreateParam,
    FuseParam,
    MatmulParam,
    SubGraphParam,
)
from dtorch.ir.placement import Replicate, Shard
from dtorch.ir.scalar import Scalar
from dtorch.ir.span import Span
from dtorch.serialization import (
    assert_structural_equal,
    decode_batch,
    encode_batch,
    node_counts,
)
from dtorch.serialization.catalog import DEFAULT_REGISTRY
from dtorch.serialization.fuzz import MUTATORS, reframe, sample_payloads
from dtorch.serialization.reader import deserialize_value
from dtorch.serialization.rowwriter import rows_payload
from dtorch.serialization.writer import columns_payload
from tests.serialization.codec_strategies import params, records

_FAST = settings(
    max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None
)
_NO_LIMIT = (10**9, 10**9)


def _batch(operators: int, param: Any = None) -> ExecuteBatch:
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    layouts = [(Shard(0), Replicate()), (Replicate(), Shard(1))]
    spans = [Span("m.py", line, 1) for line in range(1, 4)]
    kinds = [
        MatmulParam(),
        BroadcastBinaryParam(BinaryKind.MUL, Scalar.of(0.5)),
        CreateParam(CreateKind.ZEROS, (4, 4), torch.float32, mesh, layouts[0]),
    ]
    ops = tuple(
        Operator(i, f"op{i}", param or kinds[i % 3], (i, i), (i + 1,), spans[i % 3])
        for i in range(operators)
    )
    operands = tuple(
        Operand(i + 1, (4, 4), torch.float32, mesh, layouts[i % 2]) for i in range(operators)
    )
    return ExecuteBatch(ops, operands, (1,))


def _same_payload_values(value: Any) -> bytes:
    """The row writer's payload of ``value`` holds what the column writer's does."""
    rows = rows_payload(value, DEFAULT_REGISTRY, limits=_NO_LIMIT)
    assert rows is not None, "the row writer should write this value"
    columns = columns_payload(value, DEFAULT_REGISTRY)
    assert node_counts(rows) == node_counts(columns)
    restored = deserialize_value(rows)
    assert_structural_equal(restored, deserialize_value(columns, rows=False))
    assert_structural_equal(restored, value)
    return rows


@pytest.mark.timeout(60)
@_FAST
@given(params())
def test_row_writer_writes_every_param_as_the_column_writer(param: Any) -> None:
    if rows_payload(param, DEFAULT_REGISTRY, limits=_NO_LIMIT) is None:
        # tensors and generators are data the row writer leaves to the column writer, and
        # so are params that hold params (Fuse) or operators (SubGraph)
        assert type(param) in (CreateParam, FuseParam, SubGraphParam) or any(
            type(getattr(param, name, None)) in (torch.Tensor, torch.Generator)
            for name in ("generator", "value")
        )
        return
    _same_payload_values(param)


@pytest.mark.timeout(60)
@_FAST
@given(st.sampled_from([Operand, Operator, Span]).flatmap(records))
def test_row_writer_writes_records_as_the_column_writer(record: Any) -> None:
    if type(record) is Operator and type(record.param) in (FuseParam, SubGraphParam):
        return
    if rows_payload(record, DEFAULT_REGISTRY, limits=_NO_LIMIT) is not None:
        _same_payload_values(record)


@pytest.mark.parametrize("operators", [0, 1, 10, 40])
def test_batches_are_written_a_record_at_a_time(operators: int) -> None:
    batch = _batch(operators)
    _same_payload_values(batch)
    restored = decode_batch(encode_batch(batch))
    assert_structural_equal(restored, batch)
    if operators > 2:
        assert restored.operands[0].mesh is restored.operators[2].param.mesh


def test_values_left_to_the_column_writer() -> None:
    tensor = CreateParam(CreateKind.FULL, (2,), torch.float32, init_device_mesh("cpu", 2),
                         (Replicate(),), (), None, torch.ones(2))  # fmt: skip
    nested = FuseParam((FuseParam((MatmulParam(),)),))
    inner = Operator(1, "mm", MatmulParam(), (1,), (2,), Span("m.py", 1))
    sub = SubGraphParam((inner,))
    for value in (
        _batch(3, tensor),
        _batch(3, nested),
        _batch(3, sub),
        [Span("m.py", 1)],
        None,
        _batch(65),  # past the row writer's limit
    ):
        assert rows_payload(value, DEFAULT_REGISTRY) is None
        restored = decode_batch(encode_batch(value)) if type(value) is ExecuteBatch else None
        if restored is not None:
            assert_structural_equal(restored, value)


def test_refused_values_raise_the_column_writers_errors() -> None:
    bad = Operator(1, "x", MatmulParam(), (1.5,), (2,), Span("m.py", 1))  # type: ignore[arg-type]
    with pytest.raises(SerializationError, match=r"ir\.Operator\.inputs"):
        encode_batch(ExecuteBatch((bad,)))
    with pytest.raises(SerializationError, match="64 bits"):
        encode_batch(ExecuteBatch((), (), (2**64,)))


def _outcome(data: bytes, rows: bool) -> Any:
    try:
        return deserialize_value(data, rows=rows)
    except DeserializationError as exc:
        return type(exc), str(exc)


def _same_outcome(data: bytes) -> None:
    fast, slow = _outcome(data, True), _outcome(data, False)
    if type(slow) is tuple and len(slow) == 2 and isinstance(slow[0], type):
        assert fast == slow
    else:  # written again, the two values make the same payload (NaN keys and all)
        assert columns_payload(fast, DEFAULT_REGISTRY) == columns_payload(slow, DEFAULT_REGISTRY)


SAMPLES = [*sample_payloads(), columns_payload(_batch(12), DEFAULT_REGISTRY)]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(MUTATORS))
def test_row_reader_gives_the_column_readers_values_and_errors(name: str) -> None:
    rng = random.Random(f"rows:{name}")
    for i in range(200):
        _same_outcome(MUTATORS[name](rng, SAMPLES[i % len(SAMPLES)]))


@pytest.mark.timeout(60)
def test_row_reader_on_every_bit_flip_of_a_batch() -> None:
    from dtorch.serialization.fuzz import split

    version, document, data = split(SAMPLES[1])
    for position in range(len(document)):
        flipped = bytearray(document)
        flipped[position] ^= 1 << (position % 8)
        _same_outcome(reframe(bytes(flipped), data, version))


def test_type_table_bindings_cache_stays_bounded() -> None:
    import msgpack

    tags = sorted(DEFAULT_REGISTRY.by_tag)
    for first in tags[:20]:
        for second in tags[:20]:
            header = [
                [tag, list(DEFAULT_REGISTRY.by_tag[tag].field_names)] for tag in (first, second)
            ]
            deserialize_value(reframe(msgpack.packb([header, [], None])))
    assert len(DEFAULT_REGISTRY.bindings) <= 256


_ODD = (None, True, -1, 0, 1, 2**64 - 1, 1.0, "", "ir.Span", b"", (), (0,), (-1,), ((0,),), {})


def _leaf_paths(root: Any) -> list[tuple[int, ...]]:
    """The path of every value inside every array of a document."""
    paths, stack = [], [((), root)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, list):
            for i, item in enumerate(value):
                paths.append((*path, i))
                stack.append(((*path, i), item))
    return paths


def _replaced(root: Any, path: tuple[int, ...], value: Any) -> Any:
    copy = msgpack_roundtrip(root)
    holder = copy
    for i in path[:-1]:
        holder = holder[i]
    holder[path[-1]] = value
    return copy


def msgpack_roundtrip(value: Any) -> Any:
    import msgpack

    return msgpack.unpackb(msgpack.packb(value), use_list=True)


@pytest.mark.timeout(120)
def test_row_reader_on_every_value_of_a_batch_replaced() -> None:
    import msgpack

    from dtorch.serialization.fuzz import split

    version, document, data = split(columns_payload(_batch(4), DEFAULT_REGISTRY))
    root = msgpack.unpackb(document, use_list=True)
    for path in _leaf_paths(root[1]):  # the groups: every column, every value
        for odd in _ODD:
            changed = _replaced(root, (1, *path), odd)
            _same_outcome(reframe(msgpack.packb(changed), data, version))


@pytest.mark.timeout(120)
def test_the_same_value_encodes_to_the_same_bytes_in_every_process() -> None:
    """Groups of node types were ordered by iterating sets of classes (an address order):
    two processes could write the same batch in two orders (a program file's bytes changed
    from run to run)."""
    import os
    import subprocess
    import sys

    code = (
        "import hashlib; from tests.serialization.test_codec_rows import _batch\n"
        "from dtorch.serialization import encode_batch, serialize\n"
        "from dtorch.serialization.fuzz import sample_payloads\n"
        "h = hashlib.sha256()\n"
        "for n in (2, 3, 7, 300): h.update(encode_batch(_batch(n)))\n"
        "for p in sample_payloads(): h.update(p)\n"
        "nested = [[1, [2, (3, {'a': [4]})]], {'k': ([5], [[6]], (7, [8]))}]\n"
        "h.update(serialize(nested)); h.update(serialize([nested, nested[0], (nested,)]))\n"
        "print(h.hexdigest())\n"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True, text=True, check=True, timeout=100,
        ).stdout
        for seed in range(4)
    }  # fmt: skip
    assert len(digests) == 1

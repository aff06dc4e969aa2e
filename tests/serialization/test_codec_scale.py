"""Larger graphs: the column fast paths (repeated references, repeated rows, many types)
must give exactly what the small cases give."""

from __future__ import annotations

import random
from typing import Any

import pytest
import torch

from dtorch.ir.mesh import init_device_mesh
from dtorch.ir.operator import ExecuteBatch, Operand, Operator
from dtorch.ir.opkind import BinaryKind, ReduceKind
from dtorch.ir.params import (
    BroadcastBinaryParam,
    ConvertParam,
    GetItemParam,
    MatmulParam,
    ReduceParam,
    SliceIndex,
)
from dtorch.ir.placement import Partial, Replicate, Shard
from dtorch.ir.scalar import Scalar
from dtorch.ir.span import Span
from dtorch.serialization import assert_structural_equal, deserialize, node_counts, serialize


def _graph(operators: int, seed: int) -> ExecuteBatch:
    """Shared meshes, spans per line, placement tuples both shared and built afresh (1-D and
    2-D meshes mixed, so placement rows differ in length), every param kind of the mix."""
    rng = random.Random(seed)
    line, square = init_device_mesh("cpu", 4), init_device_mesh("cpu", (2, 2))
    shared = [(Shard(0),), (Replicate(), Shard(1))]
    spans = [Span("model.py", i + 1, 5) for i in range(40)]
    operands, ops = [], []
    for i in range(operators):
        if rng.random() < 0.5:
            mesh, layout = (line, shared[0]) if i % 2 else (square, shared[1])
        else:
            mesh, layout = (line, (Partial(),)) if i % 2 else (square, (Shard(0), Replicate()))
        operand = Operand(i, (8, 8), torch.float32, mesh, layout)
        param = [
            MatmulParam(),
            BroadcastBinaryParam(BinaryKind.ADD, Scalar.of(float(i))),
            ReduceParam(ReduceKind.MAX, (0,), bool(i % 3)),
            ConvertParam(mesh, layout),
            GetItemParam((SliceIndex(0, i % 8), None, i % 5)),
        ][i % 5]
        inputs = tuple(rng.randrange(i) for _ in range(2)) if i else ()
        ops.append(Operator(i, f"op{i}", param, inputs, (i,), spans[i % len(spans)]))
        operands.append(operand)
    return ExecuteBatch(tuple(ops), tuple(operands), tuple(range(0, operators, 7)))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("operators", [300, 3000])
def test_large_graph_round_trips_with_sharing(operators: int) -> None:
    batch = _graph(operators, seed=operators)
    payload = serialize(batch)
    restored = deserialize(payload)
    assert_structural_equal(batch, restored)
    assert restored == batch
    counts = node_counts(payload)
    assert counts["ir.Span"] == 40 and counts["ir.DeviceMesh"] == 2
    assert counts["ir.Operator"] == counts["ir.Operand"] == operators
    meshes = {id(o.mesh) for o in restored.operands}
    assert len(meshes) == 2
    assert len({id(o.span) for o in restored.operators}) == 40
    by_identity = {id(p) for o in batch.operands for p in o.placements}
    restored_identity = {id(p) for o in restored.operands for p in o.placements}
    assert len(by_identity) == len(restored_identity)  # one decoded placement per original


@pytest.mark.timeout(60)
def test_many_nested_containers_use_the_layered_order() -> None:
    leaves = [[i] for i in range(500)]
    value: Any = [leaves, [leaves[::-1], {"k": leaves[3]}], tuple(leaves[:10])]
    restored = deserialize(serialize(value))
    assert restored == value
    assert restored[0][3] is restored[1][1]["k"] is restored[2][3]
    assert restored[0][0] is restored[1][0][-1]


@pytest.mark.timeout(60)
def test_list_of_small_lists_over_shared_meshes() -> None:
    meshes = [init_device_mesh("cpu", (2,)) for _ in range(30)]
    value = [[meshes[k % 30], Shard(k % 3), Replicate(), k, [k]] for k in range(600)]
    value.append([value[5], value[5][4]])  # lists of three heights in one payload
    restored = deserialize(serialize(value))
    assert restored == value
    assert restored[0][0] is restored[30][0] and restored[0][0] is not restored[1][0]
    assert restored[-1][0] is restored[5] and restored[-1][1] is restored[5][4]
    counts = node_counts(serialize(value))
    assert counts["ir.DeviceMesh"] == 30 and counts["py.list"] == 1 + 601 + 600


@pytest.mark.timeout(60)
@pytest.mark.parametrize("length", [1000, 20000])  # below and above the sorted-ids check
@pytest.mark.parametrize("where", ["start", "end"])
def test_long_first_column_with_one_repeat_keeps_identity(length: int, where: str) -> None:
    spans = [Span("model.py", i + 1, 1) for i in range(length)]
    repeat = spans[0] if where == "start" else spans[-1]
    value = (*spans, repeat) if where == "end" else (repeat, *spans)
    payload = serialize(value)
    restored = deserialize(payload)
    assert restored == value
    assert node_counts(payload)["ir.Span"] == length
    first, last = (restored[0], restored[1]) if where == "start" else (restored[-2], restored[-1])
    assert first is last

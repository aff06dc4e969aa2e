"""Round trips of every record type, containers, enums and dtypes; identity sharing; cycles."""

from __future__ import annotations

import copy
import dataclasses
import enum
import math
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dtorch.errors import SerializationError
from dtorch.ir import opkind
from dtorch.ir.device import Device
from dtorch.ir.mesh import DeviceMesh, init_device_mesh
from dtorch.ir.operator import ExecuteBatch, Operand, Operator
from dtorch.ir.params import (
    BroadcastBinaryParam,
    ConvertParam,
    FuseParam,
    GetItemParam,
    MatmulParam,
    PromiseHandle,
    SliceIndex,
    SubGraphParam,
)
from dtorch.ir.placement import Partial, Replicate, Shard
from dtorch.ir.scalar import Scalar, ScalarKind
from dtorch.ir.span import Span
from dtorch.serialization import (
    assert_structural_equal,
    decode_batch,
    deserialize,
    encode_batch,
    node_counts,
    serialize,
)
from tests.serialization.codec_strategies import (
    meshes,
    params,
    placements,
    records,
    roundtrip,
    scalars,
)

_FAST = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)


def _compares_by_value(value: Any) -> bool:
    """True when an equal copy of ``value`` compares == to it: not so when a float NaN, a
    tensor (elementwise ==) or an identity-compared record (Create/Dropout params) sits
    inside."""
    if _has_float_nan(value):
        return False
    try:
        return bool(copy.deepcopy(value) == value)
    except RuntimeError:  # a tensor inside compares elementwise
        return False


def _has_float_nan(value: Any) -> bool:
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, (tuple, list)):
        return any(_has_float_nan(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, (type, Scalar)):
        return any(_has_float_nan(getattr(value, f.name)) for f in dataclasses.fields(value))
    return False


def _check_value_semantics(original: Any, restored: Any) -> None:
    """Decoded records are structurally equal to the originals, and compare == and hash like
    them wherever the record compares by value."""
    assert type(restored) is type(original)
    assert_structural_equal(restored, original)
    if type(original).__eq__ is not object.__eq__ and _compares_by_value(original):
        assert restored == original
        assert hash(restored) == hash(original)


@pytest.mark.timeout(60)
@_FAST
@given(params())
def test_every_param_round_trips(param: Any) -> None:
    _check_value_semantics(param, roundtrip(param))


@pytest.mark.timeout(60)
@_FAST
@given(st.lists(placements, max_size=4), meshes(), st.lists(scalars(), max_size=3))
def test_meshes_placements_scalars_round_trip(
    ps: list[Any], mesh: DeviceMesh, values: list[Scalar]
) -> None:
    restored = roundtrip((ps, mesh, values))
    assert restored[0] == ps and restored[1] == mesh and restored[2] == values
    assert hash(restored[1]) == hash(mesh)


@pytest.mark.timeout(60)
@_FAST
@given(
    st.sampled_from([Device, Span, SliceIndex, PromiseHandle, Operand, Operator]).flatmap(records)
)
def test_ir_records_round_trip(record: Any) -> None:
    _check_value_semantics(record, roundtrip(record))


def test_scalars_keep_kind_and_exact_value() -> None:
    values = [Scalar.of(2**64 - 1), Scalar.of(-(2**63)), Scalar.of(True), Scalar.of(None)]
    values += [Scalar.of(float("nan")), Scalar.of(-0.0), Scalar.of(float("-inf"))]
    restored = roundtrip(values)
    assert [s.kind for s in restored] == [s.kind for s in values]
    assert restored[0].value == 2**64 - 1 and type(restored[2].value) is bool
    assert math.copysign(1.0, restored[5].value) == -1.0 and math.isnan(restored[4].value)


def test_every_enum_member_round_trips_as_itself() -> None:
    enums = [c for c in vars(opkind).values() if isinstance(c, type) and issubclass(c, enum.Enum)]
    members = [m for e in [*enums, ScalarKind] for m in e]  # type: ignore[attr-defined]
    restored = deserialize(serialize(members))
    assert all(a is b for a, b in zip(members, restored, strict=True))


def test_decoded_fields_have_declared_types() -> None:
    param = BroadcastBinaryParam(opkind.BinaryKind.SUB, Scalar.of(2.5), scalar_first=True)
    operand = Operand(3, (4, 5), torch.bfloat16, init_device_mesh("cpu", 2), (Shard(1),))
    restored_param, restored_operand = deserialize(serialize((param, operand)))
    assert type(restored_param.binary) is opkind.BinaryKind
    assert restored_operand.dtype is torch.bfloat16
    assert type(restored_operand.shape) is tuple and type(restored_operand.placements) is tuple
    assert {restored_param: 1}[param] == 1 and {restored_operand: 2}[operand] == 2


def test_containers_and_natives() -> None:
    value = {
        "list": [1, -2, 2**64 - 1, -(2**63), 1.5, float("inf"), True, None, "s", b"\x00\xff"],
        "tuple": (),
        "nested": [[[]], ((),), {"k": {}}],
        7: "int key",
        (1, "a"): "tuple key",
        Span("f.py", 1): "record key",
    }
    assert roundtrip(value) == value
    for native in [None, 0, -1, 3.25, "", b"", True]:
        assert deserialize(serialize(native)) == native


def test_dtypes_and_mixed_graph() -> None:
    value = [torch.float32, torch.bool, torch.complex128, torch.uint64]
    assert roundtrip(value) == value


def test_identity_sharing_is_written_once_and_restored() -> None:
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    span = Span("model.py", 12, 4)
    shard = Shard(0)
    a = Operand(1, (4, 4), torch.float32, mesh, (shard, Replicate()))
    b = Operand(2, (4, 4), torch.float32, mesh, (shard, Partial()))
    convert = ConvertParam(mesh, (shard, Replicate()))
    ops = [Operator(i, f"op{i}", convert, (1,), (2,), span) for i in range(3)]
    payload = serialize({"a": a, "b": b, "ops": ops, "again": [span, span, mesh]})
    counts = node_counts(payload)
    assert counts["ir.DeviceMesh"] == 1 and counts["ir.Span"] == 1 and counts["ir.Shard"] == 1
    assert counts["param.Convert"] == 1 and counts["ir.Operand"] == 2
    restored = deserialize(payload)
    assert restored["a"].mesh is restored["b"].mesh is restored["ops"][0].param.mesh
    assert restored["a"].placements[0] is restored["b"].placements[0]
    assert restored["ops"][0].param is restored["ops"][2].param
    assert restored["again"][0] is restored["again"][1] is restored["ops"][1].span
    assert restored["again"][2] is restored["a"].mesh


def test_equal_but_distinct_records_stay_distinct() -> None:
    first, second = Span("f.py", 1), Span("f.py", 1)
    x, y = deserialize(serialize([first, second]))
    assert x == y and x is not y


def test_shared_containers_keep_identity() -> None:
    inner = [1, 2]
    holder = {"x": inner, "y": inner, "t": (inner,)}
    restored = deserialize(serialize(holder))
    assert restored["x"] is restored["y"] is restored["t"][0]


def test_nested_params_and_subgraphs_round_trip() -> None:
    span = Span("m.py", 2)
    inner = Operator(1, "mm", MatmulParam(), (1, 2), (3,), span)
    fuse = FuseParam((BroadcastBinaryParam(opkind.BinaryKind.ADD, Scalar.of(1)), MatmulParam()))
    nested = FuseParam((fuse, fuse))
    sub = SubGraphParam((inner, Operator(2, "sub", SubGraphParam((inner,)), (3,), (4,), span)))
    outer = Operator(9, "outer", sub, (1,), (4,), span)
    restored = roundtrip([outer, nested, Operator(10, "f", nested, (), (), span)])
    assert restored[0].param.operators[0] is restored[0].param.operators[1].param.operators[0]
    assert restored[1].steps[0] is restored[1].steps[1] is restored[2].param.steps[1]


def test_getitem_index_entries() -> None:
    param = GetItemParam((SliceIndex(0, 4, 2), 3, None, SliceIndex(1, 2)))
    restored = roundtrip(param)
    assert restored == param and type(restored.index[1]) is int


def test_execute_batch_wire_message() -> None:
    mesh = init_device_mesh("cpu", 4)
    operands = tuple(Operand(i, (8,), torch.float32, mesh, (Shard(0),)) for i in range(3))
    span = Span("m.py", 1)
    operators = tuple(Operator(i, f"o{i}", MatmulParam(), (0, 1), (2,), span) for i in range(2))
    batch = ExecuteBatch(operators, operands, (0, 1))
    data = encode_batch(batch)
    restored = decode_batch(data)
    assert restored == batch and hash(restored) == hash(batch)
    assert decode_batch(bytearray(data)) == batch  # any buffer, decoded once per receiver
    with pytest.raises(SerializationError, match="ExecuteBatch"):
        encode_batch(operators)  # type: ignore[arg-type]


def test_decode_batch_refuses_other_payloads() -> None:
    from dtorch.errors import DeserializationError

    with pytest.raises(DeserializationError, match="ExecuteBatch"):
        decode_batch(serialize([1]))


class _Unregistered:
    pass


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (_Unregistered(), "_Unregistered"),
        ([1, {2, 3}], "set"),
        (2**64, "64 bits"),
        (-(2**63) - 1, "64 bits"),
        ("\udc80", "unicode"),
        (Span(3, 1), "ir.Span.file: expected str"),  # type: ignore[arg-type]
        (Operator(1, "x", Span("f", 1), (), (), Span("f", 1)), "Operator.param"),  # type: ignore[arg-type]
        (Operand(1, (2.0,), torch.float32, DeviceMesh("cpu"), ()), "Operand.shape"),  # type: ignore[arg-type]
        (torch.nn.Parameter(torch.zeros(1)), "Parameter"),
    ],
)
def test_unserializable_values_are_refused_clearly(value: Any, message: str) -> None:
    with pytest.raises(SerializationError, match=message):
        serialize(value)


def test_cycles_are_refused() -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    with pytest.raises(SerializationError, match="cycle: list -> list"):
        serialize(loop)
    a: dict[str, Any] = {}
    b = [a]
    a["b"] = (b,)
    with pytest.raises(SerializationError, match="cycle"):
        serialize({"root": a})


@pytest.mark.timeout(30)
def test_deep_nesting_needs_no_recursion() -> None:
    value: Any = "leaf"
    for _ in range(20_000):
        value = [value]
    restored = deserialize(serialize(value))
    depth = 0
    while isinstance(restored, list):
        restored, depth = restored[0], depth + 1
    assert depth == 20_000 and restored == "leaf"

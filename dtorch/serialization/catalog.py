"""The default registry: every type dtorch serializes, each once under a stable tag.

Tags are part of the format: never change or reuse one. A new record type is one line in
``_RECORDS`` (its fields come from its annotations); a new param record needs no line at all,
since every ``dtorch.ir.params.PARAM_TYPES`` entry registers as ``param.<OpKind name>``.

Example:
    >>> from dtorch.ir.params import MatmulParam
    >>> DEFAULT_REGISTRY.by_type[MatmulParam].tag
    'param.Matmul'
"""

from __future__ import annotations

from typing import Any

import torch

from dtorch.errors import DeserializationError
from dtorch.ir import opkind, report
from dtorch.ir.device import Device
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.operator import ExecuteBatch, Operand, Operator
from dtorch.ir.params import PARAM_TYPES, PromiseHandle, SharedInput, SliceIndex
from dtorch.ir.placement import Partial, Replicate, Shard
from dtorch.ir.scalar import Scalar, ScalarKind
from dtorch.ir.span import Span
from dtorch.serialization.fields import (
    AnyField,
    DtypeField,
    EnumField,
    OptionalField,
    PrimField,
    TupleField,
)
from dtorch.serialization.registry import (
    Field,
    NodeType,
    TypeRegistry,
    attribute_exploder,
)
from dtorch.serialization.tensors import generator_type, tensor_type

_RECORDS: tuple[tuple[str, type], ...] = (
    ("ir.Device", Device),
    ("ir.Shard", Shard),
    ("ir.Replicate", Replicate),
    ("ir.Partial", Partial),
    ("ir.Scalar", Scalar),
    ("ir.Span", Span),
    ("ir.SliceIndex", SliceIndex),
    ("ir.PromiseHandle", PromiseHandle),
    ("ir.Operand", Operand),
    ("ir.Operator", Operator),
    ("ir.ExecuteBatch", ExecuteBatch),
    ("ir.Failure", report.Failure),
    ("ir.SharedValue", report.SharedValue),
    ("ir.SharedInput", SharedInput),
    ("ir.InputsDone", report.InputsDone),
    ("ir.ValueReport", report.ValueReport),
    ("ir.PartyReport", report.PartyReport),
    ("ir.ProgressReport", report.ProgressReport),
    ("ir.WorkerFailureReport", report.WorkerFailureReport),
    ("ir.ProfileEvent", report.ProfileEvent),
    ("ir.ProfileReport", report.ProfileReport),
    *((f"param.{kind.name}", cls) for kind, cls in PARAM_TYPES.items()),
)

#: Enums travel inline (as ints) in typed fields; these node types carry them where any value
#: may stand (a container item, the payload root).
_ENUMS: tuple[tuple[str, type], ...] = (
    ("enum.OpKind", opkind.OpKind),
    ("enum.ActivationKind", opkind.ActivationKind),
    ("enum.BinaryKind", opkind.BinaryKind),
    ("enum.MathKind", opkind.MathKind),
    ("enum.ReduceKind", opkind.ReduceKind),
    ("enum.CreateKind", opkind.CreateKind),
    ("enum.NormKind", opkind.NormKind),
    ("enum.PoolKind", opkind.PoolKind),
    ("enum.PaddingType", opkind.PaddingType),
    ("enum.OperatorFormat", opkind.OperatorFormat),
    ("enum.MaskedKind", opkind.MaskedKind),
    ("enum.MemoryKind", opkind.MemoryKind),
    ("enum.MaxMinKind", opkind.MaxMinKind),
    ("enum.PromiseKind", opkind.PromiseKind),
    ("enum.ScanKind", opkind.ScanKind),
    ("enum.ScatterReduceKind", opkind.ScatterReduceKind),
    ("enum.OrderStatKind", opkind.OrderStatKind),
    ("enum.LinalgKind", opkind.LinalgKind),
    ("enum.FftKind", opkind.FftKind),
    ("enum.ScalarKind", ScalarKind),
)

_INTS = TupleField(PrimField(frozenset({int})))
_ANYS = TupleField(AnyField())


def _itself(objs: list[Any]) -> list[list[Any]]:
    return [objs]


def _first_column(columns: list[list[Any]], count: int) -> list[Any]:
    return columns[0]


def _same(value: Any) -> Any:
    return value


def enum_type(tag: str, enum: type) -> NodeType:
    """An IntEnum as a node whose one field is the member's value."""
    field = Field("value", EnumField.of(enum))
    return NodeType(tag, enum, (field,), _itself, _first_column, make=_same)


def dtype_type() -> NodeType:
    """torch.dtype as a node whose one field is its stable code."""
    field = Field("code", DtypeField())
    return NodeType("torch.dtype", torch.dtype, (field,), _itself, _first_column, make=_same)


def mesh_type() -> NodeType:
    """DeviceMesh by device type, shape, row-major ids and dim names (``from_ids`` rebuilds)."""
    fields = (
        Field("device_type", PrimField(frozenset({str}))),
        Field("shape", _INTS),
        Field("device_ids", _INTS),
        Field("dim_names", OptionalField(TupleField(PrimField(frozenset({str})))), None),
    )
    # The wire names stay; the values are read from the text attributes (the public
    # device_type is a torch.device and dim_names a list).
    attributes = ("device_kind", "shape", "device_ids", "mesh_dim_names")
    return NodeType(
        "ir.DeviceMesh",
        DeviceMesh,
        fields,
        attribute_exploder(attributes),
        lambda columns, count: list(map(DeviceMesh.from_ids, *columns)),
        make=DeviceMesh.from_ids,
        by_attribute=attributes,
    )


def _build_lists(columns: list[list[Any]], count: int) -> list[Any]:
    return list(map(list, columns[0]))


def _explode_dicts(objs: list[Any]) -> list[list[Any]]:
    return [[tuple(d) for d in objs], [tuple(d.values()) for d in objs]]


def _build_dicts(columns: list[list[Any]], count: int) -> list[Any]:
    keys, values = columns
    if list(map(len, keys)) != list(map(len, values)):
        raise DeserializationError("a dict's keys and values differ in number")
    dicts = [dict(zip(k, v, strict=True)) for k, v in zip(keys, values, strict=True)]
    if list(map(len, dicts)) != list(map(len, keys)):  # last one wins: two readers could differ
        twice = next(k for d, k in zip(dicts, keys, strict=True) if len(d) != len(k))
        key = next(key for i, key in enumerate(twice) if key in twice[:i])
        raise DeserializationError(f"a dict holds the key {key!r} twice")
    return dicts


def container_types() -> list[NodeType]:
    """list, tuple and dict, whose items are any values."""
    return [
        NodeType(
            "py.list",
            list,
            (Field("items", _ANYS),),
            lambda objs: [list(map(tuple, objs))],
            _build_lists,
        ),
        NodeType("py.tuple", tuple, (Field("items", _ANYS),), _itself, _first_column),
        NodeType(
            "py.dict",
            dict,
            (Field("keys", _ANYS), Field("values", _ANYS)),
            _explode_dicts,
            _build_dicts,
        ),
    ]


def default_registry() -> TypeRegistry:
    """Every IR record, param, enum, mesh, tensor, generator, dtype and container type."""
    specials = [mesh_type(), tensor_type(), generator_type(), dtype_type()]
    specials += [enum_type(tag, enum) for tag, enum in _ENUMS] + container_types()
    return TypeRegistry.build(_RECORDS, specials)


#: The registry serialize/deserialize use; immutable, built once at import.
DEFAULT_REGISTRY: TypeRegistry = default_registry()

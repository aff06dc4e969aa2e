"""The type table: one stable tag per type, and OpKind <-> params <-> codec one to one."""

from __future__ import annotations

import dataclasses
import enum

import torch

from dtorch.ir import opkind
from dtorch.ir.params import PARAM_TYPES, PARAM_VALUE_TYPES
from dtorch.ir.scalar import ScalarKind
from dtorch.serialization.catalog import DEFAULT_REGISTRY
from dtorch.serialization.fields import RefField, TupleField


def test_opkind_params_and_codec_table_agree_one_to_one() -> None:
    param_entries = {
        tag: nt for tag, nt in DEFAULT_REGISTRY.by_tag.items() if tag.startswith("param.")
    }
    assert set(PARAM_TYPES) == set(opkind.OpKind)
    assert len(set(PARAM_TYPES.values())) == len(PARAM_TYPES)
    assert {nt.cls for nt in param_entries.values()} == set(PARAM_TYPES.values())
    assert len(param_entries) == len(opkind.OpKind)
    for kind, cls in PARAM_TYPES.items():
        node_type = DEFAULT_REGISTRY.by_type[cls]
        assert node_type.tag == f"param.{kind.name}" and cls.kind is kind  # type: ignore[attr-defined]
        assert DEFAULT_REGISTRY.by_tag[node_type.tag] is node_type


def test_nested_records_and_enums_are_registered() -> None:
    for cls in PARAM_VALUE_TYPES:
        assert DEFAULT_REGISTRY.by_type[cls].tag.startswith("ir.")
    enums = [c for c in vars(opkind).values() if isinstance(c, type) and issubclass(c, enum.Enum)]
    for e in [*enums, ScalarKind]:
        assert DEFAULT_REGISTRY.by_type[e].tag == f"enum.{e.__name__}"
    for cls in (torch.Tensor, torch.Generator, torch.dtype, list, tuple, dict):
        assert cls in DEFAULT_REGISTRY.by_type


def test_tags_and_types_are_unique_and_fields_follow_the_records() -> None:
    assert len(DEFAULT_REGISTRY.by_tag) == len(DEFAULT_REGISTRY.by_type)
    for cls, node_type in DEFAULT_REGISTRY.by_type.items():
        if dataclasses.is_dataclass(cls):
            assert node_type.field_names == tuple(f.name for f in dataclasses.fields(cls))


def test_references_accept_exactly_the_registered_subclasses() -> None:
    from dtorch.ir.operator import Operand, Operator
    from dtorch.ir.params import OpParam
    from dtorch.ir.placement import Partial, Replicate, Shard

    operator_fields = {f.name: f.codec for f in DEFAULT_REGISTRY.by_type[Operator].fields}
    param = operator_fields["param"]
    assert isinstance(param, RefField) and param.classes == frozenset(PARAM_TYPES.values())
    assert all(issubclass(c, OpParam) for c in param.classes)
    placements = {f.name: f.codec for f in DEFAULT_REGISTRY.by_type[Operand].fields}["placements"]
    assert isinstance(placements, TupleField) and isinstance(placements.inner, RefField)
    assert placements.inner.classes == frozenset({Shard, Replicate, Partial})

"""Hypothesis strategies for every serializable IR value, and a round-trip helper.

Record strategies come from the records' own fields (the codec's field table) so a new param
record is covered without a line here; records whose constructors check their values
(Device, Shard, Scalar, DeviceMesh) get hand-written strategies that stay valid.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from hypothesis import strategies as st

from dtorch.ir.device import Device
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.operator import Operator
from dtorch.ir.params import PARAM_TYPES, SubGraphParam
from dtorch.ir.placement import Partial, Replicate, Shard
from dtorch.ir.scalar import Scalar, ScalarKind
from dtorch.serialization import assert_structural_equal, deserialize, serialize
from dtorch.serialization.catalog import DEFAULT_REGISTRY
from dtorch.serialization.fields import (
    AnyField,
    DtypeField,
    EnumField,
    FieldCodec,
    OptionalField,
    PrimField,
    RefField,
    TupleField,
)

NoneType = type(None)
INT64 = st.integers(-(2**63), 2**63 - 1)
_PRIMS: dict[type, st.SearchStrategy[Any]] = {
    int: INT64,
    bool: st.booleans(),
    float: st.floats(allow_nan=True, allow_infinity=True),
    str: st.text(max_size=12),
    bytes: st.binary(max_size=12),
    NoneType: st.none(),
}


@st.composite
def meshes(draw: st.DrawFn) -> DeviceMesh:
    shape = draw(st.lists(st.integers(1, 3), min_size=0, max_size=3).map(tuple))
    count = math.prod(shape)
    spare = draw(st.integers(0, 3))
    ids = draw(st.permutations(range(count + spare)))[:count]
    names = draw(st.none() | st.just(tuple(f"d{i}" for i in range(len(shape)))))
    kind = draw(st.sampled_from(["cpu", "cuda"]))
    return DeviceMesh.from_ids(kind, shape, ids, names if shape else None)


placements = st.one_of(
    st.builds(Shard, st.integers(-3, 3), st.integers(-1, 2)),
    st.builds(Replicate),
    st.builds(Partial),
)


@st.composite
def scalars(draw: st.DrawFn) -> Scalar:
    kind = draw(st.sampled_from(list(ScalarKind)))
    value = {
        ScalarKind.INT: INT64,
        ScalarKind.UINT: st.integers(0, 2**64 - 1),
        ScalarKind.FLOAT: st.floats(),
        ScalarKind.BOOL: st.booleans(),
        ScalarKind.NONE: st.none(),
    }[kind]
    return Scalar(kind, draw(value))


@st.composite
def tensors(draw: st.DrawFn) -> torch.Tensor:
    dtype = draw(st.sampled_from([torch.float32, torch.bfloat16, torch.int64, torch.bool]))
    shape = draw(st.lists(st.integers(0, 3), max_size=3).map(tuple))
    data = torch.arange(math.prod(shape), dtype=torch.float64).reshape(shape)
    return data.to(dtype) if dtype is not torch.bool else data > 1


@st.composite
def generators(draw: st.DrawFn) -> torch.Generator:
    generator = torch.Generator()
    generator.manual_seed(draw(st.integers(0, 2**32)))
    torch.randn(draw(st.integers(0, 3)), generator=generator)  # advance it a little
    return generator


_SPECIAL: dict[type, st.SearchStrategy[Any]] = {
    Device: st.builds(Device, st.sampled_from(["cpu", "cuda"]), st.integers(0, 64)),
    Shard: placements.filter(lambda p: isinstance(p, Shard)),
    Scalar: scalars(),
    DeviceMesh: meshes(),
    torch.Tensor: tensors(),
    torch.Generator: generators(),
}


def codec_values(codec: FieldCodec, depth: int) -> st.SearchStrategy[Any]:
    """Values a field with this codec accepts."""
    if isinstance(codec, PrimField):
        return st.one_of(*(_PRIMS[t] for t in sorted(codec.types, key=lambda t: t.__name__)))
    if isinstance(codec, EnumField):
        return st.sampled_from(list(codec.enum))  # type: ignore[call-overload]
    if isinstance(codec, DtypeField):
        return st.sampled_from([torch.float32, torch.bfloat16, torch.int8, torch.bool])
    if isinstance(codec, OptionalField):
        return st.none() | codec_values(codec.inner, depth)
    if isinstance(codec, TupleField):
        return st.lists(codec_values(codec.inner, depth), max_size=3).map(tuple)
    if isinstance(codec, RefField):
        return st.one_of(*(records(c, depth + 1) for c in sorted(codec.classes, key=str)))
    if isinstance(codec, AnyField):
        assert codec.classes is not None
        options = [
            _PRIMS[c] if c in _PRIMS else records(c, depth + 1)
            for c in sorted(codec.classes, key=str)
            if c is not bool
        ]
        return st.one_of(*options)
    raise AssertionError(f"no strategy for {codec!r}")


def records(cls: type, depth: int = 0) -> st.SearchStrategy[Any]:
    """Instances of a registered record class (nested records up to a small depth)."""
    if cls in _SPECIAL:
        return _SPECIAL[cls]
    node_type = DEFAULT_REGISTRY.by_type[cls]
    too_deep = depth > 3 and node_type.child_fields
    if too_deep or (cls is SubGraphParam and depth > 1) or (cls is Operator and depth > 2):
        return st.nothing()
    fields = {f.name: codec_values(f.codec, depth) for f in node_type.fields}
    return st.builds(cls, **fields)


def params(depth: int = 0) -> st.SearchStrategy[Any]:
    return st.one_of(*(records(cls, depth) for cls in PARAM_TYPES.values()))


def roundtrip(value: Any) -> Any:
    """Serialize and deserialize ``value``; check the result is structurally the same."""
    restored = deserialize(serialize(value))
    assert_structural_equal(value, restored)
    return restored

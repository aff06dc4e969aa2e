"""Rules of the elementwise kinds: shapes and dtypes against torch, placements, messages."""

from __future__ import annotations

import pytest
import torch
from helpers_rules import MESH2, MESH22, op
from hypothesis import given, settings
from hypothesis import strategies as st

from dtorch.errors import MeshError, PlacementError, ShapeError
from dtorch.ir.mesh import DeviceMesh, init_device_mesh
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import ActivationKind, BinaryKind, CreateKind, MathKind
from dtorch.ir.params import (
    ActivationParam,
    BaseMathParam,
    BroadcastBinaryParam,
    CreateParam,
    MatmulParam,
)
from dtorch.ir.placement import Partial, Replicate, Shard
from dtorch.ir.rules import DtypeError, Inference, NoRuleError, ParamError, infer
from dtorch.ir.rules.torch_ops import BINARY, MATH
from dtorch.ir.scalar import Scalar
from tests.python_ops import PYTHON_OPS

pytestmark = pytest.mark.timeout(60)

R, P = Replicate(), Partial()
DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64]  # fmt: skip


def add(a: Operand, b: Operand, kind: BinaryKind = BinaryKind.ADD) -> Inference:
    return infer(kind.name.lower(), BroadcastBinaryParam(kind), (a, b))


shapes = st.lists(st.integers(0, 3), min_size=0, max_size=3).map(tuple)


@settings(max_examples=150, deadline=None)
@given(
    a=shapes, b=shapes, da=st.sampled_from(DTYPES), db=st.sampled_from(DTYPES),
    kind=st.sampled_from(list(BinaryKind)),
)  # fmt: skip
def test_binary_shape_and_dtype_match_torch(a, b, da, db, kind) -> None:
    ta, tb = torch.ones(a, dtype=da), torch.ones(b, dtype=db)
    try:
        want = BINARY[kind](ta, tb)
    except RuntimeError:
        with pytest.raises((ShapeError, DtypeError)):
            add(op(a, dtype=da), op(b, dtype=db, i=2), kind)
        return
    out = add(op(a, dtype=da), op(b, dtype=db, i=2), kind).outputs[0]
    assert (out.shape, out.dtype) == (tuple(want.shape), want.dtype)


@settings(max_examples=250, deadline=None)
@given(
    dtype=st.sampled_from(DTYPES), kind=st.sampled_from(list(BinaryKind)),
    value=st.sampled_from([3, -2, 0.5, True, False]), first=st.booleans(),
)  # fmt: skip
def test_binary_scalar_dtype_matches_python_number(dtype, kind, value, first) -> None:
    """torch's own Python-number promotion is the oracle (``t + 2.5``, ``2 - t``, ...)."""
    t = torch.ones(2, dtype=dtype)
    fn = PYTHON_OPS.get(kind)
    by_zero = value is False and kind in (BinaryKind.FLOOR_DIV, BinaryKind.REMAINDER)
    if fn is None or by_zero or (kind is BinaryKind.POW and value == -2):
        return  # int // 0 and int ** -2 fail on the values (in the kernel), not the dtypes
    param = BroadcastBinaryParam(kind, Scalar.of(value), first)
    try:
        want = fn(value, t) if first else fn(t, value)
    except (RuntimeError, ZeroDivisionError):
        with pytest.raises(DtypeError):
            infer("op", param, (op((2,), dtype=dtype),))
        return
    assert infer("op", param, (op((2,), dtype=dtype),)).outputs[0].dtype == want.dtype


@pytest.mark.parametrize("kind", list(MathKind))
@pytest.mark.parametrize("dtype", DTYPES)
def test_math_dtype_matches_torch(kind: MathKind, dtype: torch.dtype) -> None:
    try:
        want = MATH[kind](torch.ones(3, dtype=dtype)).dtype
    except RuntimeError as error:
        with pytest.raises(DtypeError, match="torch rejects"):
            infer("m", BaseMathParam(kind), (op((3,), dtype=dtype),))
        assert str(error)
        return
    assert infer("m", BaseMathParam(kind), (op((3,), dtype=dtype),)).outputs[0].dtype == want


def test_default_dtype_is_followed() -> None:
    """int / int and exp(int) follow torch's default dtype, also after it changes."""
    a, b = op((2,), dtype=torch.int64), op((2,), dtype=torch.int64, i=2)
    old = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float64)
        assert add(a, b, BinaryKind.DIV).outputs[0].dtype == torch.float64
        assert infer("exp", BaseMathParam(MathKind.EXP), (a,)).outputs[0].dtype == torch.float64
    finally:
        torch.set_default_dtype(old)
    assert add(a, b, BinaryKind.DIV).outputs[0].dtype == torch.float32


def test_int_activation_follows_the_default_dtype() -> None:
    """sigmoid(int) is a float of torch's default dtype, also after the default changes."""
    x, sigmoid = op((2,), dtype=torch.int64), ActivationParam(ActivationKind.SIGMOID)
    assert infer("sigmoid", sigmoid, (x,)).outputs[0].dtype == torch.float32
    old = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float64)
        want = torch.sigmoid(torch.ones(2, dtype=torch.int64)).dtype
        assert infer("sigmoid", sigmoid, (x,)).outputs[0].dtype == want == torch.float64
    finally:
        torch.set_default_dtype(old)


def test_broadcast_error_names_operator_and_dims() -> None:
    with pytest.raises(ShapeError, match=r"add: shapes \[2, 3\] x \[4\] do not broadcast"):
        add(op((2, 3)), op((4,), i=2))


def test_placements_of_broadcast_operands() -> None:
    # the smaller operand lacks the sharded dim: it stays Replicate, no redistribution
    inf = add(op((4, 3), Shard(0)), op((3,), i=2))
    assert inf.outputs[0].placements == (Shard(0),) and inf.input_placements in ((), (None, None))
    # the other operand has the dim at full size: implicit R -> S of ITS dim
    inf = add(op((3,), i=1), op((5, 3), Shard(1), i=2))
    assert inf.outputs[0].placements == (Shard(1),)
    assert inf.input_placements == ((Shard(0),), None)
    # a size-1 (broadcast) dim cannot be sharded
    with pytest.raises(PlacementError, match="add: got"):
        add(op((1, 3), Shard(0)), op((4, 3), Shard(0), i=2))


def test_rejection_message_names_got_and_accepted() -> None:
    with pytest.raises(PlacementError) as info:
        add(op((4,), Shard(0)), op((4,), P, i=2))
    text = str(info.value)
    assert text.startswith("add: got (S(0),) x (P,) on mesh (2,); accepted per mesh dimension:")
    assert "P x P -> P" in text and "mesh dim 0" in text
    with pytest.raises(PlacementError, match=r"add: got \(P,\) x \(R,\)"):
        add(op((4,), P), op((4,), i=2))
    with pytest.raises(PlacementError, match=r"exp: got \(P,\).*S\(i\) -> S\(i\)"):
        infer("exp", BaseMathParam(MathKind.EXP), (op((4,), P),))
    with pytest.raises(PlacementError, match="relu: got"):
        infer("relu", ActivationParam(ActivationKind.RELU), (op((4,), P),))


def test_partial_rows_per_mesh_dim_combine() -> None:
    a = op((4, 4), P, R, mesh=MESH22)
    b = op((4, 4), R, P, mesh=MESH22, i=2)
    assert add(a, b, BinaryKind.MUL).outputs[0].placements == (P, P)
    with pytest.raises(PlacementError):
        add(a, b)
    c = op((4, 4), Shard(0), P, mesh=MESH22, i=2)
    assert add(op((4, 4), Shard(0), P, mesh=MESH22), c).outputs[0].placements == (Shard(0), P)


def test_two_mesh_dims_on_one_tensor_dim_must_nest_alike() -> None:
    a = op((8, 2), Shard(0), Shard(0), mesh=MESH22)
    assert add(a, op((8, 2), Shard(0), Shard(0), mesh=MESH22, i=2)).outputs[0].placements == (
        Shard(0), Shard(0),
    )  # fmt: skip
    swapped = op((8, 2), Shard(0, 1), Shard(0, 0), mesh=MESH22, i=2)
    with pytest.raises(PlacementError, match="nest"):
        add(a, swapped)
    both = add(op((8, 2), Shard(0, 1), Shard(0, 0), mesh=MESH22), swapped)
    assert both.outputs[0].placements == (Shard(0, 1), Shard(0, 0))
    # the Replicate operand is asked for the same nesting as the sharded one
    inf = add(op((8, 2), R, R, mesh=MESH22), swapped)
    assert inf.input_placements[0] == (Shard(0, 1), Shard(0, 0))


def test_different_meshes_raise_mesh_error() -> None:
    other = init_device_mesh("cpu", 3)
    with pytest.raises(MeshError, match=r"add: inputs lie on different meshes"):
        add(op((2,)), op((2,), mesh=other, i=2))


def test_single_device_mesh() -> None:
    single = DeviceMesh("cpu")
    out = add(op((2, 3), mesh=single), op((3,), mesh=single, i=2)).outputs[0]
    assert out.placements == (R,) and out.shape == (2, 3)


def test_invalid_scalar_and_param() -> None:
    with pytest.raises(DtypeError, match="None"):
        infer("add", BroadcastBinaryParam(BinaryKind.ADD, Scalar.of(None)), (op((2,)),))
    with pytest.raises(ParamError, match="approximate='exact'"):
        infer("gelu", ActivationParam(ActivationKind.GELU, "exact"), (op((2,)),))


def test_kind_without_rule() -> None:
    from dtorch.ir.params import NonzeroParam

    with pytest.raises(NoRuleError, match="nonzero: operator kind Nonzero has no shape rule"):
        infer("nonzero", NonzeroParam(), (op((2,)),))
    assert MatmulParam  # imported for the later stages' rules


def test_create_rule() -> None:
    param = CreateParam(CreateKind.ZEROS, (5, 3), torch.int32, MESH22, (Shard(-1), P))
    out = infer("zeros", param, ()).outputs[0]
    assert (out.shape, out.dtype, out.placements) == ((5, 3), torch.int32, (Shard(1), P))
    empty = CreateParam(CreateKind.EMPTY, (5,), torch.float32, MESH2, (P,))
    assert infer("empty", empty, ()).outputs[0].placements == (R,)
    with pytest.raises(ShapeError, match="non-negative"):
        infer("zeros", CreateParam(CreateKind.ZEROS, (-1,), torch.float32, MESH2, (R,)), ())
    with pytest.raises(PlacementError, match="out of range"):
        infer("zeros", CreateParam(CreateKind.ZEROS, (2,), torch.float32, MESH2, (Shard(1),)), ())

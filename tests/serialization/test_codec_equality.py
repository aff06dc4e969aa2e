"""assert_structural_equal: exact types, NaN-aware values, paths, and id auto-mapping."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from dtorch.ir.mesh import init_device_mesh
from dtorch.ir.operator import ExecuteBatch, Operand, Operator
from dtorch.ir.opkind import BinaryKind
from dtorch.ir.params import BroadcastBinaryParam, MatmulParam, SubGraphParam
from dtorch.ir.placement import Replicate, Shard
from dtorch.ir.scalar import Scalar
from dtorch.ir.span import Span
from dtorch.serialization import assert_structural_equal

MESH = init_device_mesh("cpu", 2)
SPAN = Span("m.py", 4, 2)


def _batch(offset: int, name: str = "mm") -> ExecuteBatch:
    """a @ b -> c, then c + 1 -> d, with every id shifted by ``offset``."""
    a, b, c, d = (offset + i for i in range(4))
    operands = tuple(Operand(i, (2, 2), torch.float32, MESH, (Shard(0),)) for i in (c, d))
    add = BroadcastBinaryParam(BinaryKind.ADD, Scalar.of(1.0))
    operators = (
        Operator(offset + 10, f"{name}_{offset}", MatmulParam(), (a, b), (c,), SPAN),
        Operator(offset + 11, f"add_{offset}", add, (c,), (d,), SPAN),
    )
    return ExecuteBatch(operators, operands, (c,))


def test_equal_structures_pass() -> None:
    assert_structural_equal(_batch(0), _batch(0))
    value = {"x": [1, 2.5, float("nan"), None, b"b"], "t": torch.tensor([float("nan"), -0.0])}
    assert_structural_equal(
        value, {"x": [1, 2.5, float("nan"), None, b"b"], "t": value["t"].clone()}
    )


@pytest.mark.parametrize(
    ("a", "b", "path"),
    [
        ([1, 2], [1, 3], r"root\[1\]: 2 != 3"),
        ([1], [1.0], r"root\[0\]: int != float"),
        ((1,), [1], "root: tuple != list"),
        ({"k": 1}, {"j": 1}, "key 'k' is on one side only"),
        ([1, 2], [1], "length 2 != 1"),
        (Span("a.py", 1), Span("a.py", 2), r"root\.line: 1 != 2"),
        (Shard(0), Replicate(), "Shard != Replicate"),
        (torch.zeros(2), torch.zeros(3), r"tensor torch.float32\[2\] != torch.float32\[3\]"),
        (torch.zeros(2), torch.tensor([0.0, -0.0]), "tensor values differ"),
        (torch.zeros(2), torch.zeros(2, dtype=torch.float64), "tensor"),
        (torch.float32, torch.float16, "float32 != torch.float16"),
        (BinaryKind.ADD, BinaryKind.SUB, "ADD"),
        (Scalar.of(1), Scalar.of(True), r"root\.kind"),
    ],
)
def test_differences_name_the_path(a: Any, b: Any, path: str) -> None:
    with pytest.raises(AssertionError, match=path):
        assert_structural_equal(a, b)


def test_deep_difference_path() -> None:
    a, b = _batch(0), _batch(0)
    changed = ExecuteBatch(
        (b.operators[0], Operator(11, "add_0", MatmulParam(), (2,), (3,), SPAN)), b.operands, (2,)
    )
    with pytest.raises(AssertionError, match=r"root\.operators\[1\]\.param: BroadcastBinaryParam"):
        assert_structural_equal(a, changed)


def test_generators_compare_by_state() -> None:
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    assert_structural_equal(g1, g2)
    torch.rand(1, generator=g2)
    with pytest.raises(AssertionError, match="generator state"):
        assert_structural_equal(g1, g2)


def test_ids_must_match_without_auto_mapping() -> None:
    with pytest.raises(AssertionError, match=r"root\.operators\[0\]\.id: 10 != 110"):
        assert_structural_equal(_batch(0), _batch(100))


def test_auto_mapping_accepts_consistent_renumbering() -> None:
    assert_structural_equal(_batch(0), _batch(100), enable_auto_mapping=True)
    assert_structural_equal(_batch(0), _batch(100, name="other"), enable_auto_mapping=True)


def test_auto_mapping_refuses_inconsistent_ids() -> None:
    a = _batch(0)
    b = _batch(100)
    # The second operator now reads operand 103 where the first side reads 2 (mapped to 102).
    bad_op = Operator(111, "add_100", b.operators[1].param, (103,), (103,), SPAN)
    broken = ExecuteBatch((b.operators[0], bad_op), b.operands, b.no_hold)
    with pytest.raises(AssertionError, match=r"operators\[1\]\.inputs: operand id 2 was mapped"):
        assert_structural_equal(a, broken, enable_auto_mapping=True)
    two_to_one = ExecuteBatch(b.operators, b.operands, (103,))
    with pytest.raises(AssertionError, match="no_hold: operand id"):
        assert_structural_equal(a, two_to_one, enable_auto_mapping=True)


def test_auto_mapping_reaches_into_subgraphs() -> None:
    def sub(offset: int) -> Operator:
        inner = _batch(offset)
        param = SubGraphParam(inner.operators, inner.operands, (offset, offset + 1), (offset + 3,))
        return Operator(offset + 50, "sub", param, (offset, offset + 1), (offset + 3,), SPAN)

    assert_structural_equal(sub(0), sub(7), enable_auto_mapping=True)
    with pytest.raises(AssertionError, match=r"root\.id: 50 != 57"):
        assert_structural_equal(sub(0), sub(7))
    shifted = sub(7)
    param = shifted.param
    assert isinstance(param, SubGraphParam)
    bad = SubGraphParam(param.operators, param.operands, (7, 7), param.outputs)
    with pytest.raises(AssertionError, match=r"root\.param\.inputs: operand id 1 was mapped"):
        assert_structural_equal(
            sub(0), Operator(57, "sub", bad, shifted.inputs, shifted.outputs, SPAN), True
        )


def test_self_containing_structures_terminate() -> None:
    a: list[Any] = [1]
    a.append(a)
    b: list[Any] = [1]
    b.append(b)
    assert_structural_equal(a, b)

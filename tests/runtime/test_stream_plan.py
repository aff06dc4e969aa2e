"""StreamPlan units: what a call does when a group step goes wrong outside its kernel (the
program-level behaviour is in tests/program/test_plan.py)."""

from __future__ import annotations

import pytest
import torch

from dtorch.ir.mesh import init_device_mesh
from dtorch.ir.operator import Operand, Operator
from dtorch.ir.opkind import MathKind
from dtorch.ir.params import BaseMathParam, ConvertParam, SubGraphParam
from dtorch.ir.placement import Replicate, Shard
from dtorch.ir.span import Span
from dtorch.kernels.base import KernelContext
from dtorch.runtime.plan import D1, GROUP, StreamPlan
from dtorch.runtime.shards import KernelFailure, ShardTable


def _plan() -> StreamPlan:
    mesh = init_device_mesh("cpu", 1)
    source = Operand(10, (2,), torch.float32, mesh, (Shard(0),))
    made = Operand(11, (2,), torch.float32, mesh, (Replicate(),))
    convert = Operator(5, "redistribute_5", ConvertParam(mesh, (Replicate(),)), (10,), (11,),
                       Span.unknown())  # fmt: skip
    ctx = KernelContext(convert, (source,), (made,), (0,))
    step = (GROUP, ctx, 0, ((10, 0, 0),), ((11, 0, 1),), ())
    return StreamPlan(2, ((0, 0, 0),), (), (step,), ((0, 0, 1),), (), (), (), ())


def _raise(ctx: KernelContext) -> None:
    raise RuntimeError("the exchange broke")


def _make_nothing(ctx: KernelContext) -> None:
    return None  # the kernel "ran" but left no output shard: reading it back fails


@pytest.mark.parametrize("group", [_raise, _make_nothing])
def test_a_group_step_failing_outside_its_kernel_fails_the_results(group: object) -> None:
    shards = ShardTable()
    shards.put(100, 0, torch.ones(2))
    noted: list[KernelFailure] = []
    call = Operator(7, "call_7", SubGraphParam((), program=3), (100,), (200,), Span.unknown())
    assert _plan().run(shards, call, group, noted.append)  # type: ignore[arg-type]
    result = shards.get(200, 0)
    assert isinstance(result, KernelFailure) and noted == [result]
    assert "redistribute_5" in result.failure.operator
    assert shards.get(100, 0).tolist() == [1.0, 1.0]  # the input is untouched
    assert 10 not in shards.values and 11 not in shards.values  # nothing lent is left behind


def _broken(x: torch.Tensor) -> torch.Tensor:
    raise RuntimeError("the local step broke")


def test_a_group_step_failing_after_an_earlier_failure_still_fails_the_results() -> None:
    """The second failure comes in ``careful`` mode (after the first step raised): it must be
    stored as well, not escape the call and leave the results unset."""
    mesh = init_device_mesh("cpu", 1)
    a = Operand(9, (2,), torch.float32, mesh, (Shard(0),))
    source = Operand(10, (2,), torch.float32, mesh, (Shard(0),))
    made = Operand(11, (2,), torch.float32, mesh, (Replicate(),))
    neg = Operator(4, "neg_4", BaseMathParam(MathKind.NEG), (9,), (10,), Span.unknown())
    first = (D1, _broken, 0, 1, KernelContext(neg, (a,), (source,), (0,)), 0)
    convert = Operator(5, "redistribute_5", ConvertParam(mesh, (Replicate(),)), (10,), (11,),
                       Span.unknown())  # fmt: skip
    second = (GROUP, KernelContext(convert, (source,), (made,), (0,)), 1, ((10, 0, 1),),
              ((11, 0, 2),), ())  # fmt: skip
    plan = StreamPlan(3, ((0, 0, 0),), (), (first, second), ((0, 0, 2),), (), (), (), ())
    shards = ShardTable()
    shards.put(100, 0, torch.ones(2))
    noted: list[KernelFailure] = []
    call = Operator(7, "call_7", SubGraphParam((), program=3), (100,), (200,), Span.unknown())
    assert plan.run(shards, call, _make_nothing, noted.append)
    result = shards.get(200, 0)
    assert isinstance(result, KernelFailure)
    assert [f.failure.operator.split()[0] for f in noted] == ["neg_4", "redistribute_5"]

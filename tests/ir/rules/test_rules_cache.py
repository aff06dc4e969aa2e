"""InferenceCache gives exactly ``infer``'s answers, and reuses them only when it may."""

from __future__ import annotations

import pytest
import torch

from dtorch.errors import ShapeError
from dtorch.ir.mesh import init_device_mesh
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import BinaryKind, MathKind, ReduceKind
from dtorch.ir.params import (
    BaseMathParam,
    BroadcastBinaryParam,
    OpParam,
    ReduceParam,
    SoftmaxParam,
)
from dtorch.ir.placement import Partial, Replicate, Shard
from dtorch.ir.rules import infer
from dtorch.ir.rules.cache import InferenceCache
from dtorch.ir.scalar import Scalar
from tests.ir.rules.helpers_rules import MESH2, MESH22, op

ADD = BroadcastBinaryParam(BinaryKind.ADD)

CASES = [
    ("add", ADD, (op((4, 2), Shard(0)), op((4, 2), Shard(0)))),
    ("add", ADD, (op((4, 2), Shard(0)), op((2,)))),  # asks for an implicit R -> S
    ("mul", BroadcastBinaryParam(BinaryKind.MUL), (op((3,), Partial()), op((3,)))),
    ("neg", BaseMathParam(MathKind.NEG), (op((5,), Partial()),)),
    ("sum", ReduceParam(ReduceKind.SUM, (1,)), (op((2, 6), Shard(1), mesh=MESH2),)),
    ("softmax", SoftmaxParam(0), (op((4, 4), Shard(1), Replicate(), mesh=MESH22),)),
]


@pytest.mark.parametrize(("name", "param", "inputs"), CASES)
def test_the_answer_is_infers_and_a_repeat_reuses_it(
    name: str, param: OpParam, inputs: tuple[Operand, ...]
) -> None:
    cache = InferenceCache()
    first = cache.infer(name, param, inputs)
    assert first == infer(name, param, inputs)
    assert cache.infer(name, param, inputs) is first
    assert len(cache) == 1


def test_equal_but_distinct_objects_miss_and_get_the_same_answer() -> None:
    cache = InferenceCache()
    a = op((4,), Shard(0))
    again = op((4,), Shard(0), mesh=init_device_mesh("cpu", 2))  # a new mesh and tuple
    first = cache.infer("neg", BaseMathParam(MathKind.NEG), (a,))
    second = cache.infer("neg", BaseMathParam(MathKind.NEG), (again,))
    assert first == second and len(cache) == 2


def test_a_new_but_equal_param_reuses_the_answer() -> None:
    # a model's forward makes a new param per call: the value key finds the first answer
    cache = InferenceCache()
    x = op((2, 6), Shard(1))
    first = cache.infer("sum", ReduceParam(ReduceKind.SUM, (0,)), (x,))
    assert cache.infer("sum", ReduceParam(ReduceKind.SUM, (0,)), (x,)) is first
    nan = BroadcastBinaryParam(BinaryKind.MUL, Scalar.of(float("nan")))
    answer = cache.infer("mul", nan, (x,))
    again = BroadcastBinaryParam(BinaryKind.MUL, Scalar.of(float("nan")))
    assert cache.infer("mul", again, (x,)) is answer


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (ReduceParam(ReduceKind.SUM, (1,)), ReduceParam(ReduceKind.SUM, (True,))),
        (ReduceParam(ReduceKind.SUM, (1,), keepdim=True), ReduceParam(ReduceKind.SUM, (1,), 1)),
        (
            BroadcastBinaryParam(BinaryKind.MUL, Scalar.of(0.0)),
            BroadcastBinaryParam(BinaryKind.MUL, Scalar.of(-0.0)),
        ),
    ],
)
def test_params_equal_only_across_types_or_zero_signs_do_not_share(
    one: OpParam, other: OpParam
) -> None:
    # Python's equality would share the first two: the cache's key does not. Scalars of
    # either zero are unequal (x / -0.0 is -inf; a param cached by value served both)
    assert (one == other) is not isinstance(one, BroadcastBinaryParam)
    cache = InferenceCache()
    x = op((2, 6), Shard(1))
    name = "sum" if isinstance(one, ReduceParam) else "mul"
    first = cache.infer(name, one, (x,))
    assert cache.infer(name, other, (x,)) is not first
    assert cache.infer(name, other, (x,)) == infer(name, other, (x,))


def test_a_different_operand_never_gets_anothers_answer() -> None:
    cache = InferenceCache()
    x = op((4, 2), Shard(0))
    for shape, dtype in [((4, 2), torch.float32), ((4, 3), torch.float32), ((4, 2), torch.int64)]:
        y = op(shape, Shard(0), dtype=dtype, mesh=x.mesh)
        assert cache.infer("neg", BaseMathParam(MathKind.NEG), (y,)).outputs[0].shape == shape
        assert cache.infer("neg", BaseMathParam(MathKind.NEG), (y,)).outputs[0].dtype == dtype


def test_fresh_params_whose_ids_python_reuses_get_their_own_answers() -> None:
    # Each param dies after its call: without the entry holding it, CPython hands its id to
    # the next param of the same size, and a stale answer would come back.
    cache = InferenceCache()
    x = op((2, 6), Shard(1))
    for step in range(200):
        param = ReduceParam(ReduceKind.SUM, (step % 2,))
        assert cache.infer("sum", param, (x,)) == infer("sum", param, (x,))
        del param  # freed before the next one is built: its memory (and id) is free to reuse


def test_the_default_dtype_is_part_of_the_key() -> None:
    cache = InferenceCache()
    x = op((3,), dtype=torch.int64)
    times = BroadcastBinaryParam(BinaryKind.MUL, Scalar.of(2.5), False)
    assert cache.infer("mul", times, (x,)).outputs[0].dtype == torch.float32
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert cache.infer("mul", times, (x,)).outputs[0].dtype == torch.float64
    finally:
        torch.set_default_dtype(previous)


def test_errors_are_not_cached() -> None:
    cache = InferenceCache()
    bad = (op((4, 2)), op((3,)))
    for _ in range(2):
        with pytest.raises(ShapeError, match="add"):
            cache.infer("add", ADD, bad)
    assert len(cache) == 0


def test_the_table_is_cleared_at_its_limit() -> None:
    cache = InferenceCache(limit=3)
    for n in range(1, 5):
        cache.infer("neg", BaseMathParam(MathKind.NEG), (op((n,)),))
    assert len(cache) == 1  # cleared when full, then the fourth answer added
    with pytest.raises(ValueError, match="at least 1"):
        InferenceCache(limit=0)

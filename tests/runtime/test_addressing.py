"""BatchAddresser: which workers must decode a batch, and what it carries for them."""

from __future__ import annotations

import torch

from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.operator import ExecuteBatch, Operand, Operator
from dtorch.ir.opkind import PromiseKind
from dtorch.ir.params import ContiguousParam, PromiseHandle, SyncParam
from dtorch.ir.span import Span
from dtorch.runtime.process.addressing import BatchAddresser, concerns, pack_ids, unpack_ids
from dtorch.transport.wire import EVERYONE


def _operand(operand_id: int, devices: list[int]) -> Operand:
    return Operand(operand_id, (4,), torch.float32, DeviceMesh("cpu", devices), ())


def _copy(op_id: int, source: int, out: int) -> Operator:
    return Operator(op_id, f"contiguous_{op_id}", ContiguousParam(), (source,), (out,),
                    Span.unknown())  # fmt: skip


def _parties(bitmap: bytes, workers: int) -> list[int]:
    return [p for p in range(workers) if concerns(bitmap, p)]


def test_a_batch_concerns_the_workers_of_its_operands_and_carries_external_inputs() -> None:
    addresser = BatchAddresser(workers=4)
    a, b = _operand(1, [1, 5]), _operand(2, [1, 5])
    first, parties, to = addresser.address(ExecuteBatch((_copy(10, 1, 2),), (a, b)))
    assert _parties(parties, 4) == [1] and [o.id for o in first.operands] == [1, 2]
    assert to == 1  # worker 1 alone runs it: the others are not sent it
    c = _operand(3, [1, 5])
    second, parties, to = addresser.address(ExecuteBatch((_copy(11, 2, 3),), (c,), (1,)))
    assert _parties(parties, 4) == [1] and to == 1
    assert [o.id for o in second.operands] == [3, 2]  # its own output, then the input it reads
    assert second.no_hold == ()  # frees travel apart, for every worker


def test_sync_concerns_every_worker_and_frees_alone_concern_none() -> None:
    addresser = BatchAddresser(workers=3)
    sync = Operator(1, "sync_1", SyncParam(PromiseHandle(PromiseKind.MEMORY, "s")), (), (),
                    Span.unknown())  # fmt: skip
    _, parties, to = addresser.address(ExecuteBatch((sync,)))
    assert _parties(parties, 3) == [0, 1, 2] and to == EVERYONE
    _, parties, to = addresser.address(ExecuteBatch((), (), (7, 8)))
    assert _parties(parties, 3) == [] and to == EVERYONE  # ids it never saw: anyone may hold them


def test_a_batch_goes_to_one_worker_only_if_it_alone_runs_it_and_holds_its_frees() -> None:
    addresser = BatchAddresser(workers=3)
    wide, narrow = _operand(1, [0, 1, 2]), _operand(2, [2])
    assert addresser.address(ExecuteBatch((), (wide, narrow)))[2] == EVERYONE
    out = _operand(3, [2])
    _, parties, to = addresser.address(ExecuteBatch((_copy(4, 2, 3),), (out,)))
    assert _parties(parties, 3) == [2] and to == 2
    _, parties, to = addresser.address(ExecuteBatch((_copy(5, 2, 3),), (), (1,)))
    assert _parties(parties, 3) == [2] and to == EVERYONE  # every worker holds a shard of 1
    assert addresser.address(ExecuteBatch((), (), (2, 3)))[1:] == (b"\x00", 2)  # frees of 2's


def test_many_workers_and_one_worker() -> None:
    wide = BatchAddresser(workers=70)
    a, b = _operand(1, [0, 69]), _operand(2, [0, 69])
    _, parties, to = wide.address(ExecuteBatch((_copy(3, 1, 2),), (a, b)))
    assert len(parties) == 9 and _parties(parties, 70) == [0, 69] and to == EVERYONE
    single = BatchAddresser(workers=1)
    carried, parties, to = single.address(ExecuteBatch((_copy(3, 1, 2),), (a, b), (5,)))
    assert _parties(parties, 1) == [0] and carried.no_hold == () and to == EVERYONE


def test_ids_round_trip_as_raw_integers() -> None:
    ids = (0, 1, 2**40, 2**63 - 1)
    assert unpack_ids(pack_ids(ids)) == ids and unpack_ids(b"") == ()


def test_a_free_reaches_every_worker_that_decoded_the_operands_metadata() -> None:
    """Worker 1 decoded a copy from device 0's value (its metadata came as an external
    input): the value's free must reach worker 1 too, or its metadata stays there."""
    addresser = BatchAddresser(workers=2)
    a = _operand(1, [0])
    assert addresser.address(ExecuteBatch((_copy(9, 1, 1),), (a,)))[2] == 0
    _, parties, to = addresser.address(ExecuteBatch((_copy(10, 1, 2),), (_operand(2, [1]),)))
    assert _parties(parties, 2) == [0, 1] and to == EVERYONE
    assert addresser.address(ExecuteBatch((), (), (1,)))[2] == EVERYONE
    assert addresser.address(ExecuteBatch((_copy(11, 2, 2),), (), (2,)))[1:] == (b"\x02", EVERYONE)

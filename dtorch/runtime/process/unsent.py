"""Unsent: what the process runner sends in place of operators the codec cannot write.

A batch goes to the workers as one encoded message. An operator whose param or output
metadata the codec cannot write (an int beyond 64 bits that no record-time check caught, a
value of a type it does not know) would make the whole batch unsendable: the graph would
break for good, and the batch's other operators would be lost with it. Instead, when a batch
cannot be encoded (``encode_or_substitute``: the usual batch pays nothing more), its records
are encoded one at a time; each operator that cannot go, or whose outputs cannot, is replaced
by an ``Unsent`` operator with its id, name, span, inputs and outputs, whose param says why
(an operator without outputs, which has nothing to fail in its place, cannot be replaced);
an operand that cannot go travels with every size 0 (its values fail anyway). The rest of the
batch runs as it is. On the devices the Unsent kernel raises the reason: the outputs fail as
a failed kernel's do - dependents fail, a fetch raises KernelError naming the operator and the
reason, ``sync()`` raises it once - and the graph goes on. A batch that still cannot be
encoded raises the codec's error, as before (a runner failure that breaks the graph).

Only the runner makes Unsent operators: the rules refuse the kind (``dtorch.ir.rules.unsent``),
so the client cannot record one and a program file cannot hold one.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import ExecuteBatch, Operand, Operator
    >>> from dtorch.ir.params import RepeatParam
    >>> from dtorch.ir.placement import Replicate
    >>> from dtorch.ir.span import Span
    >>> from dtorch.serialization import decode_batch
    >>> out = Operand(2, (2**64,), torch.float32, init_device_mesh("cpu", 1), (Replicate(),))
    >>> op = Operator(7, "repeat_7", RepeatParam((2**64,)), (1,), (2,), Span("m.py", 3))
    >>> sent = decode_batch(encode_or_substitute(ExecuteBatch((op,), (out,))))
    >>> sent.operators[0].param.original, sent.operands[0].shape
    (<OpKind.Repeat: 30>, (0,))
"""

from __future__ import annotations

import dataclasses

from dtorch.errors import SerializationError
from dtorch.ir.operator import ExecuteBatch, Operand, Operator
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import UnsentParam
from dtorch.kernels.base import KernelContext, Shards
from dtorch.kernels.table import register_local_kernel
from dtorch.serialization import encode_batch, serialize


def encode_or_substitute(batch: ExecuteBatch) -> bytes:
    """``encode_batch(batch)``, with Unsent operators in place of those that cannot go."""
    try:
        return encode_batch(batch)
    except SerializationError:
        pass  # which records? (the rare path: one encoding each)
    return encode_batch(substitute(batch))


def substitute(batch: ExecuteBatch) -> ExecuteBatch:
    """``batch`` with each record the codec cannot write replaced (see the module doc)."""
    unsendable = {o.id: why for o in batch.operands if (why := _refusal(o)) is not None}
    operators = tuple(_sendable(op, unsendable) for op in batch.operators)
    operands = tuple(_emptied(o) if o.id in unsendable else o for o in batch.operands)
    return ExecuteBatch(operators, operands, batch.no_hold)


def _sendable(op: Operator, unsendable: dict[int, str]) -> Operator:
    why = _refusal(op)
    if why is None:
        bad = [o for o in op.outputs if o in unsendable]
        why = f"its output {bad[0]}: {unsendable[bad[0]]}" if bad else None
    if why is None:
        return op
    reason = f"{op.name} ({op.kind.name}) could not be sent to the worker processes: {why}"
    if not op.outputs:  # no value to fail in its place (a Sync, a Memory or a fetch's promise
        raise SerializationError(reason)  # would wait for ever): the batch cannot go
    return Operator(op.id, op.name, UnsentParam(op.kind, reason), op.inputs, op.outputs, op.span)


def _refusal(record: Operator | Operand) -> str | None:
    """Why the codec cannot write ``record`` alone (None: it can)."""
    try:
        serialize(record)
    except SerializationError as error:
        return str(error)
    return None


def _emptied(operand: Operand) -> Operand:
    # the metadata the workers keep for a value that fails anyway: every size 0, so it
    # encodes; same rank, so its placements still fit
    return dataclasses.replace(operand, shape=(0,) * len(operand.shape))


def unsent_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """Raises why the operator was not sent: its outputs fail on this device."""
    param = ctx.operator.param
    assert isinstance(param, UnsentParam)
    raise SerializationError(param.reason)


register_local_kernel(OpKind.Unsent, unsent_kernel)

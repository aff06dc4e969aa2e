"""StreamPlan: a program body compiled, for one stream, into flat steps over a list of slots.

Replaying a body operator by operator through the stream (``dtorch.runtime.subgraph``'s
contexts) costs about 2 µs per operator beyond the kernel: the item dispatch, the shard
table's dicts and byte accounting, the general kernel's param lookups. A plan pays them once
per call instead. At compile time every (operand, device) value of the body gets a slot in a
list, reused once the value is dead (so an intermediate is released at its last use, as
torch's own loop releases it); each (operator, device) becomes one step naming its input and
output slots, with the torch callable bound where ``dtorch.kernels.direct`` has one. A call
loads the inputs' and constants' shards from the table into slots, runs the steps, and puts
the results (and in-place changes of inputs) back into the table.

Failures behave as in the stream: a step that raises fails its outputs with a marker naming
the operator and the user's line (the first one is noted for the next Sync), and from then on
every step checks its inputs and passes a failure on instead of running. Group kernels
(redistributions) run through the stream's own path, their slots put into the table for the
kernel and taken back after. Memory reports: the table accounts the inputs, constants and
results; a call adds a compile-time bound of the intermediates' bytes to each device's peak
(every output that is not a view counts as fresh).

Example (a released slot is taken again first, so a chain of operators needs few slots):
    >>> pool = _SlotPool()
    >>> first, second = pool.take(), pool.take()
    >>> pool.give(first)
    >>> pool.take() == first, pool.size
    (True, 2)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from dtorch.ir.operator import Operand, Operator
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import SubGraphParam
from dtorch.kernels.base import KernelContext
from dtorch.kernels.direct import direct_form
from dtorch.kernels.table import LOCAL_KERNELS
from dtorch.runtime.shards import KernelFailure, ShardTable, failure_of, writes_first_input

#: The stream item of a program call: ``(PLAN, (plan or None, body, call, stream index))``.
PLAN = 7

#: Step tags: a direct unary or binary callable, a general local kernel, a group kernel.
D1, D2, LOCAL, GROUP = 0, 1, 2, 3

#: Kinds whose kernels always return a view of their input: no fresh bytes in the peak
#: bound. (View, Reshape, Flatten and the selections may copy, so they count: a bound.)
VIEW_KINDS = frozenset(
    {
        OpKind.ViewPlacements,
        OpKind.Squeeze,
        OpKind.Unsqueeze,
        OpKind.Transpose,
        OpKind.Permute,
        OpKind.Expand,
        OpKind.ViewDtype,
    }
)

Slots = tuple[tuple[int, int, int], ...]  # (operand id or call position, device, slot)
Step = tuple[Any, ...]
GroupRunner = Callable[[KernelContext], None]
Note = Callable[[KernelFailure], None]


class Unplannable(Exception):
    """The body holds something a plan does not run (the stream's contexts run it)."""


@dataclass(frozen=True, slots=True)
class StreamPlan:
    """One stream's body: slots to load, steps, slots to store; see the module docstring."""

    size: int
    inputs: Slots  # (call input position, device, slot)
    constants: Slots  # (operand id, device, slot)
    steps: tuple[Step, ...]
    results: Slots  # (call output position, device, slot)
    writes: Slots  # (call input position, device, slot): inputs changed in place
    written: Slots  # (operand id, device, slot): constants changed in place
    memos: tuple[KernelContext, ...]  # contexts with per-call scratch, cleared per call
    peaks: tuple[tuple[int, int], ...]  # (device, bytes of intermediates at most)

    def run(self, shards: ShardTable, call: Operator, group: GroupRunner, note: Note) -> bool:
        """Run the call ``call``; False (nothing run) if an input or constant is missing."""
        slots: list[Any] = [None] * self.size
        if not self._load(shards, call.inputs, slots):
            return False
        for ctx in self.memos:
            ctx.memo = None
        for device, extra in self.peaks:
            shards.note_peak(device, extra)
        running = _Call(slots, shards, call, group, note)
        steps = iter(self.steps)
        if shards.failed and any(s.__class__ is KernelFailure for s in slots):
            running.careful(steps)
        else:
            running.fast(steps)
        put, inputs, outputs = shards.put, call.inputs, call.outputs
        for position, device, slot in self.results:
            put(outputs[position], device, slots[slot])
        for position, device, slot in self.writes:
            if slots[slot].__class__ is KernelFailure:  # its views fail too
                shards.fail_write(inputs[position], device, slots[slot])
            else:
                put(inputs[position], device, slots[slot])
        for operand, device, slot in self.written:  # changed in their shards, unless failed
            if slots[slot].__class__ is KernelFailure:
                shards.fail_write(operand, device, slots[slot])
        return True

    def _load(self, shards: ShardTable, inputs: tuple[int, ...], slots: list[Any]) -> bool:
        values = shards.values
        try:
            for position, device, slot in self.inputs:
                slots[slot] = values[inputs[position]][device]
            for operand, device, slot in self.constants:
                slots[slot] = values[operand][device]
        except KeyError:
            return False
        return True


class _Call:
    """One call's state while its steps run."""

    __slots__ = ("call", "group", "note", "shards", "slots")

    def __init__(
        self, slots: list[Any], shards: ShardTable, call: Operator, group: GroupRunner, note: Note
    ) -> None:
        self.slots, self.shards, self.call, self.group, self.note = slots, shards, call, group, note

    def fast(self, steps: Iterator[Step]) -> None:
        """The steps while nothing has failed: no checks (a try costs nothing until it
        raises); after a failure, the rest run ``careful``."""
        slots = self.slots
        for step in steps:
            tag = step[0]
            try:
                if tag == D2:
                    slots[step[4]] = step[1](slots[step[2]], slots[step[3]])
                    continue
                if tag == D1:
                    slots[step[3]] = step[1](slots[step[2]])
                    continue
                if tag == LOCAL:
                    _local(step, slots)
                    continue
                if not self.run_group(step):
                    continue  # else a failure came back
            except Exception as error:
                _store(step, slots, _note_failure(step, error, self.note))
            self.careful(steps)
            return

    def careful(self, steps: Iterator[Step]) -> None:
        """The steps after a failure: each passes a failed input on instead of running."""
        slots = self.slots
        for step in steps:
            if step[0] == GROUP:
                try:
                    self.run_group(step)
                except Exception as error:  # outside its kernel (which catches its own)
                    _store(step, slots, _note_failure(step, error, self.note))
                continue
            failure = _failed_input(step, slots)
            if failure is not None:
                _store(step, slots, failure)
                continue
            try:
                if step[0] == LOCAL:
                    _local(step, slots)
                else:
                    slots[_outputs(step)[0]] = step[1](*[slots[i] for i in _inputs(step)])
            except Exception as error:
                _store(step, slots, _note_failure(step, error, self.note))

    def run_group(self, step: Step) -> bool:
        """Run a group kernel through the stream (its slots lent to the table); True if an
        output came back failed."""
        _, ctx, index, lent, outs, in_place = step
        op, slots, shards = ctx.operator, self.slots, self.shards
        renewed = Operator(
            run_id(self.call.id, index), op.name, op.param, op.inputs, op.outputs, op.span
        )
        try:
            for operand, device, slot in lent:
                shards.put(operand, device, slots[slot])
            self.group(KernelContext(renewed, ctx.inputs, ctx.outputs, ctx.devices, ctx.groups))
            values = shards.values
            failed = False
            for operand, device, slot in outs + in_place:
                value = slots[slot] = values[operand][device]
                failed = failed or value.__class__ is KernelFailure
        finally:  # whatever happened, nothing lent stays in the table
            shards.free({operand for operand, _, _ in lent + outs})
        return failed


def _local(step: Step, slots: list[Any]) -> None:
    _, kernel, ctx, device, ins, outs = step
    results = kernel(ctx, device, [slots[i] for i in ins])
    for slot, value in zip(outs, results, strict=True):
        slots[slot] = value


def run_id(call_id: int, index: int) -> int:
    """The operator id of body operator ``index`` in the call ``call_id``: negative, so it
    never names an operator the client recorded (the failure board is keyed by it)."""
    return -((call_id << 24) | index) - 1


# --- what a step names ----------------------------------------------------------------------
def _context(step: Step) -> tuple[KernelContext, int]:
    """The step's context and the device a failure of it names."""
    tag = step[0]
    if tag == LOCAL:
        return step[2], step[3]
    if tag == GROUP:
        ctx = step[1]
        return ctx, ctx.devices[0] if ctx.devices else -1
    return step[-2], step[-1]


def _inputs(step: Step) -> tuple[Any, ...]:
    tag = step[0]
    if tag == GROUP:
        return step[3]
    return (step[2],) if tag == D1 else (step[2], step[3]) if tag == D2 else step[4]


def _outputs(step: Step) -> tuple[Any, ...]:
    tag = step[0]
    if tag == GROUP:
        return step[4]
    return (step[3],) if tag == D1 else (step[4],) if tag == D2 else step[5]


def _failed_input(step: Step, slots: list[Any]) -> KernelFailure | None:
    for slot in _inputs(step):
        if slots[slot].__class__ is KernelFailure:
            return slots[slot]
    return None


def _note_failure(step: Step, error: Exception, note: Note) -> KernelFailure:
    ctx, device = _context(step)
    failure = failure_of(ctx.operator, device, error)
    note(failure)
    return failure


def _exact(ctx: KernelContext) -> bool:
    """Whether a direct callable computes the recorded dtype: not where integer inputs make
    a float result, whose dtype is the recording process's default (the general kernel
    casts them first: ``kernels.local.elementwise.floated``)."""
    if not ctx.outputs or not ctx.outputs[0].dtype.is_floating_point:
        return True
    return all(operand.dtype.is_floating_point for operand in ctx.inputs)


def _store(step: Step, slots: list[Any], failure: KernelFailure) -> None:
    """``failure`` in the step's outputs (or its in-place target)."""
    if step[0] == GROUP:  # (operand, device, slot) of its outputs and in-place target
        for _, _, slot in step[4] + step[5]:
            slots[slot] = failure
        return
    for slot in _outputs(step):
        slots[slot] = failure
    ctx, _ = _context(step)
    if writes_first_input(ctx.operator):
        slots[_inputs(step)[0]] = failure


# --- compiling ------------------------------------------------------------------------------
class _SlotPool:
    """Slot numbers: a released one is taken again first."""

    def __init__(self) -> None:
        self.size = 0
        self._free: list[int] = []

    def take(self) -> int:
        if self._free:
            return self._free.pop()
        self.size += 1
        return self.size - 1

    def give(self, slot: int) -> None:
        self._free.append(slot)


Key = tuple[int, int]  # (operand id, device): one value of the body


class _Builder:
    """Steps over values (pass one: ``add``), then slots for the values (``build``)."""

    def __init__(self, param: SubGraphParam) -> None:
        self.param = param
        self.placeholders = {p: i for i, p in enumerate(param.inputs)}
        self.local = {o.id for o in param.operands}
        self.loads: dict[Key, None] = {}  # values read from the table at the call's start
        self.made: set[Key] = set()
        self.last: dict[Key, int] = {}  # the step that reads (or makes) the value last
        self.bytes: dict[Key, int] = {}  # fresh bytes of a made value
        self.raw: list[Step] = []  # steps naming values, not slots yet
        self.memos: list[KernelContext] = []
        self.written: dict[Key, None] = {}  # constants a local kernel changes in place

    def use(self, operand: int, device: int) -> Key:
        key = (operand, device)
        if key not in self.made and key not in self.loads:
            if operand in self.local and operand not in self.placeholders:
                raise Unplannable(f"operand {operand} is read on device {device} before it is made")
            self.loads[key] = None
        self.last[key] = len(self.raw)
        return key

    def hold(self, operand: int, devices: tuple[int, ...]) -> None:
        """Load ``operand`` on ``devices`` even if no step reads it (a result that is an
        input or a constant)."""
        for device in devices:
            self.use(operand, device)  # a result: kept to the end whatever its last use

    def make(self, operand: Operand, device: int, kind: OpKind) -> Key:
        key = (operand.id, device)
        if key in self.made or key in self.loads:
            raise Unplannable(f"operand {operand.id} is made twice on device {device}")
        self.made.add(key)
        self.last[key] = len(self.raw)
        if kind not in VIEW_KINDS:
            self.bytes[key] = math.prod(operand.local_shape(device)) * operand.dtype.itemsize
        return key

    def add(self, ctx: KernelContext, index: int | None) -> None:
        """The steps of one context (``index``: the body index of a group kernel's)."""
        if index is not None:
            self._add_group(ctx, index)
            return
        op = ctx.operator
        kind = op.param.kind
        kernel = LOCAL_KERNELS.get(kind)
        if kernel is None:
            raise Unplannable(f"{op.describe()} is neither a local nor a group kernel")
        direct = direct_form(op.param) if len(op.outputs) == 1 and _exact(ctx) else None
        if kind in MEMO_KINDS:  # a context of the plan's own, its scratch cleared per call
            ctx, direct = KernelContext(op, ctx.inputs, ctx.outputs, ctx.devices, ctx.groups), None
            self.memos.append(ctx)
        constant = writes_first_input(op) and op.inputs[0] not in self.local
        for device in ctx.devices:
            ins = tuple([self.use(i, device) for i in op.inputs])
            outs = tuple([self.make(o, device, kind) for o in ctx.outputs])
            if constant:  # a failure must reach the table, as in eager mode
                self.written[ins[0]] = None
            if direct is not None and len(ins) in (1, 2):
                self.raw.append((D1 + len(ins) - 1, direct, *ins, outs[0], ctx, device))
            else:
                self.raw.append((LOCAL, kernel, ctx, device, ins, outs))

    def _add_group(self, ctx: KernelContext, index: int) -> None:
        op = ctx.operator
        lent: dict[Key, None] = {}  # the body's values the kernel reads, lent to the table
        for operand in ctx.inputs:
            for device in ctx.devices:
                if device in operand.mesh and operand.id in self.local:
                    lent[self.use(operand.id, device)] = None
        outs = tuple(
            self.make(operand, device, op.param.kind)
            for device in ctx.devices
            for operand in ctx.outputs
            if device in operand.mesh
        )
        in_place: tuple[Key, ...] = ()
        if writes_first_input(op):
            in_place = tuple(key for key in lent if key[0] == op.inputs[0])
        self.raw.append((GROUP, ctx, index, tuple(lent), outs, in_place))

    def build(self) -> StreamPlan:
        """Slots for the values: a value's slot is taken again after its last use, except
        the results' and the written inputs' (stored at the end)."""
        param = self.param
        kept = {k for k in self.last if k[0] in param.outputs}
        kept |= {k for k in self.loads if self.placeholders.get(k[0], -1) in param.writes}
        kept |= self.written.keys()
        dying: dict[int, list[Key]] = {}
        for key, step in self.last.items():
            if key not in kept:
                dying.setdefault(step, []).append(key)
        slots = _Slots(self.bytes)
        for key in self.loads:
            slots.take(key)
        steps = tuple([slots.step(raw, dying.get(k, [])) for k, raw in enumerate(self.raw)])
        at = slots.slot
        held: dict[int, list[Key]] = {}  # operand id -> its values on this stream
        for key in self.last:
            held.setdefault(key[0], []).append(key)
        return StreamPlan(
            slots.pool.size,
            tuple((self.placeholders[o], d, at[o, d]) for o, d in self.loads if o in self.local),
            tuple((o, d, at[o, d]) for o, d in self.loads if o not in self.local),
            steps,
            _stored(param.outputs, held, at),
            _stored([param.inputs[p] for p in param.writes], held, at, param.writes),
            tuple((o, d, at[o, d]) for o, d in self.written),
            tuple(self.memos),
            tuple(slots.peak.items()),
        )


def _stored(
    ids: Sequence[int],
    held: dict[int, list[Key]],
    at: dict[Key, int],
    positions: Sequence[int] | None = None,
) -> Slots:
    """(position, device, slot) of each of ``ids``' values (positions: their indices)."""
    spots = range(len(ids)) if positions is None else positions
    return tuple(
        (p, d, at[o, d]) for p, i in zip(spots, ids, strict=True) for o, d in held.get(i, ())
    )


class _Slots:
    """Slot numbers of values, and the bytes the made values hold at most per device."""

    def __init__(self, fresh: dict[Key, int]) -> None:
        self.pool = _SlotPool()
        self.slot: dict[Key, int] = {}
        self.fresh = fresh
        self.live: dict[int, int] = {}
        self.peak: dict[int, int] = {}

    def take(self, key: Key) -> int:
        slot = self.slot[key] = self.pool.take()
        device, size = key[1], self.fresh.get(key, 0)
        live = self.live[device] = self.live.get(device, 0) + size
        self.peak[device] = max(self.peak.get(device, 0), live)
        return slot

    def give(self, key: Key) -> None:
        self.pool.give(self.slot[key])

    def step(self, raw: Step, dying: list[Key]) -> Step:
        """``raw`` naming slots; the dying inputs' slots may take its outputs (a local
        kernel reads every input before it writes; a group kernel's are lent, so not). The
        dying inputs' bytes count until the outputs exist: the kernel holds both."""
        tag = raw[0]
        made = set(_outputs(raw))
        if tag != GROUP:
            for key in dying:
                if key not in made:
                    self.give(key)
        for key in _outputs(raw):
            self.take(key)
        for key in dying:
            if tag == GROUP or key in made:
                self.give(key)
            self.live[key[1]] -= self.fresh.get(key, 0)
        return _slotted(raw, self.slot)


def _slotted(raw: Step, at: dict[Key, int]) -> Step:
    tag = raw[0]
    if tag == D2:
        return (D2, raw[1], at[raw[2]], at[raw[3]], at[raw[4]], raw[5], raw[6])
    if tag == D1:
        return (D1, raw[1], at[raw[2]], at[raw[3]], raw[4], raw[5])
    if tag == LOCAL:
        return (
            LOCAL,
            raw[1],
            raw[2],
            raw[3],
            tuple(at[k] for k in raw[4]),
            tuple(at[k] for k in raw[5]),
        )
    triples = [tuple((o, d, at[o, d]) for o, d in keys) for keys in raw[3:6]]
    return (GROUP, raw[1], raw[2], *triples)


def compile_plan(
    param: SubGraphParam,
    contexts: Sequence[KernelContext],
    groups: dict[int, int],
    unmade: dict[int, tuple[int, ...]],
) -> StreamPlan | None:
    """One stream's plan from its ``contexts`` (in body order; ``groups`` maps the position of
    each group kernel's context to its body index; ``unmade``: the body outputs no body
    operator makes - inputs, constants - with this stream's devices of each); None where the
    body holds something a plan does not run (the contexts run it then)."""
    builder = _Builder(param)
    try:
        for position, ctx in enumerate(contexts):
            builder.add(ctx, groups.get(position))
        for operand, devices in unmade.items():
            builder.hold(operand, devices)
        return builder.build()
    except Unplannable:
        return None


#: Local kernels that keep per-call scratch in ``ctx.memo`` (dtorch/kernels/create.py and
#: the dropout kernel in dtorch/kernels/local/embedding.py).
MEMO_KINDS = frozenset({OpKind.Create, OpKind.Dropout})

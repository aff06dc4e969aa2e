"""SubGraph bodies on a host: compiled once per stream, then replayed per call.

A SubGraph operator (a traced program's call, ``dtorch.program``) names a body; the first one
of a program on a graph carries it. The host compiles the body, and keeps it until the
program's name is released (the program went) or the graph's reset, in two forms per stream
(routed as ordinary operators are): a ``StreamPlan`` (``dtorch.runtime.plan``: flat steps
over slots, what a call normally runs, as one stream item) and a list of ``KernelContext``
items, which a stream runs instead while it profiles or validates kernel outputs, or where
the body holds something a plan does not run. Through the contexts a call costs the streams
three things: BIND (each input placeholder takes the shards of the call's input), the cached
contexts, and FINISH (each result takes the shards of its body operand, in-place writes go
back to the inputs, every local operand is freed). Contexts are read-only, so one list
serves every call; those that must differ per call are rebuilt for it: group kernels get an
operator id of their own (``run_id``: the failure board is keyed by it, so a failure of one
call never marks another), and kernels with per-call scratch (``memo``) a fresh context.

Example:
    >>> run_id(7, 3) < 0
    True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import dtorch.kernels.convert
import dtorch.kernels.create  # noqa: F401 - registers the Create kernel (runs_in_body)
from dtorch.errors import GraphError
from dtorch.ir.operator import Operand, Operator
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import SubGraphParam
from dtorch.kernels.base import KernelContext
from dtorch.kernels.table import GROUP_KERNELS, LOCAL_KERNELS
from dtorch.runtime.plan import MEMO_KINDS, PLAN, StreamPlan, compile_plan, run_id

#: Stream items: bind placeholders to inputs / finish a call (see the module docstring).
BIND, FINISH = 5, 6

#: Kinds a body may not hold: they settle promises, which a replay could not name anew.
REFUSED_KINDS = frozenset(
    {OpKind.GetTensor, OpKind.Sync, OpKind.Memory, OpKind.Profile, OpKind.SubGraph}
)

#: Body operators per call (an id of its own per group kernel must fit ``run_id``).
MAX_BODY = 1 << 24


def runs_in_body(kind: OpKind) -> bool:
    """Whether a body can run operators of ``kind``: those with a local or a group kernel.
    The others are the kinds a stream handles itself (REFUSED_KINDS) and those no kernel
    runs at all (Fuse, Nvtx, Nonzero: the client never records them).

    Example:
        >>> runs_in_body(OpKind.Convert), runs_in_body(OpKind.Nvtx), runs_in_body(OpKind.Sync)
        (True, False, False)
    """
    return kind in LOCAL_KERNELS or kind in GROUP_KERNELS


Router = Callable[
    [tuple[Operand, ...], tuple[Operand, ...]], tuple[tuple[int, tuple[int, ...]], ...]
]


@dataclass(frozen=True, slots=True)
class CompiledBody:
    """A body as stream items: per stream, its contexts and the positions rebuilt per call."""

    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    writes: tuple[int, ...]
    frees: tuple[int, ...]
    contexts: tuple[tuple[KernelContext, ...], ...]
    renew: tuple[tuple[tuple[int, int, bool], ...], ...]  # (position, body index, group)
    plans: tuple[StreamPlan | None, ...]  # per stream (``dtorch.runtime.plan``)


def compile_body(
    param: SubGraphParam,
    metas: dict[int, Operand],
    streams: int,
    route: Router,
    groups: object,
) -> CompiledBody:
    """``param``'s body for ``streams`` streams; ``metas`` holds the live operands (the
    constants), ``route`` says which devices of which stream an operator runs on."""
    if len(param.operators) > MAX_BODY:
        raise GraphError(f"a program of {len(param.operators)} operators (at most {MAX_BODY})")
    local = {o.id: o for o in param.operands}
    contexts: list[list[KernelContext]] = [[] for _ in range(streams)]
    renew: list[list[tuple[int, int, bool]]] = [[] for _ in range(streams)]
    for index, op in enumerate(param.operators):
        if op.kind in REFUSED_KINDS:
            raise GraphError(f"a program body may not hold {op.describe()}")
        ins = tuple([local.get(i) or metas[i] for i in op.inputs])
        outs = tuple([local[o] for o in op.outputs])
        group = op.kind not in LOCAL_KERNELS
        for stream, devices in route(ins, outs):
            if group or op.kind in MEMO_KINDS:
                renew[stream].append((len(contexts[stream]), index, group))
            contexts[stream].append(KernelContext(op, ins, outs, devices, groups))  # type: ignore[arg-type]
    made = {o for op in param.operators for o in op.outputs}
    unmade: list[dict[int, tuple[int, ...]]] = [{} for _ in range(streams)]
    for output in set(param.outputs) - made:  # results that are inputs or constants
        for stream, devices in route((local.get(output) or metas[output],), ()):
            unmade[stream][output] = devices
    plans = tuple(
        compile_plan(param, c, {p: i for p, i, group in r if group}, u)
        for c, r, u in zip(contexts, renew, unmade, strict=True)
    )
    return CompiledBody(
        param.inputs,
        param.outputs,
        param.writes,
        tuple(local),
        tuple(tuple(c) for c in contexts),
        tuple(tuple(r) for r in renew),
        plans,
    )


def plan_item(body: CompiledBody, call: Operator, stream: int) -> tuple[int, object]:
    """The one item ``stream`` runs for the call ``call`` of ``body``: its plan (the stream
    runs ``call_items`` instead where there is none, or while it profiles)."""
    return (PLAN, (body.plans[stream], body, call, stream))


def call_items(body: CompiledBody, call: Operator, stream: int) -> list[object]:
    """What ``stream`` runs for the SubGraph operator ``call`` of ``body``."""
    inputs = call.inputs
    bind = (BIND, tuple(zip(body.inputs, inputs, strict=False)))
    moves = tuple(zip(call.outputs, body.outputs, strict=True))
    writes = tuple((inputs[i], body.inputs[i]) for i in body.writes)
    items: list[object] = [bind]
    contexts = body.contexts[stream]
    renew = body.renew[stream]
    if renew:
        run = list(contexts)
        for position, index, group in renew:
            ctx = run[position]
            op = ctx.operator
            if group:
                op = Operator(
                    run_id(call.id, index), op.name, op.param, op.inputs, op.outputs, op.span
                )
            run[position] = KernelContext(op, ctx.inputs, ctx.outputs, ctx.devices, ctx.groups)
        items.extend(run)
    else:
        items.extend(contexts)
    items.append((FINISH, (moves + writes, body.frees)))
    return items

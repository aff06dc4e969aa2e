"""Param records of the runtime's own operators: promises, profiling and sub-graphs.

``Memory``, ``GetTensor``, ``Sync`` and ``Profile`` set a promise (``PromiseHandle``) the
client waits on; ``Nvtx`` marks profiler ranges; ``Unsent`` stands in for an operator the
process runner could not send; ``SubGraph`` carries a recorded program. None of them computes
a tensor from its inputs' values. Split out of ``dtorch.ir.params`` (which re-exports every
record here and registers it in ``PARAM_TYPES``) to keep each file to one family of records;
import them from ``dtorch.ir.params``.

Example:
    >>> from dtorch.ir import params, params_control
    >>> params.SyncParam is params_control.SyncParam
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from dtorch.ir.operator import Operand, Operator
from dtorch.ir.opkind import MemoryKind, OpKind
from dtorch.ir.params_base import Ints, OpParam, PromiseHandle


@dataclass(frozen=True, slots=True)
class MemoryParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Memory
    memory: MemoryKind
    reset_peak: bool = False
    promise: PromiseHandle | None = None


@dataclass(frozen=True, slots=True)
class GetTensorParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.GetTensor
    """Set ``promise`` to the (single-device) input's value."""

    promise: PromiseHandle


@dataclass(frozen=True, slots=True)
class SyncParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Sync
    """Every device sets ``promise`` when it reaches this point of the stream."""

    promise: PromiseHandle


@dataclass(frozen=True, slots=True)
class ProfileParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Profile
    """Every stream starts (``start``) or stops recording kernel events; a stop reports them
    to ``promise`` (``dtorch.profile``)."""

    start: bool
    promise: PromiseHandle | None = None


@dataclass(frozen=True, slots=True)
class NvtxParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Nvtx
    """Push (``push=True``) or pop a named profiler range on every device."""

    message: str = ""
    push: bool = True


@dataclass(frozen=True, slots=True)
class UnsentParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Unsent
    """In place of an operator that the process runner could not send to its workers (the
    codec cannot write it: an int beyond 64 bits, say): the original's kind and why. Its
    kernel raises that reason, so its outputs fail on every device as a failed kernel's do,
    and the rest of the batch runs. Only the runner makes one: no rule accepts it, so the
    client cannot record it and a program file cannot hold it."""

    original: OpKind
    reason: str


@dataclass(frozen=True, slots=True)
class SubGraphParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.SubGraph
    """A recorded sub-computation (a traced program, ``dtorch.program``): its operators, the
    metadata of every operand local to it (``operands``: input placeholders and what the
    operators make; freed after each run), the placeholder ids its inputs are bound to (one
    per leading input of the SubGraph operator, whose other inputs are the constants the
    operators read under their own ids), the local ids its outputs are taken from (one per
    output of the operator), and the positions among the inputs that the operators change in
    place (written back after each run).

    ``program`` names the body in the devices' cache: the first SubGraph operator of a
    program on a graph carries the body (``by_name`` False), which the devices compile and
    cache however empty it is; later ones carry the name alone (``by_name`` True, every other
    field empty) and run the cached body. The name is an id of the graph's operand ids (never
    an operand's): released like an operand's when the program goes, it makes the devices
    drop the cached body."""

    operators: tuple[Operator, ...]
    operands: tuple[Operand, ...] = ()
    inputs: Ints = ()
    outputs: Ints = ()
    program: int = 0
    writes: Ints = ()
    by_name: bool = False

"""Report records: what the devices send the controller, the upward half of the Runner seam.

Batches of operators go down to the devices; results come back up as these records, on one
report channel per runner: an in-process queue in thread mode, ZeroMQ PUSH/PULL in process
mode (encoded with the codec, which is why they live beside the other wire records here and
not in the runtime). They are plain data: a failure travels as its text, never as a live
exception, so it reads the same whichever process raised it. The controller alone turns them
into settled promises (``dtorch.runtime.settle``).

* ``ValueReport``: a GetTensor's value (or the failure that stands in for it);
* ``PartyReport``: one party (a kernel stream) reached a Sync or Memory operator, with its
  kernel failures since its previous Sync, or its memory rows;
* ``ProgressReport``: a party finished the batch the runner asked to hear about (flow
  control: a runner never lets the client get unboundedly far ahead of its devices);
* ``ProfileReport``: a party's kernel events (``ProfileEvent``) since its profile started;
* ``WorkerFailureReport``: a worker died or broke; everything pending on it fails;
* ``InputsDone``: a worker ran a batch whose large inputs it read from shared memory.

Example:
    >>> from dtorch.ir.span import Span
    >>> failure = Failure(7, "floor_divide_7 (BroadcastBinary) at m.py:3:1", 0,
    ...                   "RuntimeError", "ZeroDivisionError")
    >>> print(failure.describe())
    floor_divide_7 (BroadcastBinary) at m.py:3:1 failed on device 0: RuntimeError: ZeroDivisionError
    >>> PartyReport("g0.p1", 2, failure).failure.operator_id
    7
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dtorch.errors import CommError, KernelError
from dtorch.ir.opkind import OpKind


@dataclass(frozen=True, slots=True)
class Failure:
    """A kernel failure as data: the operator (its ``describe()`` text: name, kind and user
    line), the device it failed on, and the original error's type name and message;
    ``comm``: the error was a collective's or an exchange's (``CommError``), which a peer
    that died also causes - the controller may wait for its verdict on the workers first."""

    operator_id: int
    operator: str
    device: int
    error_type: str
    message: str
    comm: bool = False

    @classmethod
    def of(cls, operator_id: int, operator: str, device: int, error: BaseException) -> Failure:
        """The record of ``error``, raised by ``operator`` on ``device``."""
        comm = isinstance(error, CommError)
        return cls(operator_id, operator, device, type(error).__name__, str(error), comm)

    def describe(self) -> str:
        return f"{self.operator} failed on device {self.device}: {self.error_type}: {self.message}"

    def error(self) -> KernelError:
        """The exception users see (raised by futures and ``sync()``)."""
        return KernelError(self.describe(), operator_id=self.operator_id)


@dataclass(frozen=True, slots=True)
class SharedValue:
    """A tensor value left in a worker's shared-memory segment (values of 1 MiB or more do not
    travel inside messages): where to map it (owner pid, fd, inode, segment size), what it
    is, and the worker's token for the segment, which the controller hands back once it has
    copied the value out."""

    pid: int
    fd: int
    inode: int
    size: int
    dtype: torch.dtype
    shape: tuple[int, ...]
    worker: int
    token: int


@dataclass(frozen=True, slots=True)
class ValueReport:
    """The value of the GetTensor whose promise is named ``promise``: ``value`` (an owned CPU
    tensor), or ``shared`` (process mode, large values), or ``failure``."""

    promise: str
    value: torch.Tensor | None = None
    shared: SharedValue | None = None
    failure: Failure | None = None


@dataclass(frozen=True, slots=True)
class PartyReport:
    """Party ``party`` reached the Sync or Memory operator of promise ``promise``.

    ``failure``: the party's first kernel failure since its previous Sync (Sync only), and
    ``later`` those of other operators after it (a few, in order: the controller raises the
    first that no future raised already).
    ``rows``: Memory statistics, flattened ``(device, bytes held, peak bytes)`` triples.
    """

    promise: str
    party: int
    failure: Failure | None = None
    rows: tuple[int, ...] = ()
    later: tuple[Failure, ...] = ()


@dataclass(frozen=True, slots=True)
class ProgressReport:
    """Party ``party`` finished the batch with sequence number ``batch``."""

    party: int
    batch: int


@dataclass(frozen=True, slots=True)
class ProfileEvent:
    """One kernel run on one device: the operator (id, name, kind, first output's or else first
    input's global shape), where (``pid``: the process that ran it; ``device``), whether it
    was a group kernel (a collective or redistribution: every device of the call gets the
    same interval), and when, in ``time.perf_counter_ns()`` of ``pid`` (in a ``ProfileReport``)
    or in nanoseconds since the profile began on the controller's clock (``Profile.events``).
    """

    operator_id: int
    name: str
    kind: OpKind
    shape: tuple[int, ...]
    pid: int
    device: int
    group: bool
    start_ns: int
    end_ns: int


@dataclass(frozen=True, slots=True)
class ProfileReport:
    """Party ``party`` stopped profiling (promise ``promise``): its ``events``, how many it
    dropped over its buffer's bound, and its own clock (``perf_counter_ns``) when it started
    and when it stopped, which the controller aligns with its own (``dtorch.api.profile``)."""

    promise: str
    party: int
    events: tuple[ProfileEvent, ...]
    dropped: int
    started_ns: int
    stopped_ns: int


@dataclass(frozen=True, slots=True)
class WorkerFailureReport:
    """Worker ``worker`` died or broke (``reason`` says how, ``devices`` which it hosts)."""

    worker: int
    devices: str
    reason: str


@dataclass(frozen=True, slots=True)
class InputsDone:
    """Worker ``worker`` ran a batch whose large inputs came in shared memory: the tokens of
    those inputs, whose segments the controller may reuse once every reader is done."""

    worker: int
    tokens: tuple[int, ...]


Report = (
    ValueReport | PartyReport | ProgressReport | ProfileReport | WorkerFailureReport | InputsDone
)

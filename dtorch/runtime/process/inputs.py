"""Large inputs through shared memory: the controller-to-worker half of process mode's values.

A ``from_torch`` value travels inside its Create operator. One of ``SHARED_MIN`` bytes (1 MiB)
or more would otherwise be copied into the encoded batch, through the socket and out again in
every worker; instead the controller's ``InputShare`` copies it once into an anonymous segment
and the operator carries a ``SharedInput`` (where the segment is, and a token). Each worker
the batch concerns maps the segment (``InputMaps``: a reused segment keeps its mapping), runs
the batch (the Create kernel copies out the worker's own shards), and hands the batch's
tokens back in one ``InputsDone`` report; once every worker that decodes the batch has done
so, the segment is free for the next value. Workers on other hosts get the values inside the
messages as before (``InputShare(enabled=False)``).

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import DeviceMesh
    >>> from dtorch.ir.operator import ExecuteBatch, Operator
    >>> from dtorch.ir.opkind import CreateKind
    >>> from dtorch.ir.params import CreateParam
    >>> from dtorch.ir.placement import Replicate
    >>> from dtorch.ir.span import Span
    >>> value = torch.arange(2**18, dtype=torch.float32)  # 1 MiB
    >>> param = CreateParam(CreateKind.FROM_TENSOR, tuple(value.shape), value.dtype,
    ...                     DeviceMesh("cpu", [0]), (Replicate(),), value=value)
    >>> batch = ExecuteBatch((Operator(1, "from_torch_1", param, (), (2,), Span.unknown()),), ())
    >>> share, maps = InputShare(), InputMaps()
    >>> sent = share.share(batch, readers=1)
    >>> sent.operators[0].param.value is None, sent.operators[0].param.shared is not None
    (True, True)
    >>> received, tokens = maps.resolve(sent, lambda param: True)
    >>> received.operators[0].param.value[-1].item(), share.lent
    (262143.0, 1)
    >>> share.done(tokens); share.lent
    0
    >>> maps.close(); share.close()
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import threading
from collections.abc import Callable

from dtorch.comm.shm import Locator, PeerMaps, Segment, SegmentPool, map_peer, tensor_view
from dtorch.errors import WorkerError
from dtorch.ir.operator import ExecuteBatch, Operator
from dtorch.ir.opkind import CreateKind
from dtorch.ir.params import CreateParam, SharedInput
from dtorch.serialization.tensors import copy_clean

#: Values of this many bytes or more travel through shared memory, not inside messages.
SHARED_MIN = 1 << 20
#: Free segments the controller keeps for reuse, and the largest it keeps: a checkpoint load
#: reuses one or two, and the controller should not hold gigabytes once it is done.
KEPT_SEGMENTS, KEPT_BYTES = 2, 1 << 28


class InputShare:
    """The controller's side: large values into segments, segments back once every reader
    is done (``done``). Thread-safe: the client's thread shares, the report thread frees."""

    def __init__(self, *, enabled: bool = True, shared_min: int = SHARED_MIN) -> None:
        self._enabled = enabled
        self._shared_min = shared_min
        self._pool = SegmentPool(max_free=KEPT_SEGMENTS, max_size=KEPT_BYTES)
        self._lock = threading.Lock()
        self._lent: dict[int, _Lent] = {}
        self._tokens = itertools.count(1)
        self.moved = 0  # values moved into segments so far

    @property
    def lent(self) -> int:
        """How many segments readers still hold."""
        return len(self._lent)

    def share(self, batch: ExecuteBatch, readers: int) -> ExecuteBatch:
        """``batch`` with each large FROM_TENSOR value moved into a segment that ``readers``
        workers will hand back (the batch itself when there is none)."""
        if not self._enabled or readers < 1:
            return batch
        operators: list[Operator] | None = None
        for index, op in enumerate(batch.operators):
            param = op.param
            if type(param) is CreateParam and self._large(param):
                operators = operators if operators is not None else list(batch.operators)
                operators[index] = dataclasses.replace(op, param=self._moved(param, readers))
        if operators is None:
            return batch
        return ExecuteBatch(tuple(operators), batch.operands, batch.no_hold)

    def _large(self, param: CreateParam) -> bool:
        value = param.value
        return value is not None and value.nbytes >= self._shared_min

    def _moved(self, param: CreateParam, readers: int) -> CreateParam:
        value = param.value
        assert value is not None
        segment = self._pool.acquire(value.nbytes)
        copy_clean(tensor_view(segment.buffer, 0, value.dtype, tuple(value.shape)), value)
        token = next(self._tokens)
        self.moved += 1
        with self._lock:
            self._lent[token] = _Lent(segment, readers)
        where = segment.locator()
        shared = SharedInput(where.pid, where.fd, where.inode, where.size, token)
        return dataclasses.replace(param, value=None, shared=shared)

    def done(self, tokens: tuple[int, ...]) -> None:
        """One reader ran the batch of ``tokens``: a segment all its readers are done with
        is free again (an unknown token, a late answer after ``close``, is ignored)."""
        for token in tokens:
            with self._lock:
                entry = self._lent.get(token)
                if entry is None:
                    continue
                entry.readers -= 1
                if entry.readers > 0:
                    continue
                del self._lent[token]
                self._pool.release(entry.segment)  # under the lock: never after close()

    def close(self) -> None:
        """Close every segment (a worker that died never answers; nothing is left behind)."""
        with self._lock:
            lent, self._lent = list(self._lent.values()), {}
        for entry in lent:
            entry.segment.close()
        self._pool.close()


@dataclasses.dataclass(slots=True)
class _Lent:
    """A segment the readers of its batch still use, and how many have not answered."""

    segment: Segment
    readers: int


class InputMaps:
    """A worker's side: the controller's segments mapped and the shared values put back into
    their operators. Only the mappings of segments the controller may reuse are kept (by
    locator: at most ``KEPT_SEGMENTS``, none larger than ``KEPT_BYTES``); any other mapping goes
    with the last view of it, once the batch ran: a kept mapping holds its segment's memory
    even after the controller closed the segment."""

    def __init__(self) -> None:
        self._maps = PeerMaps(capacity=KEPT_SEGMENTS)

    def resolve(
        self, batch: ExecuteBatch, runs_here: Callable[[CreateParam], bool]
    ) -> tuple[ExecuteBatch, tuple[int, ...]]:
        """``batch`` with the shared values of the Create operators that ``runs_here`` as
        views of their segments, and every token of the batch (to hand back once it ran)."""
        tokens: list[int] = []
        operators: list[Operator] | None = None
        for index, op in enumerate(batch.operators):
            param = op.param
            if type(param) is not CreateParam or param.shared is None:
                continue
            tokens.append(param.shared.token)
            if runs_here(param):
                operators = operators if operators is not None else list(batch.operators)
                operators[index] = dataclasses.replace(op, param=self._mapped(param))
        if operators is not None:
            batch = ExecuteBatch(tuple(operators), batch.operands, batch.no_hold)
        return batch, tuple(tokens)

    def _mapped(self, param: CreateParam) -> CreateParam:
        shared = param.shared
        assert shared is not None
        nbytes = math.prod(param.shape) * param.dtype.itemsize
        if param.create != CreateKind.FROM_TENSOR or nbytes > shared.size:
            raise WorkerError(
                f"a shared input must be a FROM_TENSOR value within its segment; got "
                f"{param.create.name} of {nbytes} bytes in {shared.size}"
            )
        locator = Locator(shared.pid, shared.fd, shared.inode, shared.size)
        buffer = self._maps.get(locator) if shared.size <= KEPT_BYTES else map_peer(locator)
        value = tensor_view(buffer, 0, param.dtype, tuple(param.shape))
        return dataclasses.replace(param, value=value, shared=None)

    def close(self) -> None:
        """Drop every kept mapping (a lease ended: its controller closed its segments)."""
        self._maps.close()

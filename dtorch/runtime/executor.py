"""Executor: the controller thread of one Graph.

The client appends recorded operators (with the metadata of the operands they produce) and
released operand ids to one queue, in program order, and returns at once. The executor thread
drains the queue in batches, keeps the live operands of the logical graph, and hands each batch
to the Runner as one ``ExecuteBatch``: the operators, their output operands, and the operand ids
no handle holds any more (freed after the batch's operators ran). One queue for both keeps a
release from overtaking the operator that produced the operand.

Example:
    >>> from dtorch.runtime.thread_runner import ThreadRunner
    >>> executor = Executor(ThreadRunner(num_streams=1), name="doc")
    >>> executor.release(5)     # releasing an id nobody produced is harmless
    >>> executor.close(timeout=5.0)
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from dtorch.errors import GraphError
from dtorch.ir.operator import ExecuteBatch, Operand, Operator
from dtorch.ir.opkind import OpKind
from dtorch.runtime.runner import Runner
from dtorch.runtime.workqueue import WorkQueue

#: What the client queues per operator: the operator and the metadata of its outputs.
Submission = tuple[Operator, tuple[Operand, ...]]

#: Largest number of queue items per batch: bounds the latency of the first operator.
MAX_BATCH = 4096


class Executor:
    """Drains one graph's queue into its runner on a dedicated thread."""

    def __init__(self, runner: Runner, name: str) -> None:
        self.runner = runner
        self.live: dict[int, Operand] = {}
        self._queue = WorkQueue()
        #: ``release(operand_id)``: queue the release of an operand no handle holds (any
        #: thread, even a finalizer). The queue's own ``put``, bound once: every operator's
        #: output is released when its last handle goes, and a method around it costs a call.
        self.release: Callable[[int], None] = self._queue.put
        #: ``submit((operator, its output operands))``: queue a recorded operator (client
        #: thread; never blocks). Also the queue's ``put`` while the graph runs; ``close`` and
        #: a failed runner swap in a refusal (GraphError) for later operators.
        self.submit: Callable[[Submission], None] = self._queue.put
        self._carry: Any = None  # an item that opens the next batch (see _drain)
        self._stopping = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name=f"{name}-executor", daemon=True)
        self._thread.start()

    def _refuse(self, item: Submission) -> None:
        raise GraphError(self._refusal())

    def _refusal(self) -> str:
        if self._error is not None:
            return f"this graph's runner failed ({self._error!r}); create a new Graph"
        return "this graph is closed; create a new Graph to record more operators"

    def close(self, timeout: float) -> None:
        """Run what is queued, then stop the thread and the runner."""
        if self._stopping:
            return
        self._stopping = True
        self.submit = self._refuse
        self._queue.put(None)  # a wake token: the thread wakes, drains, sees _stopping
        self._thread.join(timeout)
        self.runner.close(timeout)
        if self._thread.is_alive():
            raise GraphError(f"the executor did not stop within {timeout} s")

    def _main(self) -> None:
        while True:
            batch = self._drain()
            if batch is not None:
                self._dispatch(batch)
            elif self._stopping:
                return
            else:
                self._queue.sleep(1.0)

    def _drain(self) -> ExecuteBatch | None:
        queue = self._queue
        operators: list[Operator] = []
        operands: list[Operand] = []
        no_hold: list[int] = []
        live = self.live
        carry, self._carry = self._carry, None
        if carry is not None:  # a memory-stats operator held back by the previous batch
            operators.append(carry[0])
        for _ in range(min(len(queue), MAX_BATCH)):
            item = queue.popleft()
            if item is None:  # close()'s wake token
                continue
            if type(item) is int:
                no_hold.append(item)
                live.pop(item, None)
                continue
            if not item[1] and no_hold and item[0].param.kind is OpKind.Memory:
                # A batch frees its no-hold operands after its operators: memory stats must
                # see the frees recorded before them, so they open the next batch.
                self._carry = item
                break
            operators.append(item[0])
            for operand in item[1]:
                live[operand.id] = operand
                operands.append(operand)
        if not operators and not no_hold:
            return None
        return ExecuteBatch(tuple(operators), tuple(operands), tuple(no_hold))

    def _dispatch(self, batch: ExecuteBatch) -> None:
        try:
            self.runner.execute(batch)
        except Exception as error:  # a runner bug must not kill the controller silently
            self._error = error
            self.submit = self._refuse
            failure = GraphError(f"the runner failed to take a batch: {error!r}")
            failure.__cause__ = error
            self.runner.promises.fail_all(failure)

"""The controller's promise table: settling, and failing what is left when a graph ends."""

from __future__ import annotations

import pytest

from dtorch.comm.promise import create_promise
from dtorch.errors import CommError, GraphError
from dtorch.ir.opkind import PromiseKind
from dtorch.runtime.executor import Executor
from dtorch.runtime.settle import PromiseTable
from dtorch.runtime.thread_runner import ThreadRunner


def test_fail_all_leaves_promises_a_finalizer_abandoned_alone() -> None:
    """At interpreter exit a pending future's finalizer abandons its promise before the
    graph's exit-time close fails every promise left: that close must not raise (it did:
    PromiseStateError, printed over the real error), and fails the others."""
    table = PromiseTable()
    abandoned = create_promise(PromiseKind.MEMORY, name="p1")
    pending = create_promise(PromiseKind.MEMORY, name="p2")
    table.add("p1", abandoned)
    table.add("p2", pending)
    abandoned.set_error(CommError("promise 'p1' was dropped before a value was set"))
    table.fail_all(GraphError("closed"))
    with pytest.raises(GraphError, match="closed"):
        pending.get_future().get(1.0)
    with pytest.raises(CommError, match="dropped"):
        abandoned.get_future().get(1.0)
    assert len(table) == 0


def test_closing_an_executor_with_an_abandoned_promise_is_clean() -> None:
    executor = Executor(ThreadRunner(num_streams=1), name="abandoned")
    promise = create_promise(PromiseKind.MEMORY, name="x1")
    executor.register("x1", promise)
    promise.set_error(CommError("dropped"))
    executor.close(timeout=5.0)


def test_raised_failures_keep_the_earliest_operators_a_sync_would_report() -> None:
    """Past its 4,096 ids, RaisedFailures forgets the latest operators, not the earliest: a
    stream reports its first failures since the sync, so forgetting those made the next sync
    raise a failure the user had caught already (seen after 6,000 caught failures)."""
    from dtorch.ir.report import Failure
    from dtorch.runtime.settle import RaisedFailures

    raised = RaisedFailures()
    failures = [Failure(i, f"div_{i}", 0, "ZeroDivisionError", "x") for i in range(6000)]
    for failure in failures:
        raised.note(failure.error())
    assert raised.first_unseen(failures[:16]) is None  # what a stream reports: its first
    assert raised.first_unseen(failures[:16]) is failures[0]  # a sync forgot every id

"""make_runner: the Runner a graph's option asks for.

Thread mode (the default) runs devices on the kernel stream threads of this process (the
option's ``num_streams``, else ``THREAD_STREAMS``). Process mode
(``GraphOption(per_device_per_process=True)`` or DTORCH_PER_DEVICE_PER_PROCESS=1) runs them
in worker processes fed over ZeroMQ; the option's ``num_workers`` and ``worker_pool`` say
how many and on which pool.

Example:
    >>> from dtorch.api.graph import GraphOption
    >>> runner = make_runner(GraphOption(per_device_per_process=False), "doc")
    >>> type(runner).__name__, runner.parties
    ('ThreadRunner', 2)
    >>> runner.close(5.0)
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from dtorch.runtime.heap import keep_freed_memory_here
from dtorch.runtime.runner import Runner
from dtorch.runtime.thread_runner import ThreadRunner

if TYPE_CHECKING:
    from dtorch.api.graph import GraphOption

#: Kernel streams of a thread runner unless its option names a number: its devices are
#: logical, any number run on these.
THREAD_STREAMS = 2


def make_runner(option: GraphOption, name: str) -> Runner:
    """The runner of a graph with ``option``, named ``name`` (thread names carry it)."""
    if option.resolved_per_device_per_process():
        from dtorch.runtime.process.runner import ProcessRunner  # imports zmq only when used

        return ProcessRunner.for_option(option)
    if option.num_workers is not None or option.worker_pool is not None:
        warnings.warn(  # never silently: the option names process mode's workers
            f"GraphOption(num_workers={option.num_workers}, worker_pool={option.worker_pool}) "
            "is ignored: this graph runs in thread mode (per_device_per_process is not True, "
            "nor DTORCH_PER_DEVICE_PER_PROCESS set); thread mode takes num_streams",
            UserWarning,
            stacklevel=3,
        )
    keep_freed_memory_here()  # the streams' kernels reuse freed pages (dtorch.runtime.heap)
    return ThreadRunner(option.num_streams or THREAD_STREAMS, name=name)

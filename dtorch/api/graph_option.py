"""GraphOption: the options of one Graph (thread or process mode, workers, streams), each
field checked when it is set, so a bad value never sits in an option.

Example:
    >>> GraphOption(num_streams=1).num_streams
    1
    >>> GraphOption(num_workers=0)
    Traceback (most recent call last):
    ...
    dtorch.errors.GraphError: num_workers must be an int from 1 to 1024 or None, got 0
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dtorch.errors import GraphError
from dtorch.options import GlobalOption

if TYPE_CHECKING:
    from dtorch.runtime.process.runner import LeasablePool


@dataclass(slots=True, kw_only=True)
class GraphOption:
    """Options of one Graph.

    ``per_device_per_process``: True runs each device's kernels in a worker process fed over
    ZeroMQ; False runs devices as threads of this process; None (the default) takes
    ``GlobalOption.get_per_device_per_process()`` (DTORCH_PER_DEVICE_PER_PROCESS).

    Process mode only: ``num_workers`` worker processes are started for the graph (default:
    one per GPU where CUDA is present, else one per CPU core; each worker hosts a fixed share
    of any number of logical CPU devices: device ``d`` runs on worker ``d % num_workers``), and
    stopped when it closes. ``worker_pool``: run on that ``WorkerPool`` instead (started once,
    it serves one graph after another without starting processes again), or on a cluster's
    workers (``dtorch.cluster.MainNode.worker_pool()``). Both are unused where the graph runs
    in thread mode (``per_device_per_process=False``, or None with the environment's default
    False): an option may keep its pool while a program switches modes.

    Thread mode only: ``num_streams`` kernel stream threads run the devices (device ``d`` on
    stream ``d % num_streams``; default 2). Two streams run two devices' large kernels side
    by side; one stream suits programs of many small operators (a token-by-token decode):
    each torch call releases the GIL, and with two streams busy each then waits to win it
    back from the other (a small-operator loop ran about 3x faster on one stream, a Llama
    forward of 512 tokens on tp=2 about 30% slower; benchmarks/models.py, README).

    Keyword-only; fields are settable before the option is given to a Graph (a graph reads it
    once, when it is made); ``==`` compares fields.

    Example:
        >>> option = GraphOption()
        >>> option.per_device_per_process = False
        >>> option == GraphOption(per_device_per_process=False), str(option)
        (True, 'GraphOption(per_device_per_process=False, num_workers=None, worker_pool=None, \
num_streams=None)')
    """

    per_device_per_process: bool | None = None
    num_workers: int | None = None
    worker_pool: LeasablePool | None = None
    num_streams: int | None = None

    def __post_init__(self) -> None:
        _check_option(
            self.per_device_per_process, self.num_workers, self.worker_pool, self.num_streams
        )

    # Assignment is checked as construction is: a bad value never sits in an option.
    def __setattr__(self, name: str, value: object) -> None:
        fields = {f: getattr(self, f, None) for f in _OPTION_FIELDS}
        if name in fields and all(hasattr(self, f) for f in _OPTION_FIELDS):
            fields[name] = value
            _check_option(*fields.values())
        if name == "per_device_per_process" and value in (True, False):
            value = bool(value)  # 1 and 0 are accepted, as True and False (their equals)
        object.__setattr__(self, name, value)

    def __str__(self) -> str:
        return (
            f"GraphOption(per_device_per_process={self.per_device_per_process}, "
            f"num_workers={self.num_workers}, worker_pool={self.worker_pool}, "
            f"num_streams={self.num_streams})"
        )

    def resolved_per_device_per_process(self) -> bool:
        if self.per_device_per_process is None:
            return GlobalOption.get_per_device_per_process()
        return bool(self.per_device_per_process)


_OPTION_FIELDS = ("per_device_per_process", "num_workers", "worker_pool", "num_streams")
#: The most worker processes and kernel stream threads a graph starts: each is a process or
#: a thread of this machine (2**70 was accepted, and the graph started threads until the
#: process could start none), and a device ``d`` runs on ``d % count`` anyway.
_MOST = {"num_workers": 1024, "num_streams": 256}


def _check_option(
    per_device_per_process: bool | None,
    num_workers: int | None,
    worker_pool: LeasablePool | None,
    num_streams: int | None = None,
) -> None:
    """GraphError naming the bad GraphOption field, what it got and what it accepts."""
    if per_device_per_process not in (None, True, False):
        raise GraphError(
            "GraphOption: per_device_per_process must be True, False or None, got "
            f"{per_device_per_process!r}"
        )
    for name, count in (("num_workers", num_workers), ("num_streams", num_streams)):
        most = _MOST[name]
        if count is not None and (
            isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= most
        ):
            raise GraphError(f"{name} must be an int from 1 to {most} or None, got {count!r}")
    if worker_pool is not None and num_workers is not None:
        raise GraphError("give num_workers or worker_pool, not both (the pool has its size)")
    if worker_pool is not None and not callable(getattr(worker_pool, "lease", None)):
        raise GraphError(
            "GraphOption: worker_pool must be a dtorch.runtime.process.WorkerPool or a "
            f"cluster's pool (MainNode.worker_pool()), got {type(worker_pool).__name__}"
        )


__all__ = ["GraphOption"]

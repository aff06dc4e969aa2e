"""GlobalOption: the environment configuration of dtorch, read in this module and nowhere else.

The environment is read once, on first use, into a frozen ``Options`` record. Invalid values
raise ``OptionError`` naming the variable, the value and what is accepted. ``GlobalOption``
exposes DTorch's static getters; ``GlobalOption.override`` swaps the record for the duration of
a ``with`` block (tests use it to shorten timeouts; worker processes install the controller's
record so that every process of one program runs with the same configuration).

Example:
    >>> from dtorch.options import GlobalOption, Options
    >>> GlobalOption.get_comm_timeout_second() > 0
    True
    >>> Options.from_environ({"DTORCH_COMM_TIMEOUT_SECOND": "2.5"}).comm_timeout_second
    2.5
    >>> with GlobalOption.override(comm_timeout_second=1.0):
    ...     GlobalOption.get_comm_timeout_second()
    1.0
"""

from __future__ import annotations

import dataclasses
import math
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from dtorch.errors import OptionError

#: The longest wait dtorch honours, in seconds (about 31 years): longer timeouts, ``inf``
#: included, are clamped to it (``threading`` and ``select`` overflow near 9.2e9 s), and a
#: DTORCH_*_TIMEOUT_SECOND above it is refused.
MAX_WAIT_SECOND = 1e9

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})


def _parse_bool(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise OptionError(f"{name}={raw!r} is not a boolean; accepted: 1/true/yes/on or 0/false/no/off")


def _parse_positive_float(name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise OptionError(
            f"{name}={raw!r} is not a number; accepted: a positive number of seconds"
        ) from None
    if not math.isfinite(value) or not 0 < value <= MAX_WAIT_SECOND:
        raise OptionError(
            f"{name}={raw!r} must be a positive, finite number of seconds, "
            f"at most {MAX_WAIT_SECOND:g}"
        )
    return value


def _parse_positive_int(name: str, raw: str) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise OptionError(
            f"{name}={raw!r} is not an integer; accepted: a positive integer"
        ) from None
    if value <= 0:
        raise OptionError(f"{name}={raw!r} must be a positive integer")
    return value


@dataclass(frozen=True, slots=True)
class Options:
    """The whole environment configuration, as one immutable record.

    Fields and their variables: ``comm_timeout_second`` (DTORCH_COMM_TIMEOUT_SECOND, every
    blocking communication call), ``zmq_timeout_second`` (DTORCH_ZMQ_TIMEOUT_SECOND, every
    controller/worker socket wait), ``grpc_timeout_second`` (DTORCH_GRPC_TIMEOUT_SECOND, DTorch's
    RPC timeout; dtorch has no gRPC channel, the value is kept for programs that read it;
    default 60, as the zmq timeout), ``dtensor_in_same_device`` (DTORCH_DTENSOR_IN_SAME_DEVICE,
    N logical devices on one physical device), ``num_gpu_when_enable_dtensor_in_same_device``
    (DTORCH_NUM_GPU_WHEN_ENABLE_DTENSOR_IN_SAME_DEVICE), ``per_device_per_process``
    (DTORCH_PER_DEVICE_PER_PROCESS, default for graphs that leave it unset) and
    ``validate_kernel_input_output`` (DTORCH_VALIDATE_KERNEL_INPUT_OUTPUT, check every kernel's
    local shapes against the inferred ones), ``gc_freeze`` (DTORCH_GC_FREEZE, dtorch's
    addition: freeze the objects that exist when dtorch is imported, see
    ``dtorch.runtime.gc_policy``) and ``keep_freed_memory`` (DTORCH_KEEP_FREED_MEMORY, dtorch's
    addition: a thread-mode graph sets the C library's malloc to keep freed memory for reuse,
    as worker processes always do, see ``dtorch.runtime.heap``).
    """

    comm_timeout_second: float = 300.0
    zmq_timeout_second: float = 60.0
    grpc_timeout_second: float = 60.0
    dtensor_in_same_device: bool = False
    num_gpu_when_enable_dtensor_in_same_device: int = 8
    per_device_per_process: bool = False
    validate_kernel_input_output: bool = False
    gc_freeze: bool = True
    keep_freed_memory: bool = True

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Options:
        """Parse the DTORCH_* variables of ``environ``; absent ones take their defaults."""
        values: dict[str, Any] = {}
        for field_name, (variable, parse) in _VARIABLES.items():
            raw = environ.get(variable)
            if raw is not None:
                values[field_name] = parse(variable, raw)
        return cls(**values)

    def environ(self) -> dict[str, str]:
        """This record as the DTORCH_* variables that parse back to it: a worker process
        started with them reads the controller's record, whatever its environment says now.

        Example:
            >>> record = Options(comm_timeout_second=2.5, gc_freeze=False)
            >>> Options.from_environ(record.environ()) == record
            True
        """
        return {
            variable: _rendered(getattr(self, name)) for name, (variable, _) in _VARIABLES.items()
        }

    def validated(self) -> Options:
        """Return self after checking the invariants of every field (used by ``override``)."""
        for field_name, (variable, parse) in _VARIABLES.items():
            parse(variable, str(getattr(self, field_name)))
        return self


def _rendered(value: bool | int | float) -> str:
    return ("1" if value else "0") if isinstance(value, bool) else repr(value)


_VARIABLES: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    "comm_timeout_second": ("DTORCH_COMM_TIMEOUT_SECOND", _parse_positive_float),
    "zmq_timeout_second": ("DTORCH_ZMQ_TIMEOUT_SECOND", _parse_positive_float),
    "grpc_timeout_second": ("DTORCH_GRPC_TIMEOUT_SECOND", _parse_positive_float),
    "dtensor_in_same_device": ("DTORCH_DTENSOR_IN_SAME_DEVICE", _parse_bool),
    "num_gpu_when_enable_dtensor_in_same_device": (
        "DTORCH_NUM_GPU_WHEN_ENABLE_DTENSOR_IN_SAME_DEVICE",
        _parse_positive_int,
    ),
    "per_device_per_process": ("DTORCH_PER_DEVICE_PER_PROCESS", _parse_bool),
    "validate_kernel_input_output": ("DTORCH_VALIDATE_KERNEL_INPUT_OUTPUT", _parse_bool),
    "gc_freeze": ("DTORCH_GC_FREEZE", _parse_bool),
    "keep_freed_memory": ("DTORCH_KEEP_FREED_MEMORY", _parse_bool),
}


class _OptionState:
    """Holds the process's current Options; the environment is parsed on first use only."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._options: Options | None = None

    def get(self) -> Options:
        options = self._options
        if options is None:
            with self._lock:
                if self._options is None:
                    self._options = Options.from_environ(os.environ)
                options = self._options
        return options

    def swap(self, options: Options | None) -> Options | None:
        with self._lock:
            previous, self._options = self._options, options
        return previous


_STATE = _OptionState()


class GlobalOption:
    """Static getters for the environment configuration (DTorch's ``GlobalOption``).

    Example:
        >>> from dtorch import GlobalOption
        >>> isinstance(GlobalOption.get_per_device_per_process(), bool)
        True
    """

    @staticmethod
    def current() -> Options:
        """The Options record in force in this process."""
        return _STATE.get()

    @staticmethod
    def get_comm_timeout_second() -> float:
        return _STATE.get().comm_timeout_second

    @staticmethod
    def get_zmq_timeout_second() -> float:
        return _STATE.get().zmq_timeout_second

    @staticmethod
    def get_grpc_timeout_second() -> float:
        """DTORCH_GRPC_TIMEOUT_SECOND (positive seconds, default 60).

        Example:
            >>> from dtorch import GlobalOption
            >>> GlobalOption.get_grpc_timeout_second() > 0
            True
        """
        return _STATE.get().grpc_timeout_second

    @staticmethod
    def get_dtensor_in_same_device() -> bool:
        return _STATE.get().dtensor_in_same_device

    @staticmethod
    def get_num_gpu_when_enable_dtensor_in_same_device() -> int:
        return _STATE.get().num_gpu_when_enable_dtensor_in_same_device

    @staticmethod
    def get_per_device_per_process() -> bool:
        return _STATE.get().per_device_per_process

    @staticmethod
    def get_validate_kernel_input_output() -> bool:
        return _STATE.get().validate_kernel_input_output

    @staticmethod
    def get_gc_freeze() -> bool:
        return _STATE.get().gc_freeze

    @staticmethod
    def get_keep_freed_memory() -> bool:
        return _STATE.get().keep_freed_memory

    @staticmethod
    def install(options: Options) -> None:
        """Make ``options`` this process's configuration (worker processes use the controller's)."""
        _STATE.swap(options.validated())

    @staticmethod
    @contextmanager
    def override(**changes: Any) -> Iterator[Options]:
        """Within the block, the current options with ``changes`` applied (process-wide)."""
        options = dataclasses.replace(_STATE.get(), **changes).validated()
        previous = _STATE.swap(options)
        try:
            yield options
        finally:
            _STATE.swap(previous)


def _parse_index(name: str, raw: str) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise OptionError(f"{name}={raw!r} is not an integer; accepted: 0, 1, 2, ...") from None
    if value < 0:
        raise OptionError(f"{name}={raw!r} must be 0 or more")
    return value


@dataclass(frozen=True, slots=True)
class Launch:
    """How this process was launched as a dtorch worker: ``rank`` of ``world_size`` (torchrun's
    RANK and WORLD_SIZE, None when unset), ``local_rank`` (LOCAL_RANK: the GPU of a CUDA
    worker), ``cluster_token`` (DTORCH_CLUSTER_TOKEN: the cluster's shared secret, hex) and
    ``cluster_cpu_collectives`` (DTORCH_CLUSTER_CPU_COLLECTIVES: a controller's default for
    ``MainNode.set_address(cpu_collectives=)``, "store" or "gloo"; checked there).

    Example:
        >>> Launch.from_environ({"RANK": "3", "WORLD_SIZE": "4"}).rank
        3
        >>> Launch.from_environ({}).world_size is None
        True
    """

    rank: int | None = None
    world_size: int | None = None
    local_rank: int | None = None
    cluster_token: str | None = field(default=None, repr=False)
    cluster_cpu_collectives: str | None = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Launch:
        """The launch variables of ``environ`` (default: this process's environment)."""
        source = os.environ if environ is None else environ
        number = {
            "rank": ("RANK", _parse_index),
            "world_size": ("WORLD_SIZE", _parse_positive_int),
            "local_rank": ("LOCAL_RANK", _parse_index),
        }
        values: dict[str, Any] = {
            name: parse(variable, source[variable])
            for name, (variable, parse) in number.items()
            if variable in source
        }
        return cls(
            **values,
            cluster_token=source.get("DTORCH_CLUSTER_TOKEN"),
            cluster_cpu_collectives=source.get("DTORCH_CLUSTER_CPU_COLLECTIVES"),
        )

"""The exception tree of dtorch.

Every error dtorch raises on purpose is a ``DTorchError``. Where a standard exception type
describes the failure too, the dtorch class also derives from it, and from the class torch
raises for the same failure (mostly ``RuntimeError``), so both ``except ValueError`` and
code written against plain PyTorch (``except RuntimeError``) keep working::

    DTorchError
    ├── OptionError (ValueError)              an environment variable or option is invalid
    ├── MeshError (ValueError)                a DeviceMesh is malformed or used wrongly
    ├── PlacementError (ValueError)           placements an operator or mesh does not accept
    │   └── NotIterableError (TypeError)      iter() of a tensor sharded on dim 0
    ├── ShapeError (ValueError, RuntimeError) shapes an operator does not accept
    │   ├── DimError (IndexError)             a dim argument out of range
    │   └── UnsupportedShapeError (NotImplementedError)  a shape or mode torch has no kernel for
    ├── DtypeError (TypeError, RuntimeError)  dtypes an operator does not accept
    │   └── UnsupportedDtypeError (NotImplementedError)  a dtype torch has no kernel for
    ├── ParamError (ValueError, RuntimeError) an operator argument with a value it does not accept
    ├── ScalarError (ValueError)              a value that is not a scalar dtorch can carry
    ├── UnknownDtypeError (ValueError)        a dtype (code) this torch does not have
    ├── NoRuleError (NotImplementedError)     an operator kind without a shape rule
    ├── KernelTableError (ValueError)         a second kernel registered for one kind
    ├── GraphError (RuntimeError)             misuse of a Graph (closed graph, mixed graphs)
    │   └── TraceError                        a traced function read a value or drew random
    │                                         numbers, or a program got other inputs
    ├── SerializationError (TypeError)        a value the codec cannot write (unknown type, cycle)
    ├── DeserializationError (ValueError)     bytes the codec cannot read
    │   ├── UnknownTypeError                  a type tag no registered record has
    │   ├── BadReferenceError                 a reference to a node that does not exist (yet)
    │   ├── MissingFieldError                 a required field is absent
    │   └── UnsupportedVersionError           a format version newer than this dtorch knows
    ├── CommError (RuntimeError)              a collective or tensor exchange failed
    │   ├── CommTimeoutError (TimeoutError)   a peer never came within the timeout
    │   ├── PeerDiedError                     a peer process died while this one waited for
    │   │                                     it; names the peer (rank, pid) and the wait
    │   └── PromiseStateError                 a promise set twice or used on the wrong side
    ├── KernelError (RuntimeError)            a kernel failed on a device; names op and span
    ├── TransportError (RuntimeError)         a controller/worker socket failed or was misused
    │   ├── MessageGapError                   a subscriber saw a message id out of sequence,
    │   │                                     or a malformed message
    │   └── TransportTimeoutError (TimeoutError)  a socket wait ran past its timeout
    ├── WorkerError (RuntimeError)            a worker process broke or stopped answering
    │   └── WorkerDiedError                   a worker process exited: which, its devices, how
    ├── RendezvousError (RuntimeError)        a cluster could not form: a forged or missing
    │                                         record, a worker that never came, a bad address
    └── FutureTimeoutError (TimeoutError)     a future was not ready within the timeout

Example:
    >>> from dtorch.errors import DTorchError, OptionError
    >>> issubclass(OptionError, ValueError) and issubclass(OptionError, DTorchError)
    True
"""

from __future__ import annotations


class DTorchError(Exception):
    """Root of every error dtorch raises on purpose."""


class OptionError(DTorchError, ValueError):
    """An environment variable or an option holds a value dtorch does not accept."""


class MeshError(DTorchError, ValueError):
    """A DeviceMesh is malformed, or two meshes that must agree do not."""


class PlacementError(DTorchError, ValueError):
    """Placements that a mesh or an operator does not accept."""


class NotIterableError(PlacementError, TypeError):
    """``iter()`` of a tensor sharded on dim 0: a PlacementError, and the TypeError Python's
    ``iter()`` raises for what it cannot iterate (code that probes with ``iter()`` and catches
    TypeError, such as transformers' ``ModelOutput``, moves on)."""


class ShapeError(DTorchError, ValueError, RuntimeError):
    """Shapes that an operator does not accept (torch raises RuntimeError for these)."""


class DimError(ShapeError, IndexError):
    """A dimension argument out of range: an IndexError, as torch raises, and a ShapeError."""


class DtypeError(DTorchError, TypeError, RuntimeError):
    """Dtypes an operator does not accept (torch would raise on the full tensors too, mostly a
    RuntimeError)."""


class UnsupportedDtypeError(DtypeError, NotImplementedError):
    """A dtype torch has no kernel for ("not implemented for 'Long'"): torch raises
    NotImplementedError, which ``except NotImplementedError`` expects."""


class UnsupportedShapeError(ShapeError, NotImplementedError):
    """A shape or mode torch has not implemented (reflect padding of some sizes, bilinear
    of a 3-D input): torch raises NotImplementedError."""


class ParamError(DTorchError, ValueError, RuntimeError):
    """An operator argument (a param field) with a value the operator does not accept (torch
    raises RuntimeError for most, ValueError for some)."""


class ScalarError(DTorchError, ValueError):
    """A value that is not a scalar dtorch can carry."""


class UnknownDtypeError(DTorchError, ValueError):
    """A dtype or dtype code that this torch does not have."""


class NoRuleError(DTorchError, NotImplementedError):
    """An operator kind without a shape/placement rule."""


class KernelTableError(DTorchError, ValueError):
    """A kernel registered for a kind that already has one."""


class GraphError(DTorchError, RuntimeError):
    """A Graph used wrongly: closed, mixed with another graph, or in a bad state."""


class TraceError(GraphError):
    """``dtorch.trace`` refused the function (it reads a value, syncs or draws random numbers),
    or a ``Program`` was called with inputs unlike those it was traced with."""


class SerializationError(DTorchError, TypeError):
    """A value the codec cannot write: an unregistered type or a reference cycle."""


class DeserializationError(DTorchError, ValueError):
    """Bytes the codec cannot read: corrupt, truncated, or not a dtorch payload."""


class UnknownTypeError(DeserializationError):
    """A payload names a type tag that no registered record type has."""


class BadReferenceError(DeserializationError):
    """A payload refers to a node that does not exist or is not yet complete."""


class MissingFieldError(DeserializationError):
    """A payload lacks a field that has no default."""


class UnsupportedVersionError(DeserializationError):
    """A payload was written by a newer format version than this dtorch reads."""


class CommError(DTorchError, RuntimeError):
    """A collective or a tensor exchange between devices failed."""


class CommTimeoutError(CommError, TimeoutError):
    """A blocking communication call waited longer than DTORCH_COMM_TIMEOUT_SECOND."""


class PeerDiedError(CommError):
    """A peer process died while this one waited for it: a member of a file store, the setter
    of a FILE promise, a rank of a collective. Raised as soon as the death is seen (within
    about a second), not at the comm timeout. The message names the dead peer (rank, pid) and
    what was awaited; ``peers`` holds ``(rank, pid)`` of each dead peer, the rank as the failed
    call numbers its peers (store participant, group rank), None for a promise's setter."""

    def __init__(self, message: str, peers: tuple[tuple[int | None, int], ...] = ()) -> None:
        super().__init__(message)
        self.peers = peers


class PromiseStateError(CommError):
    """A promise set twice, its future taken twice, or a promise used on the wrong side."""


class KernelError(DTorchError, RuntimeError):
    """A kernel failed on a device; the message names the operator and the user's line.

    ``operator_id``: the failed operator's id where known (``sync()`` does not raise again a
    failure that a future already raised)."""

    def __init__(self, *args: object, operator_id: int | None = None) -> None:
        super().__init__(*args)
        self.operator_id = operator_id


class TransportError(DTorchError, RuntimeError):
    """A controller/worker socket failed: a bind or connect refused, a malformed message, a
    socket used after ``close()``; the message names the address."""


class MessageGapError(TransportError):
    """A subscriber saw a message id that is not the previous id + 1 (the first must be 0), or
    a message without an id and a kind; fatal, the subscriber never resynchronises. Also a
    malformed message at a puller (too few frames, a bad sender frame or layout), which the
    controller's report reader drops: no sender of dtorch's writes one."""


class TransportTimeoutError(TransportError, TimeoutError):
    """A socket wait (connect, receive, send, subscribers) ran past its timeout; the message
    names the address and the timeout."""


class WorkerError(DTorchError, RuntimeError):
    """A worker process broke (a lost message, a bad batch), or stopped answering in time."""


class WorkerDiedError(WorkerError):
    """A worker process exited while its graph was running; the message names the worker, the
    devices it hosted and its exit code or signal. Every pending future of the graph and its
    next ``sync()`` raise it; a new Graph works normally."""


class RendezvousError(DTorchError, RuntimeError):
    """A cluster could not form: a forged, malformed or missing rendezvous record, workers that
    disagree or never came, an address that cannot be served."""


class FutureTimeoutError(DTorchError, TimeoutError):
    """A future did not become ready within the time it was given. A graph's future (a fetch,
    a sync) also names whom it waited for: the worker (index, pid, devices, process state)
    that owes the answer, and any worker process that is stopped."""


def raised_anew(error: BaseException) -> BaseException:
    """A copy of ``error`` for one ``raise``: an error kept to be raised again and again (by
    every future of a broken graph, at every later sync) is never raised itself, so its
    traceback neither grows at each raise nor holds the frames - and with them the tensors
    and the graph - of the first caller (a broken graph's threads kept it reachable).

    Example:
        >>> kept = WorkerError("worker 0 died")
        >>> copy = raised_anew(kept)
        >>> type(copy) is WorkerError and copy is not kept and str(copy) == str(kept)
        True
    """
    cls = type(error)
    try:  # not cls(*args): an __init__ that words its message would word it twice
        fresh = cls.__new__(cls, *error.args)
    except Exception:  # a class that cannot be made so: raised as it is
        return error
    fresh.args = error.args
    fresh.__dict__.update(error.__dict__)  # its attributes and __notes__
    # the frames it failed in; a raise links new frames in front and leaves this chain as is
    fresh.__traceback__ = error.__traceback__
    fresh.__cause__, fresh.__context__ = error.__cause__, error.__context__
    fresh.__suppress_context__ = error.__suppress_context__
    return fresh

"""The base of every op param record (``OpParam``) and the small value records params nest.

``dtorch.ir.params`` builds ``PARAM_TYPES`` from ``OpParam.__subclasses__()``, so it imports
every module that holds records; those modules subclass ``OpParam``, so it cannot live in
``dtorch.ir.params`` itself without a module-level import cycle. It lives here, with the
records params are made of (``SliceIndex``, ``PromiseHandle``, ``SharedInput``) and the
``Ints``/``IndexEntry`` aliases they share. Import them from ``dtorch.ir.params``, which
re-exports them (the same objects).

Example:
    >>> from dtorch.ir import params, params_base
    >>> params_base.SliceIndex(0, 4), params.OpParam is params_base.OpParam
    (SliceIndex(start=0, stop=4, step=1), True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Union

from dtorch.ir.opkind import OpKind, PromiseKind

Ints = tuple[int, ...]


class OpParam:
    """Base of every param record; ``kind`` names the OpKind it belongs to."""

    __slots__ = ()
    kind: ClassVar[OpKind]


@dataclass(frozen=True, slots=True)
class SliceIndex:
    """``start:stop:step`` of one indexed dimension, already clipped to its size."""

    start: int
    stop: int
    step: int = 1


#: One entry of a normalised index: an int (selects and drops the dim), a slice, or None
#: (inserts a new dim). Ellipsis is expanded away at record time.
IndexEntry = Union[int, SliceIndex, None]  # noqa: UP007 - a runtime alias, used in isinstance-free code


@dataclass(frozen=True, slots=True)
class PromiseHandle:
    """Names a promise that a GetTensor/Sync/Memory kernel sets: data, never a live object.

    MEMORY promises live in the controller's process and are found by ``name`` in its table;
    FILE promises are shared-memory segments that another process attaches to by ``name``.
    """

    kind: PromiseKind
    name: str


@dataclass(frozen=True, slots=True)
class SharedInput:
    """Where a worker process maps the bytes of a large FROM_TENSOR value instead of reading
    them from the message: the controller's anonymous segment (owner pid, fd, inode, size),
    and the token the worker hands back once it ran the batch
    (``dtorch.runtime.process.inputs``)."""

    pid: int
    fd: int
    inode: int
    size: int
    token: int

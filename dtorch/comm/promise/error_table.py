"""How an error crosses a process boundary: a class name from a fixed table, and its message.

The table lists dtorch's own error classes, by name. An error is written as the nearest class
of the table in its MRO (anything else becomes ``DTorchError`` with the original type name in
the message); a name read back is looked up in the table only, never imported, so a payload
can name nothing but these classes.

Example:
    >>> from dtorch.errors import KernelError
    >>> encode_error(KernelError("add failed"))
    ('KernelError', 'add failed')
    >>> encode_error(ZeroDivisionError("division by zero"))
    ('DTorchError', 'ZeroDivisionError: division by zero')
    >>> type(decode_error("KernelError", "add failed")).__name__
    'KernelError'
"""

from __future__ import annotations

from dtorch.comm.promise.base import PromiseStateError
from dtorch.errors import (
    BadReferenceError,
    CommError,
    CommTimeoutError,
    DeserializationError,
    DTorchError,
    FutureTimeoutError,
    GraphError,
    KernelError,
    MeshError,
    MissingFieldError,
    OptionError,
    PeerDiedError,
    PlacementError,
    SerializationError,
    ShapeError,
    UnknownTypeError,
    UnsupportedVersionError,
    WorkerError,
)

#: The only classes an error read from another process can have.
ERROR_CLASSES: dict[str, type[DTorchError]] = {
    cls.__name__: cls
    for cls in (
        DTorchError,
        OptionError,
        MeshError,
        PlacementError,
        ShapeError,
        GraphError,
        SerializationError,
        DeserializationError,
        UnknownTypeError,
        BadReferenceError,
        MissingFieldError,
        UnsupportedVersionError,
        CommError,
        CommTimeoutError,
        PeerDiedError,
        KernelError,
        WorkerError,
        FutureTimeoutError,
        PromiseStateError,
    )
}

#: Messages are cut to this many bytes of UTF-8 (they travel in a fixed-size header).
MAX_MESSAGE = 3000


def cut_message(text: str) -> str:
    """``text`` as valid unicode of at most MAX_MESSAGE UTF-8 bytes (no character is split;
    lone surrogates become "?", which MessagePack could not carry).

    Example:
        >>> len(cut_message("é" * 3000).encode())
        3000
    """
    return text.encode("utf-8", "replace")[:MAX_MESSAGE].decode("utf-8", "ignore")


def encode_error(error: BaseException) -> tuple[str, str]:
    """``(class name, message)`` of ``error``, the class taken from the table."""
    for cls in type(error).__mro__:
        if ERROR_CLASSES.get(cls.__name__) is cls:
            return cls.__name__, cut_message(str(error))
    return "DTorchError", cut_message(f"{type(error).__name__}: {error}")


def decode_error(name: object, message: object) -> DTorchError:
    """The error named ``name`` with ``message``; an unknown name gives a ``DTorchError``."""
    text = cut_message(str(message))
    cls = ERROR_CLASSES.get(name) if isinstance(name, str) else None
    if cls is None:
        return DTorchError(f"{str(name)[:100]} (not a dtorch error class): {text}")
    return cls(text)

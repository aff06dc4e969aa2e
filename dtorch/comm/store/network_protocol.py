"""The network store's protocol: operations, statuses, the schema of every request, the
checks on what arrives, and the limits a store holds to.

A request header is a MessagePack list ``[op, rank, field, ...]``: the rank the connection
joined as (or, for ``JOIN``, joins as), then the operation's arguments; a reply header is
``[status, ...]`` (for a ``GET`` the tensor's ``[dtype code, shape]``, for an ERROR or TIMEOUT
the text). ``parse_header`` unpacks a header and checks each field against ``SCHEMA`` (a tuple
of predicates per operation) before any handler sees it, so a wrong type, a wrong arity, an
out-of-range int or a non-str key is one CommError, never an exception of another kind.
An ``ABORT`` carries a scope and its message (at most ``ABORT_MESSAGE_LIMIT`` characters); a
wait on a key of an aborted scope is answered ``[ABORTED, message]``.
``tensor_meta`` checks a tensor's declared dtype and shape against the bytes that came with
it, on the coordinator before it stores them and on the client before it allocates anything
(a coordinator's reply is input too).

Example:
    >>> import torch
    >>> from dtorch.ir.dtypes import dtype_code
    >>> parse_header(ormsgpack.packb([Op.FINISH, 1, "k"]), SCHEMA)
    (3, [1, 'k'])
    >>> tensor_meta([dtype_code(torch.float32), [2, 3]], 24)
    (torch.float32, (2, 3))
    >>> tensor_meta([dtype_code(torch.float32), [2**28]], 1)
    Traceback (most recent call last):
    ...
    dtorch.errors.CommError: a tensor declared float32[268435456] needs 1073741824 bytes; 1 came
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping
from typing import Any

import ormsgpack
import torch

from dtorch.comm.store.base import ABORT_MESSAGE_LIMIT
from dtorch.errors import CommError, UnknownDtypeError
from dtorch.ir.dtypes import PLAIN_DTYPES, dtype_from_code
from dtorch.options import MAX_WAIT_SECOND

#: The most bytes of tensors one network store holds at a time (all keys of a round): a SET
#: beyond it is refused with a CommError.
MAX_STORE_BYTES = 8 << 30
#: The largest frame a network store's sockets receive (``zmq.MAXMSGSIZE``; a larger one ends
#: the connection). libzmq applies it to the handshake's commands too, so it is what a peer
#: that never passes the handshake can make a listener hold per connection: tensor bytes
#: travel as frames of at most this size, and a header must fit in one.
FRAME_BYTES = 1 << 20
#: The most frames of tensor bytes one message carries (a whole MAX_STORE_BYTES tensor).
MAX_DATA_FRAMES = MAX_STORE_BYTES // FRAME_BYTES
#: The most dimensions a tensor that crosses a network store may declare.
MAX_DIMS = 64
#: The longest store key (characters) and store name a header may carry.
MAX_KEY_CHARS = 4096
#: The most keys one ``DROP`` names (a caller's published keys of one exchange).
MAX_DROP_KEYS = 1 << 16

_INT64 = 1 << 63

Predicate = Callable[[Any], bool]


def is_int(value: Any) -> bool:
    """A MessagePack integer of int64 range (bool is no int here)."""
    return type(value) is int and -_INT64 <= value < _INT64


def is_key(value: Any) -> bool:
    """A non-empty str of at most MAX_KEY_CHARS characters."""
    return type(value) is str and 0 < len(value) <= MAX_KEY_CHARS


def is_scope(value: Any) -> bool:
    """A key's scope: a key without ``/``."""
    return is_key(value) and "/" not in value


def is_message(value: Any) -> bool:
    """An abort message: a str of at most ABORT_MESSAGE_LIMIT characters."""
    return type(value) is str and len(value) <= ABORT_MESSAGE_LIMIT


def is_keys(value: Any) -> bool:
    """A list of at most MAX_DROP_KEYS keys."""
    return type(value) is list and len(value) <= MAX_DROP_KEYS and all(map(is_key, value))


def is_seconds(value: Any) -> bool:
    """A finite, non-negative number of seconds up to MAX_WAIT_SECOND."""
    return type(value) in (int, float) and math.isfinite(value) and 0 <= value <= MAX_WAIT_SECOND


def is_meta(value: Any) -> bool:
    """``[dtype code, [dim, ...]]`` with ints (the values are checked by ``tensor_meta``)."""
    if type(value) is not list or len(value) != 2 or not is_int(value[0]):
        return False
    shape = value[1]
    return type(shape) is list and len(shape) <= MAX_DIMS and all(map(is_int, shape))


class Op(enum.IntEnum):
    """Request operations (the first element of a request header; the rank comes second)."""

    JOIN = 0
    SET = 1
    GET = 2
    FINISH = 3
    WAIT = 4
    BARRIER = 5
    CLEAR = 6
    LEAVE = 7
    ABORT = 8
    ABORTED = 9
    DROP = 10


class Status(enum.IntEnum):
    """Reply statuses (the first element of a reply header)."""

    OK = 0
    ERROR = 1
    TIMEOUT = 2
    ABORTED = 3  # the key's scope was aborted: the text is the abort's message


#: The fields of each operation after the op code: the rank first, then the arguments.
SCHEMA: dict[int, tuple[Predicate, ...]] = {
    Op.JOIN: (is_int, is_key, is_int),  # rank, scoped store key, world size
    Op.SET: (is_int, is_key, is_int, is_meta),  # rank, key, get_count, [dtype code, shape]
    Op.GET: (is_int, is_key, is_seconds),  # rank, key, timeout
    Op.FINISH: (is_int, is_key),
    Op.WAIT: (is_int, is_key, is_seconds),
    Op.BARRIER: (is_int, is_seconds),
    Op.CLEAR: (is_int,),
    Op.LEAVE: (is_int,),
    Op.ABORT: (is_int, is_scope, is_message),  # rank, scope, why
    Op.ABORTED: (is_int, is_scope),  # rank, scope: answered [OK, message or nil]
    Op.DROP: (is_int, is_keys),  # rank, keys it published and no longer needs
}


def parse_header(raw: bytes, schema: Mapping[int, tuple[Predicate, ...]]) -> tuple[int, list]:
    """``(op, fields)`` of a header whose fields pass ``schema[op]``; CommError otherwise.

    Example:
        >>> parse_header(ormsgpack.packb([7, "k"]), {7: (is_key,)})
        (7, ['k'])
    """
    try:
        header = ormsgpack.unpackb(raw)
    except ormsgpack.MsgpackDecodeError:
        raise CommError("a header that is not MessagePack") from None
    if type(header) is not list or not header or not is_int(header[0]):
        raise CommError("a header that is no list starting with an operation code")
    checks = schema.get(header[0])
    if checks is None:
        raise CommError(f"unknown operation {header[0]}")
    fields = header[1:]
    if len(fields) != len(checks) or not all(ok(f) for ok, f in zip(checks, fields, strict=True)):
        raise CommError(f"malformed fields for operation {header[0]}")
    return header[0], fields


def tensor_meta(meta: Any, nbytes: int) -> tuple[torch.dtype, tuple[int, ...]]:
    """The dtype and shape ``meta`` declares, checked against ``nbytes`` bytes of data."""
    if not is_meta(meta):
        raise CommError(f"a tensor description {meta!r:.200} is not [dtype code, [dims]]")
    try:
        dtype = dtype_from_code(meta[0])
    except UnknownDtypeError:
        raise CommError(f"a tensor of unknown dtype code {meta[0]}") from None
    if dtype not in PLAIN_DTYPES:
        raise CommError(f"a tensor of dtype {dtype}: quantized dtypes do not cross a store")
    shape = tuple(meta[1])
    if any(d < 0 for d in shape):
        raise CommError(f"a tensor shape {list(shape)!r:.200} with a negative dimension")
    if math.prod(d for d in shape if d) * dtype.itemsize >= 1 << 63:  # strides would overflow
        raise CommError(f"a tensor shape {list(shape)!r:.200} too large for any tensor")
    needed = math.prod(shape) * dtype.itemsize
    if needed != nbytes:
        name = str(dtype).removeprefix("torch.")
        declared = f"{name}{list(shape)}"
        raise CommError(f"a tensor declared {declared} needs {needed} bytes; {nbytes} came")
    return dtype, shape

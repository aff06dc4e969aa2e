"""The payload frame and the MessagePack backend.

A payload is::

    offset 0   magic b"DTSZ", format version (u16), flags (u16, 0), document size (u64),
               data section size (u64)                        -- 24 bytes, little endian
    offset 24  the MessagePack document (node table, see dtorch.serialization.writer)
    then       zero padding to a multiple of 64, and the data section (raw tensor bytes,
               each 64-byte aligned), present only when it is not empty

The version sits in the fixed header so a newer payload is refused before its document is
parsed. Sizes are checked against the bytes actually given before anything is allocated.
MessagePack is the only encoding: a payload is data, never code.

Example:
    >>> payload = b"".join(frame(b"\\x90", [], 0))
    >>> version, document, section = unframe(memoryview(payload))
    >>> version, bytes(document), section.nbytes
    (1, b'\\x90', 0)
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgpack
import ormsgpack

from dtorch.errors import DeserializationError, SerializationError, UnsupportedVersionError

MAGIC = b"DTSZ"
#: The format version this dtorch writes; it reads every version from 1 up to this one.
FORMAT_VERSION = 1
ALIGN = 64
_HEADER = struct.Struct("<4sHHQQ")
HEADER_SIZE = _HEADER.size


def aligned(n: int) -> int:
    """``n`` rounded up to a multiple of ALIGN."""
    return -(-n // ALIGN) * ALIGN


def frame(
    document: bytes, blobs: list[memoryview], data_size: int, version: int = FORMAT_VERSION
) -> list[Any]:
    """Every part of a payload, in order: header, document, padding, aligned blobs."""
    parts: list[Any] = [_HEADER.pack(MAGIC, version, 0, len(document), data_size)]
    parts.append(document)
    if data_size:
        doc_end = HEADER_SIZE + len(document)
        parts.append(bytes(aligned(doc_end) - doc_end))
        position = 0
        for blob in blobs:
            start = aligned(position)
            parts.append(bytes(start - position))
            parts.append(blob)
            position = start + blob.nbytes
    return parts


def unframe(view: memoryview) -> tuple[int, memoryview, memoryview]:
    """Version, document and data section of a payload (DeserializationError if malformed)."""
    version, doc_size, data_size = checked_header(view, view.nbytes)
    doc_end = HEADER_SIZE + doc_size
    return version, view[HEADER_SIZE:doc_end], view[view.nbytes - data_size :]


def checked_header(head: bytes | memoryview, total: int) -> tuple[int, int, int]:
    """Version, document size and data size from the first HEADER_SIZE bytes of a payload of
    ``total`` bytes (DeserializationError unless they are a header that adds up to ``total``):
    a file's reader checks it before it holds the rest.

    Example:
        >>> head = frame(b"abc", [], 0)[0]
        >>> checked_header(head, HEADER_SIZE + 3)
        (1, 3, 0)
    """
    if total < HEADER_SIZE or len(head) < HEADER_SIZE:
        raise DeserializationError(f"a dtorch payload is at least {HEADER_SIZE} bytes, got {total}")
    magic, version, flags, doc_size, data_size = _HEADER.unpack_from(head)
    if magic != MAGIC:
        raise DeserializationError(
            f"not a dtorch payload: it starts with {bytes(magic)!r}, expected {MAGIC!r}"
        )
    check_version(version)
    if flags:
        raise DeserializationError(f"payload flags {flags:#x} are not known (expected 0)")
    doc_end = HEADER_SIZE + doc_size
    expected = aligned(doc_end) + data_size if data_size else doc_end
    if expected != total:
        raise DeserializationError(
            f"payload declares a {doc_size}-byte document and a {data_size}-byte data section "
            f"({expected} bytes in all) but holds {total} bytes"
        )
    return version, doc_size, data_size


def check_version(version: int) -> None:
    """Refuse versions this dtorch cannot read."""
    if version > FORMAT_VERSION:
        raise UnsupportedVersionError(
            f"payload format version {version} is newer than this dtorch reads (versions 1.."
            f"{FORMAT_VERSION}); read it with a newer dtorch"
        )
    if version < 1:
        raise DeserializationError(f"payload format version {version} is not valid (first is 1)")


@dataclass(frozen=True, slots=True)
class Backend:
    """One MessagePack library: ``pack`` a document to bytes, ``unpack`` bytes to a document."""

    name: str
    pack: Callable[[Any], bytes]
    unpack: Callable[[memoryview], Any]


_ORMSGPACK_OPTIONS = (
    ormsgpack.OPT_PASSTHROUGH_DATACLASS
    | ormsgpack.OPT_PASSTHROUGH_DATETIME
    | ormsgpack.OPT_PASSTHROUGH_SUBCLASS
    | ormsgpack.OPT_PASSTHROUGH_UUID
)


def _ormsgpack_pack(document: Any) -> bytes:
    return ormsgpack.packb(document, option=_ORMSGPACK_OPTIONS)


def _ormsgpack_unpack(view: memoryview) -> Any:
    return ormsgpack.unpackb(view)


def _msgpack_pack(document: Any) -> bytes:
    return bytes(msgpack.packb(document, use_bin_type=True))


def _msgpack_unpack(view: memoryview) -> Any:
    # Tuples for arrays: tuple fields then need no conversion. The default size limits are
    # the input's length, so a declared length can never allocate more than the input holds.
    return msgpack.unpackb(view, use_list=False, raw=False)


ORMSGPACK = Backend("ormsgpack", _ormsgpack_pack, _ormsgpack_unpack)
MSGPACK = Backend("msgpack", _msgpack_pack, _msgpack_unpack)
#: Measured fastest on this codec (benchmarks/serialization.py --backends): ormsgpack packs
#: about twice as fast, msgpack unpacks arrays straight into the tuples records hold.
MIXED = Backend("ormsgpack+msgpack", _ormsgpack_pack, _msgpack_unpack)
DEFAULT_BACKEND = MIXED


def pack(backend: Backend, document: Any) -> bytes:
    """``backend.pack`` with its errors as SerializationError."""
    try:
        return backend.pack(document)
    except (TypeError, ValueError, OverflowError) as exc:
        raise SerializationError(
            f"MessagePack cannot hold a value of this object ({exc}); ints must fit 64 bits "
            f"and strings must be valid unicode"
        ) from exc


def unpack(backend: Backend, view: memoryview) -> Any:
    """``backend.unpack`` with its errors as DeserializationError."""
    try:
        return backend.unpack(view)
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        raise DeserializationError(f"corrupt MessagePack document: {exc}") from None

"""The wire format of the two channels: the records a receiver gets and how frames map to them.

PUB-SUB (controller -> every worker): ``[message id, kind, *parts]``, the id an 8-byte
little-endian unsigned integer that starts at 0 and rises by one per publisher. PUSH-PULL
(workers -> controller): ``[sender, kind, *parts]``, the sender a 4-byte little-endian unsigned
integer. ``kind`` is a short tag chosen by the caller (``b"execute"``, ``b"ready"``, ...); the
parts are the payload, opaque to the transport. The real sockets and the in-process twins
share this module, so both check a message the same way.

Example:
    >>> frames = [encode_id(0), b"execute", b"payload"]
    >>> message = MessageReader("inproc://doc").read(frames)
    >>> message.id, message.kind, bytes(message.parts[0])
    (0, b'execute', b'payload')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dtorch.errors import MessageGapError, TransportError

#: Parts of this many bytes or more are sent without a copy (``copy=False``): below it a copy
#: is cheaper than the bookkeeping of a zero-copy frame (pyzmq's own threshold is the same).
LARGE_FRAME = 64 * 1024

#: What a caller may pass as a part: anything with a contiguous buffer of bytes.
Part = bytes | bytearray | memoryview

ID_BYTES = 8
SENDER_BYTES = 4
_MAX_SENDER = (1 << (8 * SENDER_BYTES)) - 1


@dataclass(frozen=True, slots=True)
class Message:
    """One PUB-SUB message: its id in the publisher's sequence, its kind and its payload frames.

    ``parts`` are read-only views of the received frames (zero-copy for the real sockets; each
    view keeps its frame alive).

    Example:
        >>> Message(3, b"destroy", ()).kind
        b'destroy'
    """

    id: int
    kind: bytes
    parts: tuple[memoryview, ...]


@dataclass(frozen=True, slots=True)
class Envelope:
    """One PUSH-PULL message: who sent it (a worker's number), its kind and its payload frames.

    Example:
        >>> Envelope(1, b"ready", (memoryview(b"cpu:0"),)).sender
        1
    """

    sender: int
    kind: bytes
    parts: tuple[memoryview, ...]


def encode_id(message_id: int) -> bytes:
    """The id frame of message ``message_id``.

    Example:
        >>> encode_id(1)
        b'\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00'
    """
    return message_id.to_bytes(ID_BYTES, "little")


def encode_sender(sender: int) -> bytes:
    """The sender frame of worker ``sender`` (0 .. 2**32 - 1); TransportError otherwise.

    Example:
        >>> encode_sender(2)
        b'\\x02\\x00\\x00\\x00'
    """
    if not isinstance(sender, int) or not 0 <= sender <= _MAX_SENDER:
        raise TransportError(f"a sender is an integer in 0..{_MAX_SENDER}, got {sender!r}")
    return sender.to_bytes(SENDER_BYTES, "little")


def as_part(part: Part, index: int) -> memoryview:
    """``part`` as a contiguous byte view, checked before any frame of its message is sent.

    Example:
        >>> as_part(bytearray(b"ab"), 0).nbytes
        2
    """
    try:
        view = memoryview(part)
    except TypeError:
        raise TypeError(
            f"part {index} of a message is a {type(part).__name__}, not a bytes-like object"
        ) from None
    if not view.contiguous:
        raise TypeError(f"part {index} of a message is not a contiguous buffer")
    return view


def check_kind(kind: bytes) -> bytes:
    """``kind`` if it is bytes (a str would be a silent encoding choice); TypeError otherwise.

    Example:
        >>> check_kind(b"ready")
        b'ready'
    """
    if not isinstance(kind, bytes):
        raise TypeError(f"a message kind is bytes, got {type(kind).__name__} {kind!r}")
    return kind


class MessageReader:
    """Turns the frames a subscriber receives into Messages, checking the id sequence.

    The first message must have id 0 (with ``join_late``: any id, for a subscriber that may
    join a running channel, such as heartbeats) and each next one the previous id + 1. A gap,
    a repeat, a message of fewer than 2 frames or an id frame that is not 8 bytes raises
    MessageGapError;
    the reader then stays failed and raises the same error for every later message (a lost
    message is never skipped over, never silently resynchronised). Not thread-safe: its
    subscriber serialises the calls.

    Example:
        >>> reader = MessageReader("ipc:///tmp/x.sock")
        >>> reader.read([encode_id(0), b"a"]).id
        0
        >>> reader.read([encode_id(2), b"a"])
        Traceback (most recent call last):
        ...
        dtorch.errors.MessageGapError: subscriber of ipc:///tmp/x.sock expected message id 1, ...
    """

    __slots__ = ("_address", "_expected", "_failure")

    def __init__(self, address: str, *, join_late: bool = False) -> None:
        self._address = address
        self._expected = -1 if join_late else 0  # -1: the first id received starts the count
        self._failure: MessageGapError | None = None

    @property
    def expected(self) -> int:
        """The id the next message must have."""
        return self._expected

    def raise_if_failed(self) -> None:
        """Raise the error of an earlier gap or malformed message again, if there was one."""
        if self._failure is not None:
            raise self._failure

    def read(self, frames: Sequence[bytes | memoryview]) -> Message:
        """The Message of ``frames`` (id, kind, *parts); MessageGapError as described above."""
        expected = self._expected
        if expected < 0 and len(frames) >= 2 and len(frames[0]) == ID_BYTES:
            expected = self._expected = int.from_bytes(frames[0], "little")
        if (  # one test, inline: this runs for every message a worker receives
            self._failure is None
            and len(frames) >= 2
            and len(frames[0]) == ID_BYTES
            and int.from_bytes(frames[0], "little") == expected
        ):
            self._expected = expected + 1
            return Message(expected, bytes(frames[1]), tuple(map(memoryview, frames[2:])))
        if self._failure is None:
            self._failure = self._fail(self._what_is_wrong(frames))
        raise self._failure

    def _what_is_wrong(self, frames: Sequence[bytes | memoryview]) -> str:
        if len(frames) < 2:
            return f"got a message of {len(frames)} frame(s); one has at least 2"
        if len(frames[0]) != ID_BYTES:
            return f"got an id frame of {len(frames[0])} bytes; an id has {ID_BYTES}"
        return self._gap_text(int.from_bytes(frames[0], "little"))

    def _gap_text(self, message_id: int) -> str:
        text = f"expected message id {self._expected}, got {message_id}"
        if message_id < self._expected:
            return f"{text} (a repeated or reordered message)"
        if self._expected == 0:
            return (
                f"{text} (its subscription reached the publisher after the first {message_id} "
                "message(s): the publisher must wait_subscribers before its first send)"
            )
        return f"{text} ({message_id - self._expected} message(s) lost)"

    def _fail(self, what: str) -> MessageGapError:
        return MessageGapError(f"subscriber of {self._address} {what}")


def read_envelope(frames: Sequence[bytes | memoryview], address: str) -> Envelope:
    """The Envelope of ``frames`` (sender, kind, *parts); TransportError if malformed.

    Example:
        >>> read_envelope([encode_sender(3), b"ready"], "inproc://doc").sender
        3
    """
    if len(frames) < 2:
        raise TransportError(
            f"puller at {address} got a message of {len(frames)} frame(s); one has at least 2"
        )
    raw_sender = frames[0]
    if len(raw_sender) != SENDER_BYTES:
        raise TransportError(
            f"puller at {address} got a sender frame of {len(raw_sender)} bytes; "
            f"a sender has {SENDER_BYTES}"
        )
    sender = int.from_bytes(raw_sender, "little")
    return Envelope(sender, bytes(frames[1]), tuple(map(memoryview, frames[2:])))

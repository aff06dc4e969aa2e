"""The wire format of the two channels: the records a receiver gets and how frames map to them.

PUB-SUB (controller -> workers): ``[head, kind, *parts]``, the head 12 bytes: the addressee
(4-byte little-endian unsigned: a subscriber's party number, or ``EVERYONE``) then the message
id (8-byte little-endian unsigned), which starts at 0 and rises by one per publisher and
addressee. The addressee leads so that ZeroMQ's prefix subscriptions filter on it in the
publisher: a worker subscribes to ``topic(EVERYONE)`` and ``topic(its party)``, and a message
for another worker never wakes it. Each addressee's ids form a sequence of their own, so a
subscriber still sees every id of every sequence it receives, and checks each. PUSH-PULL
(workers -> controller): ``[sender, kind, *parts]``, the sender a 4-byte little-endian unsigned
integer. ``kind`` is a short tag chosen by the caller (``b"execute"``, ``b"ready"``, ...); the
parts are the payload, opaque to the transport. The real sockets and the in-process twins
share this module, so both check a message the same way.

Example:
    >>> frames = [encode_id(0), b"execute", b"payload"]
    >>> message = MessageReader("inproc://doc").read(frames)
    >>> message.id, message.kind, bytes(message.parts[0]), message.to == EVERYONE
    (0, b'execute', b'payload', True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dtorch.errors import MessageGapError, TransportError, raised_anew

#: Parts of this many bytes or more are sent without a copy (``copy=False``): below it a copy
#: is cheaper than the bookkeeping of a zero-copy frame (pyzmq's own threshold is the same).
LARGE_FRAME = 64 * 1024

#: What a caller may pass as a part: anything with a contiguous buffer of bytes.
Part = bytes | bytearray | memoryview

ID_BYTES = 8
TOPIC_BYTES = 4
HEAD_BYTES = TOPIC_BYTES + ID_BYTES
SENDER_BYTES = 4
#: The addressee of a message for every subscriber (the largest 4-byte party number).
EVERYONE = (1 << (8 * TOPIC_BYTES)) - 1
#: The largest frame a puller takes (its ``MAXMSGSIZE``, which bounds an unauthenticated
#: peer's handshake commands too): a pusher sends a larger part in frames of this size.
MAX_FRAME = 1 << 20
#: In a sender frame, the flag of a message whose parts travel in pieces (see ``pieces``).
CHUNKED = 1 << (8 * SENDER_BYTES - 1)
_MAX_SENDER = CHUNKED - 1
_COUNT_BYTES = 4


@dataclass(frozen=True, slots=True)
class Message:
    """One PUB-SUB message: its id in its addressee's sequence, its kind, its payload frames
    and its addressee (a party number, or ``EVERYONE``).

    ``parts`` are read-only views of the received frames (zero-copy for the real sockets; each
    view keeps its frame alive).

    Example:
        >>> Message(3, b"destroy", ()).kind, Message(0, b"release", (), to=2).to
        (b'destroy', 2)
    """

    id: int
    kind: bytes
    parts: tuple[memoryview, ...]
    to: int = EVERYONE


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


def topic(to: int) -> bytes:
    """The subscription prefix of messages for addressee ``to`` (a party number or EVERYONE);
    TransportError for anything else.

    Example:
        >>> topic(2), topic(EVERYONE)
        (b'\\x02\\x00\\x00\\x00', b'\\xff\\xff\\xff\\xff')
    """
    if type(to) is not int or not 0 <= to <= EVERYONE:
        raise TransportError(f"an addressee is a party number in 0..{EVERYONE}, got {to!r}")
    return to.to_bytes(TOPIC_BYTES, "little")


def subscriptions(party: int | None) -> tuple[bytes, ...]:
    """The prefixes a subscriber of ``party`` subscribes to: its own topic, then everyone's
    (no party: the empty prefix, every message).

    Example:
        >>> subscriptions(None), len(subscriptions(3))
        ((b'',), 2)
    """
    return (b"",) if party is None else (topic(party), topic(EVERYONE))


def encode_id(message_id: int, to: int = EVERYONE) -> bytes:
    """The head frame of message ``message_id`` of addressee ``to``'s sequence.

    Example:
        >>> encode_id(1).hex(" ")
        'ff ff ff ff 01 00 00 00 00 00 00 00'
    """
    return topic(to) + message_id.to_bytes(ID_BYTES, "little")


def encode_sender(sender: int) -> bytes:
    """The sender frame of worker ``sender`` (0 .. 2**31 - 1); TransportError otherwise.

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
    """Turns the frames a subscriber receives into Messages, checking each id sequence.

    Every addressee's messages are numbered apart (see the module docstring). In each sequence
    the reader receives, the first message must have id 0 (with ``join_late``: any id, for a
    subscriber that may join a running channel, such as heartbeats) and each next one the
    previous id + 1. A reader made for ``party`` also refuses a message addressed to another
    party (its subscriptions should have filtered it out). A gap, a repeat, a message of fewer
    than 2 frames, a head frame that is not 12 bytes or a stray addressee raises
    MessageGapError; the reader then stays failed and raises the same error for every later
    message (a lost message is never skipped over, never silently resynchronised). Not
    thread-safe: its subscriber serialises the calls.

    Example:
        >>> reader = MessageReader("ipc:///tmp/x.sock", party=1)
        >>> reader.read([encode_id(0), b"a"]).id, reader.read([encode_id(0, to=1), b"b"]).to
        (0, 1)
        >>> reader.read([encode_id(2), b"a"])
        Traceback (most recent call last):
        ...
        dtorch.errors.MessageGapError: subscriber of ipc:///tmp/x.sock expected message id 1, ...
    """

    __slots__ = ("_accepts", "_address", "_expected", "_failure", "_join_late")

    def __init__(self, address: str, *, join_late: bool = False, party: int | None = None) -> None:
        self._address = address
        self._join_late = join_late  # the first id of each sequence starts its count
        self._accepts = None if party is None else subscriptions(party)
        self._expected: dict[bytes, int] = {}  # addressee topic -> the id its next message has
        self._failure: MessageGapError | None = None

    @property
    def expected(self) -> int:
        """The id the next message to everyone must have."""
        return self._expected.get(topic(EVERYONE), 0)

    def raise_if_failed(self) -> None:
        """Raise the error of an earlier gap or malformed message again, if there was one."""
        if self._failure is not None:
            raise raised_anew(self._failure)

    def read(self, frames: Sequence[bytes | memoryview]) -> Message:
        """The Message of ``frames`` (head, kind, *parts); MessageGapError as described above."""
        if self._failure is None and len(frames) >= 2 and len(head := frames[0]) == HEAD_BYTES:
            to = bytes(head[:TOPIC_BYTES])  # one test path, inline: this runs per message
            message_id = int.from_bytes(head[TOPIC_BYTES:], "little")
            expected = self._expected.get(to, message_id if self._join_late else 0)
            if message_id == expected and (self._accepts is None or to in self._accepts):
                self._expected[to] = expected + 1
                return Message(
                    expected,
                    bytes(frames[1]),
                    tuple(map(memoryview, frames[2:])),
                    int.from_bytes(to, "little"),
                )
        if self._failure is None:
            self._failure = self._fail(self._what_is_wrong(frames))
        raise raised_anew(self._failure)

    def _what_is_wrong(self, frames: Sequence[bytes | memoryview]) -> str:
        if len(frames) < 2:
            return f"got a message of {len(frames)} frame(s); one has at least 2"
        head = frames[0]
        if len(head) != HEAD_BYTES:
            return f"got a head frame of {len(head)} bytes; a head has {HEAD_BYTES}"
        to = bytes(head[:TOPIC_BYTES])
        if self._accepts is not None and to not in self._accepts:
            return f"got a message for party {int.from_bytes(to, 'little')}"
        expected = self._expected.get(to, 0)
        return self._gap_text(expected, int.from_bytes(head[TOPIC_BYTES:], "little"), to)

    @staticmethod
    def _gap_text(expected: int, message_id: int, to: bytes) -> str:
        party = int.from_bytes(to, "little")
        sequence = "" if party == EVERYONE else f" (to party {party})"
        text = f"expected message id {expected}{sequence}, got {message_id}"
        if message_id < expected:
            return f"{text} (a repeated or reordered message)"
        if expected == 0:
            return (
                f"{text} (its subscription reached the publisher after the first {message_id} "
                "message(s): the publisher must wait_subscribers before its first send)"
            )
        return f"{text} ({message_id - expected} message(s) lost)"

    def _fail(self, what: str) -> MessageGapError:
        return MessageGapError(f"subscriber of {self._address} {what}")


def _size(part: Part) -> int:
    return part.nbytes if type(part) is memoryview else len(part)


def push_frames(sender_frame: bytes, parts: Sequence[Part]) -> tuple[bytes, Sequence[Part]]:
    """The sender frame and the frames after the kind of a PUSH-PULL message: ``parts`` as they
    are, or, if one is larger than ``MAX_FRAME``, a layout (each part's number of frames, 4
    bytes little-endian each) then every part in frames of at most ``MAX_FRAME`` bytes (views,
    no copy), the sender frame flagged ``CHUNKED``.

    Example:
        >>> head, frames = push_frames(encode_sender(1), [b"a", bytes(MAX_FRAME + 1)])
        >>> head, [len(f) for f in frames]
        (b'\\x01\\x00\\x00\\x80', [8, 1, 1048576, 1])
    """
    if all(_size(part) <= MAX_FRAME for part in parts):
        return sender_frame, parts
    counts, frames = [], []
    for part in parts:
        view = memoryview(part).cast("B")
        pieces = [view[at : at + MAX_FRAME] for at in range(0, len(view), MAX_FRAME)] or [view]
        counts.append(len(pieces))
        frames.extend(pieces)
    layout = b"".join(count.to_bytes(_COUNT_BYTES, "little") for count in counts)
    flagged = (int.from_bytes(sender_frame, "little") | CHUNKED).to_bytes(SENDER_BYTES, "little")
    return flagged, [layout, *frames]


def _joined(frames: Sequence[bytes | memoryview], address: str) -> tuple[memoryview, ...]:
    """The parts of a ``CHUNKED`` message from its layout and frames; MessageGapError (a
    malformed message) if they do not match."""
    layout, rest = memoryview(frames[0]), frames[1:]
    counts = [
        int.from_bytes(layout[at : at + _COUNT_BYTES], "little")
        for at in range(0, len(layout), _COUNT_BYTES)
    ]
    if not counts or len(layout) % _COUNT_BYTES or 0 in counts or sum(counts) != len(rest):
        shown = f"{counts[:8]}" if len(counts) <= 8 else f"{counts[:8]} (+{len(counts) - 8})"
        raise MessageGapError(
            f"puller at {address} got a message in pieces whose layout {shown} does not "
            f"match its {len(rest)} frame(s)"
        )
    parts, at = [], 0
    for count in counts:
        pieces = rest[at : at + count]
        parts.append(memoryview(pieces[0] if count == 1 else b"".join(pieces)))
        at += count
    return tuple(parts)


def read_envelope(frames: Sequence[bytes | memoryview], address: str) -> Envelope:
    """The Envelope of ``frames`` (sender, kind, *parts); MessageGapError (a TransportError)
    if malformed.

    Example:
        >>> read_envelope([encode_sender(3), b"ready"], "inproc://doc").sender
        3
    """
    if len(frames) < 2:
        raise MessageGapError(
            f"puller at {address} got a message of {len(frames)} frame(s); one has at least 2"
        )
    raw_sender = frames[0]
    if len(raw_sender) != SENDER_BYTES:
        raise MessageGapError(
            f"puller at {address} got a sender frame of {len(raw_sender)} bytes; "
            f"a sender has {SENDER_BYTES}"
        )
    sender = int.from_bytes(raw_sender, "little")
    if sender & CHUNKED and len(frames) > 2:
        return Envelope(sender & _MAX_SENDER, bytes(frames[1]), _joined(frames[2:], address))
    if sender & CHUNKED:
        raise MessageGapError(f"puller at {address} got a message in pieces with no layout")
    return Envelope(sender, bytes(frames[1]), tuple(map(memoryview, frames[2:])))

"""Span: the file, line and column of the user code that recorded an operator.

Example:
    >>> from dtorch.ir.span import Span
    >>> Span("model.py", 12, 4)
    model.py:12:4
    >>> Span.unknown().is_unknown()
    True
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass
from types import CodeType


@dataclass(frozen=True, slots=True, repr=False)
class Span:
    r"""A source location; ``line`` and ``column`` are 1-based, 0 when unknown.

    ``file`` is always valid Unicode (UTF-8 encodable: spans travel to worker processes and
    into program files): a path whose bytes are not UTF-8, which Python names with surrogate
    escapes, keeps its other characters and shows each such byte as ``\xNN``; a control
    character shows as its escape (``\n``, ``\x1b``: a span read from a program file reaches
    terminals in messages).

    Example:
        >>> Span("/tmp/caf\udce9/m.py", 3).file
        '/tmp/caf\\xe9/m.py'
    """

    file: str
    line: int
    column: int = 0

    def __post_init__(self) -> None:
        file = self.file
        if file.__class__ is str and not (file.isascii() and file.isprintable()):
            object.__setattr__(self, "file", readable_path(file))  # the usual case: kept

    @classmethod
    def unknown(cls) -> Span:
        return _UNKNOWN

    def is_unknown(self) -> bool:
        return self.line == 0

    def __repr__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


_UNKNOWN = Span("<unknown>", 0, 0)


def readable_path(name: str) -> str:
    r"""``name`` as valid, printable Unicode: the bytes that a surrogate escape stands for (a
    file system name that is not UTF-8, or any lone surrogate) become ``\xNN`` text, and
    every other character ``str.isprintable`` refuses (control characters) its escape.

    Example:
        >>> readable_path("caf\udce9.py"), readable_path("café.py"), readable_path("a\x1b.py")
        ('caf\\xe9.py', 'café.py', 'a\\x1b.py')
    """
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raw = name.encode("utf-8", "surrogateescape" if _escapes_only(name) else "surrogatepass")
        name = raw.decode("utf-8", "backslashreplace")
    if name.isprintable():
        return name
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in name)


def _escapes_only(name: str) -> bool:
    # surrogateescape stands for the bytes 0x80-0xff as U+DC80-U+DCFF; other surrogates
    # (say, from a mangled string) have no byte: surrogatepass writes theirs instead
    return all(not 0xD800 <= ord(c) <= 0xDFFF or 0xDC80 <= ord(c) <= 0xDCFF for c in name)


def caller_span(skip_prefixes: tuple[str, ...], known: int = 0) -> Span:
    """Span of the nearest frame whose file does not start with one of ``skip_prefixes``.

    Recording code passes dtorch's package directory, so the span names the user's line.
    ``known`` is how many frames, from the caller up, certainly are dtorch's own: they are
    skipped without being looked at. Looking costs: Python 3.11 builds a frame object for each
    frame it hands out, and copies the frame into it when the function returns (~0.2 us).
    """
    try:
        frame = sys._getframe(1 + known)
    except ValueError:  # the stack is not that deep: the caller is not under user code
        return _UNKNOWN
    # The usual case: the first frame looked at is a user frame seen before (an entry is made
    # only for a frame outside ``skip_prefixes``), so its file need not be checked again.
    entry = _SPANS.get((id(frame.f_code), frame.f_lasti))
    if entry is not None and entry[2] is skip_prefixes:
        return entry[0]
    while frame is not None and frame.f_code.co_filename.startswith(skip_prefixes):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return _UNKNOWN
    code, lasti = frame.f_code, frame.f_lasti
    key = (id(code), lasti)
    entry = _SPANS.get(key)
    if entry is None or entry[2] is not skip_prefixes:
        if len(_SPANS) >= _SPANS_LIMIT:
            _SPANS.clear()
        entry = _SPANS[key] = (_span_at(code, lasti), code, skip_prefixes)
    return entry[0]


#: (id(code), instruction offset) -> (its Span, the code object, the skip_prefixes it was
#: found under) for user frames. Keyed by the code object's id: hashing a code object hashes
#: its bytecode and constants (0.7 us for a module's); the entry holds the code, so the id
#: names it while cached. A cache: clearing it only costs recomputation, and one Span object
#: per source location lets the codec write a line's span once however many operators use it.
_SPANS: dict[tuple[int, int], tuple[Span, CodeType, tuple[str, ...]]] = {}
_SPANS_LIMIT = 8192


def _span_at(code: CodeType, lasti: int) -> Span:
    """The Span of one instruction."""
    line, column = 0, 0
    if hasattr(code, "co_positions"):
        position = next(itertools.islice(code.co_positions(), lasti // 2, None), None)
        if position is not None:
            line = position[0] or 0
            column = 0 if position[2] is None else int(position[2]) + 1
    return Span(code.co_filename, line or code.co_firstlineno, column)

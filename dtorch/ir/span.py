"""Span: the file, line and column of the user code that recorded an operator.

Example:
    >>> from dtorch.ir.span import Span
    >>> Span("model.py", 12, 4)
    model.py:12:4
    >>> Span.unknown().is_unknown()
    True
"""

from __future__ import annotations

import functools
import itertools
import sys
from dataclasses import dataclass
from types import CodeType


@dataclass(frozen=True, slots=True, repr=False)
class Span:
    """A source location; ``line`` and ``column`` are 1-based, 0 when unknown."""

    file: str
    line: int
    column: int = 0

    @classmethod
    def unknown(cls) -> Span:
        return _UNKNOWN

    def is_unknown(self) -> bool:
        return self.line == 0

    def __repr__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


_UNKNOWN = Span("<unknown>", 0, 0)


def caller_span(skip_prefixes: tuple[str, ...]) -> Span:
    """Span of the nearest frame whose file does not start with one of ``skip_prefixes``.

    Recording code passes dtorch's package directory, so the span names the user's line.
    """
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(skip_prefixes):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return _UNKNOWN
    return _span_at(frame.f_code, frame.f_lasti)


@functools.lru_cache(maxsize=8192)
def _span_at(code: CodeType, lasti: int) -> Span:
    """The Span of one instruction. Cached: recording is hot, and one Span object per source
    location lets the codec write a line's span once however many operators it records."""
    line, column = 0, 0
    if hasattr(code, "co_positions"):
        position = next(itertools.islice(code.co_positions(), lasti // 2, None), None)
        if position is not None:
            line = position[0] or 0
            column = 0 if position[2] is None else int(position[2]) + 1
    return Span(code.co_filename, line or code.co_firstlineno, column)

"""The Python operator of each BinaryKind that has one: how the tests' oracle writes
``a <op> b`` (so ``2 <op> t`` and ``t <op> 2`` mean what they mean in torch)."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from dtorch.ir.opkind import BinaryKind

PYTHON_OPS: dict[BinaryKind, Callable[[Any, Any], Any]] = {
    BinaryKind.ADD: operator.add,
    BinaryKind.SUB: operator.sub,
    BinaryKind.MUL: operator.mul,
    BinaryKind.DIV: operator.truediv,
    BinaryKind.POW: operator.pow,
    BinaryKind.EQ: operator.eq,
    BinaryKind.NE: operator.ne,
    BinaryKind.GT: operator.gt,
    BinaryKind.LT: operator.lt,
    BinaryKind.GE: operator.ge,
    BinaryKind.LE: operator.le,
    BinaryKind.FLOOR_DIV: operator.floordiv,
    BinaryKind.REMAINDER: operator.mod,
}

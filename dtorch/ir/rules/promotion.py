"""Result dtypes exactly as torch computes them, learned once per dtype combination.

Each function here runs the torch function of an operator on a one-element tensor the first
time it sees a combination of input dtypes (and the default dtype, which Python floats and
true division follow), and caches the answer: afterwards a rule pays one dict lookup. When
torch rejects a combination, the cached answer is torch's message, raised as DtypeError.

Example:
    >>> import torch
    >>> from dtorch.ir.opkind import BinaryKind
    >>> binary_dtype("div", BinaryKind.DIV, (torch.int64, False), (torch.int64, True))
    torch.float32
    >>> binary_dtype("lt", BinaryKind.LT, (torch.float16, False), (torch.float64, False))
    torch.bool
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NoReturn

import torch
import torch.nn.functional as F

from dtorch.errors import DtypeError, UnsupportedDtypeError
from dtorch.ir.opkind import ActivationKind, BinaryKind, MathKind, OpKind, ReduceKind, ScanKind
from dtorch.ir.rules.torch_ops import (
    ACTIVATION,
    BINARY,
    MATH,
    NUMBERED,
    REDUCE,
    SCAN,
    binary_with_alpha,
    binary_with_scalar,
)
from dtorch.ir.scalar import Scalar, ScalarKind


class Unimplemented(str):
    """A refusal torch raised as NotImplementedError (no kernel for a dtype, a shape): a str
    the caches keep like any other refusal, whose class says which error to raise."""

    __slots__ = ()


_Answer = torch.dtype | str


def refusal(error: Exception, text: str) -> str:
    """``text``, marked ``Unimplemented`` where torch raised ``error`` as NotImplementedError.

    Example:
        >>> type(refusal(NotImplementedError("x"), "x")).__name__
        'Unimplemented'
    """
    return Unimplemented(text) if isinstance(error, NotImplementedError) else text


def refused(name: str, dtype: torch.dtype, message: str) -> NoReturn:
    """Raise torch's refusal ``message`` (``refusal``'s text) of ``dtype`` for ``name``: an
    UnsupportedDtypeError where torch has no kernel for it, else a DtypeError."""
    kind = UnsupportedDtypeError if isinstance(message, Unimplemented) else DtypeError
    raise kind(f"{name}: torch refuses {dtype} here: {message}")


def _probe(thunk: Callable[[], torch.Tensor]) -> _Answer:
    try:
        return thunk().dtype
    except (RuntimeError, TypeError, ValueError) as error:
        return refusal(error, str(error).split("\n", 1)[0])


def _answer(name: str, answer: _Answer) -> torch.dtype:
    if isinstance(answer, str):
        kind = UnsupportedDtypeError if isinstance(answer, Unimplemented) else DtypeError
        raise kind(f"{name}: torch rejects these dtypes: {answer}")
    return answer


def _one(dtype: torch.dtype, zero_dim: bool = False) -> torch.Tensor:
    return torch.ones((), dtype=dtype) if zero_dim else torch.ones(1, dtype=dtype)


#: One binary operand for dtype purposes: its dtype, and whether it is 0-d (a Python scalar
#: counts as a 0-d tensor of its scalar dtype).
Side = tuple[torch.dtype, bool]


@functools.cache
def _binary(kind: BinaryKind, a: Side, b: Side, default: torch.dtype) -> _Answer:
    return _probe(lambda: BINARY[kind](_one(*a), _one(*b)))


def binary_dtype(name: str, kind: BinaryKind, a: Side, b: Side) -> torch.dtype:
    """Result dtype of ``a <kind> b`` (put a leading scalar first, as the kernel does)."""
    return _answer(name, _binary(kind, a, b, torch.get_default_dtype()))


@functools.cache
def _with_alpha(
    kind: BinaryKind, a: Side, b: Side, alpha: ScalarKind, default: torch.dtype
) -> _Answer:
    sample = Scalar(alpha, _SAMPLES[alpha])
    return _probe(lambda: binary_with_alpha(kind, _one(*a), _one(*b), sample))


def alpha_binary_dtype(
    name: str, kind: BinaryKind, a: Side, b: Side, alpha: ScalarKind
) -> torch.dtype:
    """Result dtype of ``add``/``sub(a, b, alpha=)``: torch also refuses a float alpha for
    integer results and a non-bool one for bool results."""
    return _answer(name, _with_alpha(kind, a, b, alpha, torch.get_default_dtype()))


#: A representative value of each scalar kind for the dtype probes.
_SAMPLES: dict[ScalarKind, int | float | bool] = {
    ScalarKind.INT: 1,
    ScalarKind.UINT: 2**63,
    ScalarKind.FLOAT: 1.0,
    ScalarKind.BOOL: True,
}


@functools.cache
def _with_scalar(
    kind: BinaryKind, x: Side, scalar: ScalarKind, first: bool, default: torch.dtype
) -> _Answer:
    sample = Scalar(scalar, _SAMPLES[scalar])
    return _probe(lambda: binary_with_scalar(kind, _one(*x), sample, first))


def scalar_binary_dtype(
    name: str, kind: BinaryKind, x: Side, scalar: ScalarKind, scalar_first: bool
) -> torch.dtype:
    """Result dtype of ``x <kind> number`` (``number <kind> x`` when ``scalar_first``)."""
    return _answer(name, _with_scalar(kind, x, scalar, scalar_first, torch.get_default_dtype()))


@functools.cache
def _unary(kind: MathKind, dtype: torch.dtype, default: torch.dtype) -> _Answer:
    return _probe(lambda: MATH[kind](_one(dtype)))


def math_dtype(name: str, kind: MathKind, dtype: torch.dtype) -> torch.dtype:
    """Result dtype of a BaseMath operator on ``dtype``."""
    return _answer(name, _unary(kind, dtype, torch.get_default_dtype()))


@functools.cache
def _activation(
    kind: ActivationKind, approximate: str, dtype: torch.dtype, default: torch.dtype
) -> _Answer:
    return _probe(lambda: ACTIVATION[kind](_one(dtype), approximate))


def activation_dtype(
    name: str, kind: ActivationKind, approximate: str, dtype: torch.dtype
) -> torch.dtype:
    """Result dtype of an Activation operator on ``dtype``."""
    return _answer(name, _activation(kind, approximate, dtype, torch.get_default_dtype()))


@functools.lru_cache(maxsize=1024)
def _numbers(kind: ActivationKind, alpha: float, beta: float, dtype: torch.dtype) -> _Answer:
    return _probe(lambda: NUMBERED[kind](_one(dtype), alpha, beta))


def activation_numbers_refusal(
    kind: ActivationKind, alpha: float, beta: float, dtype: torch.dtype
) -> str | None:
    """torch's message refusing an Activation's numbers on ``dtype`` (CELU's ``alpha=0``,
    SOFTSHRINK's negative ``lambd``), or None where torch accepts them (or takes none)."""
    if kind not in NUMBERED:
        return None
    answer = _numbers(kind, alpha, beta, dtype)
    return answer if isinstance(answer, str) else None


@functools.cache
def _reduce(kind: ReduceKind, dtype: torch.dtype, out: torch.dtype | None) -> _Answer:
    return _probe(lambda: REDUCE[kind](torch.ones(2, dtype=dtype), (0,), False, out))


def reduce_dtype(
    name: str, kind: ReduceKind, dtype: torch.dtype, out: torch.dtype | None
) -> torch.dtype:
    """Result dtype of a Reduce operator (``out`` is the requested ``dtype=`` argument)."""
    return _answer(name, _reduce(kind, dtype, out))


@functools.cache
def _scan(kind: ScanKind, dtype: torch.dtype, out: torch.dtype | None) -> _Answer:
    return _probe(lambda: SCAN[kind](torch.ones(2, dtype=dtype), 0, out))


def scan_dtype(
    name: str, kind: ScanKind, dtype: torch.dtype, out: torch.dtype | None
) -> torch.dtype:
    """Result dtype of ``cumsum``/``cumprod`` on ``dtype`` (``out``: the ``dtype=`` argument)."""
    return _answer(name, _scan(kind, dtype, out))


def _matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.matmul(a.reshape(1, 1), b.reshape(1, 1))


def _linear(x: torch.Tensor, w: torch.Tensor, *bias: torch.Tensor) -> torch.Tensor:
    return F.linear(x.reshape(1, 1), w.reshape(1, 1), *bias)


#: Multi-tensor operators whose dtype rules the probes learn.
_TENSOR_OPS: dict[OpKind, Callable[..., torch.Tensor]] = {
    OpKind.Matmul: _matmul,
    OpKind.Linear: _linear,
    OpKind.Outer: torch.outer,
    OpKind.Concat: lambda *ts: torch.cat(ts),
    OpKind.Where: torch.where,
    OpKind.Copy: lambda dst, src: dst.copy_(src),
    OpKind.Masked: lambda t, mask: t.masked_fill(mask, 0),
}


#: An operand as a dtype probe sees it: a tensor's Side, or a sample Python number, whose
#: type alone decides (a number does not promote as a 0-d tensor: ``where(c, 0.5, float16
#: 0-d tensor)`` is float16, with a 0-d float32 tensor it is not).
ProbeOperand = Side | bool | int | float

#: The sample number of each scalar kind.
NUMBERS = {ScalarKind.INT: 1, ScalarKind.UINT: 2**63, ScalarKind.FLOAT: 1.0, ScalarKind.BOOL: True}


@functools.cache
def _function(
    fn: Callable[..., torch.Tensor], keys: tuple[tuple[Any, Any], ...], default: torch.dtype
) -> _Answer:
    values = [_one(*k) if isinstance(k[0], torch.dtype) else k[1] for k in keys]
    return _probe(lambda: fn(*values))


def _key(operand: ProbeOperand) -> tuple[Any, Any]:
    # a number keyed with its type: True, 1 and 1.0 are equal keys, not equal probes
    return operand if isinstance(operand, tuple) else (type(operand), operand)


def function_dtype(
    name: str, fn: Callable[..., torch.Tensor], operands: tuple[ProbeOperand, ...]
) -> torch.dtype:
    """Result dtype of torch's ``fn`` on these operands (learned once per combination by
    running it on one-element tensors), or its refusal as a DtypeError naming ``name``.

    Example:
        >>> function_dtype("where", torch.where, ((torch.bool, False), 1.0, (torch.float16, True)))
        torch.float16
    """
    keys = tuple([_key(o) for o in operands])
    return _answer(name, _function(fn, keys, torch.get_default_dtype()))


def tensors_dtype(name: str, kind: OpKind, sides: tuple[Side, ...]) -> torch.dtype:
    """Result dtype of the multi-tensor operator ``kind`` on one tensor per side (dtype and
    whether it is 0-d: 0-d tensors and Python scalars promote differently)."""
    return function_dtype(name, _TENSOR_OPS[kind], sides)


@functools.cache
def _softmax(log: bool, dtype: torch.dtype, out: torch.dtype | None) -> _Answer:
    fn = F.log_softmax if log else F.softmax
    return _probe(lambda: fn(_one(dtype), 0, dtype=out))


def softmax_dtype(name: str, log: bool, dtype: torch.dtype, out: torch.dtype | None) -> torch.dtype:
    """Result dtype of (log_)softmax on ``dtype`` with the requested ``dtype=`` argument."""
    return _answer(name, _softmax(log, dtype, out))


@functools.cache
def _clamp(
    x: Side, low: ScalarKind | None, high: ScalarKind | None, default: torch.dtype
) -> _Answer:
    # the bounds as Python numbers of their kinds: a number promotes as a number, weaker
    # than a 0-d tensor (a 0-d bfloat16 clamped by 1.3 stays bfloat16)
    def run() -> torch.Tensor:
        return torch.clamp(_one(*x), *(None if b is None else NUMBERS[b] for b in (low, high)))

    return _probe(run)


def clamp_dtype(name: str, x: Side, low: ScalarKind | None, high: ScalarKind | None) -> torch.dtype:
    """Result dtype of ``clamp(x, min, max)`` with number bounds of the kinds ``low`` and
    ``high`` (None where absent)."""
    return _answer(name, _clamp(x, low, high, torch.get_default_dtype()))


def cast_is_linear(src: torch.dtype, dst: torch.dtype) -> bool:
    """True when converting each partial value and summing equals converting the sum. An
    integer Partial sums with wrap-around in its own width: converting to a narrower or
    equally wide integer keeps it (arithmetic modulo the smaller power of two), a wider
    integer or any float would not (uint8 parts 200 and 100 hold 44; as int64 they sum to
    300). A float converts linearly to a float that holds every value of it; any other
    conversion rounds each part on its own, and parts that cancel lose everything the
    rounding took (1000.3 - 999.0 in bfloat16 parts is 0.0, the sum's rounding 1.296875).

    Example:
        >>> cast_is_linear(torch.int64, torch.int8), cast_is_linear(torch.int8, torch.int64)
        (True, False)
        >>> [cast_is_linear(*pair) for pair in [(torch.bfloat16, torch.float32),
        ...                                      (torch.float32, torch.bfloat16),
        ...                                      (torch.int8, torch.float32)]]
        [True, False, False]
    """
    if src == dst:
        return True
    if torch.bool in (src, dst):
        return False
    if not (src.is_floating_point or src.is_complex):  # an integer: its wrap-around must stay
        return not (dst.is_floating_point or dst.is_complex) and dst.itemsize <= src.itemsize
    if not (dst.is_floating_point or dst.is_complex):
        return False
    return _holds(dst, src)


def _holds(dst: torch.dtype, src: torch.dtype) -> bool:
    """Whether every value of the floating dtype ``src`` is a value of the floating ``dst``."""
    wide = torch.finfo(dst)
    narrow = torch.finfo(src)
    return wide.eps <= narrow.eps and wide.max >= narrow.max and wide.tiny <= narrow.tiny

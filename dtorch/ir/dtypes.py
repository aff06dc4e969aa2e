"""The dtype table: every torch dtype this torch has, under a stable integer code.

Codes never change meaning: a new dtype gets a new code at the end. A dtype missing from the
running torch is simply absent from the table (older torch versions lack the newest ones).

Example:
    >>> import torch
    >>> from dtorch.ir.dtypes import dtype_code, dtype_from_code
    >>> dtype_from_code(dtype_code(torch.bfloat16)) is torch.bfloat16
    True
"""

from __future__ import annotations

import torch

from dtorch.errors import UnknownDtypeError

# Canonical names in a fixed order; the position is the code. Append only.
_CANONICAL_NAMES: tuple[str, ...] = (
    "float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64",
    "uint8", "bool", "complex32", "complex64", "complex128", "uint16", "uint32", "uint64",
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu",
    "float4_e2m1fn_x2", "qint8", "quint8", "qint32", "quint4x2", "quint2x4",
    "bits1x8", "bits2x4", "bits4x2", "bits8", "bits16",
    "int1", "int2", "int3", "int4", "int5", "int6", "int7",
    "uint1", "uint2", "uint3", "uint4", "uint5", "uint6", "uint7",
)  # fmt: skip


def _build_tables() -> tuple[dict[torch.dtype, int], dict[int, torch.dtype]]:
    to_code: dict[torch.dtype, int] = {}
    for code, name in enumerate(_CANONICAL_NAMES):
        dtype = getattr(torch, name, None)  # fixed names of this table, never user input
        if isinstance(dtype, torch.dtype) and dtype not in to_code:
            to_code[dtype] = code
    return to_code, {code: dtype for dtype, code in to_code.items()}


DTYPE_TO_CODE, CODE_TO_DTYPE = _build_tables()

#: Dtypes whose tensors hold plain elements (not quantized): what kernels and the codec move.
_QUANTIZED = ("qint8", "quint8", "qint32", "quint4x2", "quint2x4")
PLAIN_DTYPES: frozenset[torch.dtype] = frozenset(
    d for d in DTYPE_TO_CODE if not any(d is getattr(torch, n, None) for n in _QUANTIZED)
)


#: Dtypes of fewer than 8 bits an element: torch names them but has no copy kernel for them,
#: so no tensor of dtorch (nor ``from_torch`` of one) can hold them.
SUB_BYTE_DTYPES: frozenset[torch.dtype] = frozenset(
    d
    for n in (*(f"int{b}" for b in range(1, 8)), *(f"uint{b}" for b in range(1, 8)))
    if (d := getattr(torch, n, None)) is not None
)

#: Dtypes torch has no ``add`` for (``"add_stub" not implemented``): a Partial of one could
#: never be summed, so no operator makes one.
UNSUMMABLE_DTYPES: frozenset[torch.dtype] = frozenset(
    d
    for n in (
        "uint16",
        "uint32",
        "uint64",
        "float8_e4m3fn",
        "float8_e4m3fnuz",
        "float8_e5m2",
        "float8_e5m2fnuz",
        "float8_e8m0fnu",
    )
    if (d := getattr(torch, n, None)) is not None
)


def dtype_code(dtype: torch.dtype) -> int:
    """The stable code of ``dtype``."""
    try:
        return DTYPE_TO_CODE[dtype]
    except KeyError:
        raise UnknownDtypeError(f"dtype {dtype} has no code in dtorch's dtype table") from None


def dtype_from_code(code: int) -> torch.dtype:
    """The dtype with stable code ``code`` (UnknownDtypeError if this torch lacks it)."""
    try:
        return CODE_TO_DTYPE[code]
    except (KeyError, TypeError):
        raise UnknownDtypeError(f"dtype code {code!r} is not a dtype of this torch") from None


#: The Python types torch takes as dtypes (``torch.zeros(2, dtype=float)`` is float64).
PYTHON_DTYPES: dict[type, torch.dtype] = {
    float: torch.float64,
    int: torch.int64,
    bool: torch.bool,
    complex: torch.complex128,
}


def is_dtype(value: object) -> bool:
    """Whether ``value`` names a dtype to torch: a torch.dtype or one of ``PYTHON_DTYPES``."""
    return isinstance(value, torch.dtype) or (isinstance(value, type) and value in PYTHON_DTYPES)


def as_dtype(name: str, dtype: object) -> torch.dtype:
    """``dtype`` as a torch.dtype, the Python types ``float``, ``int``, ``bool`` and
    ``complex`` read as torch reads them; anything else a TypeError naming ``name``.

    Example:
        >>> as_dtype("zeros", float), as_dtype("sum", torch.int32)
        (torch.float64, torch.int32)
    """
    if isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, type) and dtype in PYTHON_DTYPES:
        return PYTHON_DTYPES[dtype]
    raise TypeError(
        f"{name}: dtype must be a torch.dtype (e.g. dtorch.float32) or one of the Python types "
        f"float, int, bool, complex; got {dtype!r}"
    )


def scalar_type_name(dtype: torch.dtype) -> str:
    """The name torch's messages give ``dtype`` (its ScalarType: ``Float``, ``Long``, ``Bool``,
    ``BFloat16``), from torch's own legacy tensor type name.

    Example:
        >>> scalar_type_name(torch.float32), scalar_type_name(torch.int64)
        ('Float', 'Long')
    """
    return torch.empty(0, dtype=dtype).type().removeprefix("torch.").removesuffix("Tensor")

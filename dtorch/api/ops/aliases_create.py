"""torch's creation functions that dtorch lacked: ``logspace``, ``range`` (deprecated in
torch, with its warning), ``scalar_tensor``, ``as_tensor``, ``asarray`` and the window
functions ``hann_window``, ``hamming_window``, ``blackman_window``, ``bartlett_window`` and
``kaiser_window``. Each value is computed by torch on the client from the arguments and
distributed as ``from_torch`` (``device_mesh=``, ``placements=``, ``graph=`` as ``linspace``
takes them), so it is the same however sharded; torch's own checks refuse bad arguments.

Example:
    >>> import dtorch
    >>> dtorch.hann_window(4).tolist()
    [0.0, 0.5, 1.0, 0.5]
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import torch

from dtorch.api.create import distribute, float_dtype, from_data, from_dtorch
from dtorch.api.handle import TensorBase
from dtorch.api.tensor import Tensor
from dtorch.errors import ParamError


def made_by_torch(
    make: Callable[..., torch.Tensor], dtype: torch.dtype | None, kw: dict[str, Any], *args: Any
) -> Tensor:
    """torch's ``make(*args)`` in ``dtype`` (else the graph's default), distributed as
    ``from_torch`` with the placement keywords ``kw``.

    Example:
        >>> import torch
        >>> made_by_torch(torch.linspace, None, {}, 0, 1, 3).tolist()
        [0.0, 0.5, 1.0]
    """
    value = make(*args, dtype=float_dtype(kw.get("graph"), dtype))
    return distribute(Tensor, value, **kw)


def logspace(start: Any, end: Any, steps: int, base: float = 10.0, *,
             dtype: torch.dtype | None = None, **kw: Any) -> Tensor:  # fmt: skip
    """torch's ``logspace``: ``base ** linspace(start, end, steps)``.

    Example:
        >>> import dtorch
        >>> dtorch.logspace(0, 2, 3).tolist()
        [1.0, 10.0, 100.0]
    """
    return made_by_torch(torch.logspace, dtype, kw, start, end, steps, base)


def range(start: Any = 0, end: Any = None, step: Any = 1, *,
          dtype: torch.dtype | None = None, **kw: Any) -> Tensor:  # fmt: skip
    """torch's deprecated ``range``: ``start`` to ``end`` INCLUDED by ``step``, in the
    default floating dtype unless ``dtype`` (torch's warning says to use ``arange``).

    Example:
        >>> import warnings, dtorch
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     dtorch.range(1, 3).tolist()
        [1.0, 2.0, 3.0]
    """
    if end is None:
        raise TypeError('range() missing 1 required positional arguments: "end"')
    warnings.warn(
        "dtorch.range is deprecated, as torch.range is: its behavior is inconsistent with "
        "Python's range builtin. Instead, use dtorch.arange, which produces values in "
        "[start, end).",
        UserWarning,
        stacklevel=2,
    )
    made = float_dtype(kw.get("graph"), dtype)
    integral = not (made.is_floating_point or made.is_complex)
    if integral and _truncates_to_zero(step):
        # torch's integer kernel divides by the truncated step: a SIGFPE kills the process
        raise ParamError(f"range: step must be nonzero; got {step!r}, which is 0 in {made}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's own, said above
        return made_by_torch(torch.range, dtype, kw, start, end, step)


def _truncates_to_zero(step: Any) -> bool:
    """Whether ``step`` is a real number (a Python, numpy or 0-d tensor one) whose integer
    part is 0; torch refuses what is not a number, and steps that are not finite, itself."""
    try:
        value = float(step)
    except (TypeError, ValueError, RuntimeError):
        return False
    return math.isfinite(value) and int(value) == 0


def scalar_tensor(s: Any, *, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    """torch's ``scalar_tensor``: the number ``s`` as a 0-d tensor, in the default floating
    dtype unless ``dtype`` (an int too, as torch's).

    Example:
        >>> import dtorch
        >>> t = dtorch.scalar_tensor(3)
        >>> t.item(), t.dtype
        (3.0, torch.float32)
    """
    return made_by_torch(torch.scalar_tensor, dtype, kw, s)


def as_tensor(data: Any, dtype: torch.dtype | None = None, device: Any = None,
              **kw: Any) -> Tensor:  # fmt: skip
    """torch's ``as_tensor``: a dtorch tensor given is returned itself (cast when ``dtype``
    differs, redistributed when ``device``, ``device_mesh`` or ``placements`` ask); other data
    as ``dtorch.tensor`` makes it (always a copy: a mesh holds its own values).

    Example:
        >>> import dtorch
        >>> t = dtorch.ones(2)
        >>> dtorch.as_tensor(t) is t, dtorch.as_tensor([1, 2], dtype=dtorch.float64).tolist()
        (True, [1.0, 2.0])
    """
    if not isinstance(data, TensorBase):
        return from_data(Tensor, data, dtype=dtype, device=device, **kw)
    if (dtype is None or dtype == data.dtype) and device is None and not any(kw.values()):
        return data  # type: ignore[return-value]
    return from_dtorch(data, dtype, {"device": device, **kw})  # type: ignore[arg-type]


def asarray(
    obj: Any, *, dtype: torch.dtype | None = None, device: Any = None,
    copy: bool | None = None, requires_grad: bool = False, **kw: Any,
) -> Tensor:  # fmt: skip
    """torch's ``asarray``: as ``as_tensor``; ``copy=True`` always copies, ``copy=False``
    refuses what needs a copy (a cast, and any data not already a dtorch tensor).

    Example:
        >>> import dtorch
        >>> t = dtorch.ones(2)
        >>> dtorch.asarray(t) is t, dtorch.asarray(t, copy=True) is t
        (True, False)
    """
    if copy is False and not isinstance(obj, TensorBase):
        raise ParamError(
            f"asarray: can't alias {type(obj).__name__} into a dtorch tensor (its values are "
            "copied to the mesh); accepted with copy=False: a dtorch tensor"
        )
    if copy is False and dtype is not None and dtype != obj.dtype:
        raise ParamError(f"asarray: can't alias tensor with dtype {obj.dtype} into dtype {dtype}")
    kw["requires_grad"] = requires_grad
    out = as_tensor(obj, dtype, device, **kw)
    return out.clone() if copy and out is obj else out


def hann_window(window_length: int, periodic: bool = True, *,
                dtype: torch.dtype | None = None, **kw: Any) -> Tensor:  # fmt: skip
    """torch's ``hann_window`` (periodic unless ``periodic=False``), floating dtypes only.

    Example:
        >>> import dtorch
        >>> dtorch.hann_window(3, periodic=False).tolist()
        [0.0, 1.0, 0.0]
    """
    return made_by_torch(torch.hann_window, dtype, kw, window_length, periodic)


def hamming_window(window_length: int, periodic: bool = True, alpha: float = 0.54,
                   beta: float = 0.46, *, dtype: torch.dtype | None = None,
                   **kw: Any) -> Tensor:  # fmt: skip
    """torch's ``hamming_window``: ``alpha - beta * cos(2 pi n / N)``.

    Example:
        >>> import dtorch
        >>> [round(v, 4) for v in dtorch.hamming_window(3, periodic=False).tolist()]
        [0.08, 1.0, 0.08]
    """
    return made_by_torch(torch.hamming_window, dtype, kw, window_length, periodic, alpha, beta)


def blackman_window(window_length: int, periodic: bool = True, *,
                    dtype: torch.dtype | None = None, **kw: Any) -> Tensor:  # fmt: skip
    """torch's ``blackman_window``.

    Example:
        >>> import dtorch
        >>> [round(v, 4) for v in dtorch.blackman_window(3, periodic=False).tolist()]
        [-0.0, 1.0, -0.0]
    """
    return made_by_torch(torch.blackman_window, dtype, kw, window_length, periodic)


def bartlett_window(window_length: int, periodic: bool = True, *,
                    dtype: torch.dtype | None = None, **kw: Any) -> Tensor:  # fmt: skip
    """torch's ``bartlett_window`` (triangular).

    Example:
        >>> import dtorch
        >>> dtorch.bartlett_window(4).tolist()
        [0.0, 0.5, 1.0, 0.5]
    """
    return made_by_torch(torch.bartlett_window, dtype, kw, window_length, periodic)


def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *,
                  dtype: torch.dtype | None = None, **kw: Any) -> Tensor:  # fmt: skip
    """torch's ``kaiser_window`` of shape parameter ``beta``.

    Example:
        >>> import dtorch
        >>> dtorch.kaiser_window(1).tolist()
        [1.0]
    """
    return made_by_torch(torch.kaiser_window, dtype, kw, window_length, periodic, beta)

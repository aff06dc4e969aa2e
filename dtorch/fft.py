"""``dtorch.fft``: torch.fft's functions on dtorch tensors, under torch.fft's names and
arguments; ``torch.fft.rfft(t)`` on a dtorch tensor runs ``dtorch.fft.rfft``
(``dtorch.api.torch_function`` pairs the two namespaces by name).

The transforms (``fft ifft rfft irfft hfft ihfft``, their ``2`` and ``n`` forms) are one Fft
operator each: every device runs torch's own transform on its block, so values are torch's
bit for bit. A transform mixes every element along the dims it transforms, so those dims must
be whole on every device (a shard there is a PlacementError that says to redistribute); the
other dims keep their shards, and a Partial input gives a Partial result (every transform is
linear). ``fftshift``/``ifftshift`` are ``roll``\\ s: a shifted dim may be sharded only where
``roll`` takes it. ``fftfreq`` and
``rfftfreq`` are torch's values, computed on the client and distributed as ``from_torch``
(``device_mesh=``, ``placements=``, ``graph=``). ``out=`` is not taken: dtorch tensors are
values.

torch's own transform of a batch of rows may differ from itself in the last bit with the
number of threads it splits the rows over (its SIMD groups of rows change), so a device's block
can differ from torch's full tensor by an ulp, as torch run with another thread count does.

Example:
    >>> import torch, dtorch
    >>> t = dtorch.tensor([1.0, 2.0, 3.0, 4.0])
    >>> dtorch.fft.rfft(t).tolist()
    [(10+0j), (-2+2j), (-2+0j)]
    >>> torch.fft.irfft(torch.fft.rfft(t), n=4).tolist()
    [1.0, 2.0, 3.0, 4.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from dtorch.api.dims import as_int, normalize_dims
from dtorch.api.ops.aliases_create import made_by_torch
from dtorch.api.ops.repeats import roll
from dtorch.api.record import named_as, record_one, tensor_arg
from dtorch.api.tensor import Tensor
from dtorch.ir.opkind import FftKind
from dtorch.ir.params import FftParam

_NORMS = ("backward", "forward", "ortho")
_TWO_DIM = frozenset(
    {FftKind.FFT2, FftKind.IFFT2, FftKind.RFFT2, FftKind.IRFFT2, FftKind.HFFT2, FftKind.IHFFT2}
)


def _norm(name: str, norm: Any) -> str:
    # torch's norm mode, "" for None ("backward"); torch judges a str when the rule runs it
    if norm is None:
        return ""
    if not isinstance(norm, str):
        raise TypeError(
            f"{name}: norm must be a str or None, got {type(norm).__name__}; accepted: None, "
            + ", ".join(repr(n) for n in _NORMS)
        )
    return norm


def _ints(name: str, what: str, value: Any) -> tuple[int, ...] | None:
    # ``s`` or ``dim`` of the 2-dim and n-dim forms: None, an int, or a sequence of ints
    if value is None:
        return None
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return tuple(as_int(name, what, v) for v in value)
    return (as_int(name, what, value),)


def _one_dim(kind: FftKind, name: str, input: Tensor, n: Any, dim: Any, norm: Any) -> Tensor:
    tensor_arg(name, input)
    size = None if n is None else (as_int(name, "n", n),)
    param = FftParam(kind, size, (as_int(name, "dim", dim),), _norm(name, norm))
    return record_one(name, param, (input,))


def _many_dims(kind: FftKind, name: str, input: Tensor, s: Any, dim: Any, norm: Any) -> Tensor:
    tensor_arg(name, input)
    if dim is None and kind in _TWO_DIM:  # torch's 2-dim forms take no None dim
        raise TypeError(f"{name}(): argument 'dim' must be tuple of ints, not NoneType")
    param = FftParam(kind, _ints(name, "s", s), _ints(name, "dim", dim), _norm(name, norm))
    return record_one(name, param, (input,))


def fft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """``torch.fft.fft``: the discrete Fourier transform along ``dim`` (``n`` points: the
    input cropped or zero-padded), complex.

    Example:
        >>> import dtorch
        >>> dtorch.fft.fft(dtorch.tensor([1.0, 2.0, 3.0, 4.0])).tolist()
        [(10+0j), (-2+2j), (-2+0j), (-2-2j)]
    """
    return _one_dim(FftKind.FFT, "fft.fft", input, n, dim, norm)


def ifft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """``torch.fft.ifft``: the inverse of ``fft`` along ``dim``.

    Example:
        >>> import dtorch
        >>> dtorch.fft.ifft(dtorch.tensor([4.0, 0.0, 0.0, 0.0])).real.tolist()
        [1.0, 1.0, 1.0, 1.0]
    """
    return _one_dim(FftKind.IFFT, "fft.ifft", input, n, dim, norm)


def rfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """``torch.fft.rfft``: ``fft`` of a real input, its ``n // 2 + 1`` non-negative
    frequencies.

    Example:
        >>> import dtorch
        >>> dtorch.fft.rfft(dtorch.tensor([1.0, 1.0, 1.0, 1.0])).tolist()
        [(4+0j), 0j, 0j]
    """
    return _one_dim(FftKind.RFFT, "fft.rfft", input, n, dim, norm)


def irfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """``torch.fft.irfft``: the inverse of ``rfft``, real (``n``: the output's length,
    ``2 * (input's - 1)`` by default).

    Example:
        >>> import dtorch
        >>> dtorch.fft.irfft(dtorch.tensor([4.0, 0.0, 0.0])).tolist()
        [1.0, 1.0, 1.0, 1.0]
    """
    return _one_dim(FftKind.IRFFT, "fft.irfft", input, n, dim, norm)


def hfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """``torch.fft.hfft``: the (real) transform of a Hermitian-symmetric signal given by its
    first half.

    Example:
        >>> import dtorch
        >>> dtorch.fft.hfft(dtorch.tensor([1.0, 0.0, 0.0])).tolist()
        [1.0, 1.0, 1.0, 1.0]
    """
    return _one_dim(FftKind.HFFT, "fft.hfft", input, n, dim, norm)


def ihfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """``torch.fft.ihfft``: the inverse of ``hfft``: a real input's ``n // 2 + 1`` first
    inverse-transform frequencies.

    Example:
        >>> import dtorch
        >>> dtorch.fft.ihfft(dtorch.tensor([1.0, 1.0, 1.0, 1.0])).real.tolist()
        [1.0, 0.0, 0.0]
    """
    return _one_dim(FftKind.IHFFT, "fft.ihfft", input, n, dim, norm)


_LAST_TWO = (-2, -1)


def fft2(input: Tensor, s: Any = None, dim: Any = _LAST_TWO, norm: str | None = None) -> Tensor:
    """``torch.fft.fft2``: ``fftn`` over two dims (the last two by default).

    Example:
        >>> import dtorch
        >>> dtorch.fft.fft2(dtorch.ones(2, 2)).tolist()
        [[(4+0j), 0j], [0j, 0j]]
    """
    return _many_dims(FftKind.FFT2, "fft.fft2", input, s, dim, norm)


def ifft2(input: Tensor, s: Any = None, dim: Any = _LAST_TWO, norm: str | None = None) -> Tensor:
    """``torch.fft.ifft2``: the inverse of ``fft2``.

    Example:
        >>> import dtorch
        >>> dtorch.fft.ifft2(dtorch.ones(2, 2)).tolist()
        [[(1+0j), 0j], [0j, 0j]]
    """
    return _many_dims(FftKind.IFFT2, "fft.ifft2", input, s, dim, norm)


def rfft2(input: Tensor, s: Any = None, dim: Any = _LAST_TWO, norm: str | None = None) -> Tensor:
    """``torch.fft.rfft2``: ``rfftn`` over two dims (the last two by default).

    Example:
        >>> import dtorch
        >>> dtorch.fft.rfft2(dtorch.ones(2, 2)).tolist()
        [[(4+0j), 0j], [0j, 0j]]
    """
    return _many_dims(FftKind.RFFT2, "fft.rfft2", input, s, dim, norm)


def irfft2(input: Tensor, s: Any = None, dim: Any = _LAST_TWO, norm: str | None = None) -> Tensor:
    """``torch.fft.irfft2``: the inverse of ``rfft2``, real.

    Example:
        >>> import dtorch
        >>> dtorch.fft.irfft2(dtorch.tensor([[4.0, 0.0], [0.0, 0.0]])).tolist()
        [[1.0, 1.0], [1.0, 1.0]]
    """
    return _many_dims(FftKind.IRFFT2, "fft.irfft2", input, s, dim, norm)


def hfft2(input: Tensor, s: Any = None, dim: Any = _LAST_TWO, norm: str | None = None) -> Tensor:
    """``torch.fft.hfft2``: ``hfftn`` over two dims (the last two by default).

    Example:
        >>> import dtorch
        >>> dtorch.fft.hfft2(dtorch.tensor([[1.0, 0.0], [0.0, 0.0]])).tolist()
        [[1.0, 1.0], [1.0, 1.0]]
    """
    return _many_dims(FftKind.HFFT2, "fft.hfft2", input, s, dim, norm)


def ihfft2(input: Tensor, s: Any = None, dim: Any = _LAST_TWO, norm: str | None = None) -> Tensor:
    """``torch.fft.ihfft2``: the inverse of ``hfft2``.

    Example:
        >>> import dtorch
        >>> dtorch.fft.ihfft2(dtorch.ones(2, 2)).real.tolist()
        [[1.0, 0.0], [0.0, 0.0]]
    """
    return _many_dims(FftKind.IHFFT2, "fft.ihfft2", input, s, dim, norm)


def fftn(input: Tensor, s: Any = None, dim: Any = None, norm: str | None = None) -> Tensor:
    """``torch.fft.fftn``: the Fourier transform over ``dim`` (by default the last
    ``len(s)`` dims, or every dim).

    Example:
        >>> import dtorch
        >>> dtorch.fft.fftn(dtorch.ones(2, 2)).tolist()
        [[(4+0j), 0j], [0j, 0j]]
    """
    return _many_dims(FftKind.FFTN, "fft.fftn", input, s, dim, norm)


def ifftn(input: Tensor, s: Any = None, dim: Any = None, norm: str | None = None) -> Tensor:
    """``torch.fft.ifftn``: the inverse of ``fftn``.

    Example:
        >>> import dtorch
        >>> dtorch.fft.ifftn(dtorch.ones(2, 2)).tolist()
        [[(1+0j), 0j], [0j, 0j]]
    """
    return _many_dims(FftKind.IFFTN, "fft.ifftn", input, s, dim, norm)


def rfftn(input: Tensor, s: Any = None, dim: Any = None, norm: str | None = None) -> Tensor:
    """``torch.fft.rfftn``: ``fftn`` of a real input, the last transformed dim halved.

    Example:
        >>> import dtorch
        >>> dtorch.fft.rfftn(dtorch.ones(2, 2)).tolist()
        [[(4+0j), 0j], [0j, 0j]]
    """
    return _many_dims(FftKind.RFFTN, "fft.rfftn", input, s, dim, norm)


def irfftn(input: Tensor, s: Any = None, dim: Any = None, norm: str | None = None) -> Tensor:
    """``torch.fft.irfftn``: the inverse of ``rfftn``, real.

    Example:
        >>> import dtorch
        >>> dtorch.fft.irfftn(dtorch.tensor([[4.0, 0.0], [0.0, 0.0]])).tolist()
        [[1.0, 1.0], [1.0, 1.0]]
    """
    return _many_dims(FftKind.IRFFTN, "fft.irfftn", input, s, dim, norm)


def hfftn(input: Tensor, s: Any = None, dim: Any = None, norm: str | None = None) -> Tensor:
    """``torch.fft.hfftn``: the n-dim transform of a Hermitian-symmetric signal, real.

    Example:
        >>> import dtorch
        >>> dtorch.fft.hfftn(dtorch.tensor([[1.0, 0.0], [0.0, 0.0]])).tolist()
        [[1.0, 1.0], [1.0, 1.0]]
    """
    return _many_dims(FftKind.HFFTN, "fft.hfftn", input, s, dim, norm)


def ihfftn(input: Tensor, s: Any = None, dim: Any = None, norm: str | None = None) -> Tensor:
    """``torch.fft.ihfftn``: the inverse of ``hfftn``.

    Example:
        >>> import dtorch
        >>> dtorch.fft.ihfftn(dtorch.ones(2, 2)).real.tolist()
        [[1.0, 0.0], [0.0, 0.0]]
    """
    return _many_dims(FftKind.IHFFTN, "fft.ihfftn", input, s, dim, norm)


def _shifted(name: str, input: Tensor, dim: Any, half: int) -> Tensor:
    # roll each dim by (size + half) // 2: half 0 centres frequency zero, half 1 undoes it
    tensor_arg(name, input)
    dims = tuple(range(input.ndim)) if dim is None else normalize_dims(dim, input.ndim, op=name)
    shifts = [(input.shape[d] + half) // 2 for d in dims]
    with named_as(name, "roll"):
        return roll(input, shifts, dims)


def fftshift(input: Tensor, dim: Any = None) -> Tensor:
    """``torch.fft.fftshift``: frequency zero moved to the centre of ``dim`` (every dim by
    default), a ``roll``.

    Example:
        >>> import dtorch
        >>> dtorch.fft.fftshift(dtorch.tensor([0, 1, 2, -2, -1])).tolist()
        [-2, -1, 0, 1, 2]
    """
    return _shifted("fft.fftshift", input, dim, 0)


def ifftshift(input: Tensor, dim: Any = None) -> Tensor:
    """``torch.fft.ifftshift``: the inverse of ``fftshift``.

    Example:
        >>> import dtorch
        >>> dtorch.fft.ifftshift(dtorch.tensor([-2, -1, 0, 1, 2])).tolist()
        [0, 1, 2, -2, -1]
    """
    return _shifted("fft.ifftshift", input, dim, 1)


def fftfreq(n: int, d: float = 1.0, *, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    """``torch.fft.fftfreq``: the sample frequencies of an ``n``-point ``fft`` with sample
    spacing ``d``, torch's values distributed (``device_mesh=``, ``placements=``, ``graph=``).

    Example:
        >>> import dtorch
        >>> dtorch.fft.fftfreq(4).tolist()
        [0.0, 0.25, -0.5, -0.25]
    """
    return made_by_torch(torch.fft.fftfreq, dtype, kw, n, d)


def rfftfreq(n: int, d: float = 1.0, *, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    """``torch.fft.rfftfreq``: the sample frequencies of an ``n``-point ``rfft`` with sample
    spacing ``d``, torch's values distributed (``device_mesh=``, ``placements=``, ``graph=``).

    Example:
        >>> import dtorch
        >>> dtorch.fft.rfftfreq(4).tolist()
        [0.0, 0.25, 0.5]
    """
    return made_by_torch(torch.fft.rfftfreq, dtype, kw, n, d)


__all__ = [
    "fft",
    "fft2",
    "fftfreq",
    "fftn",
    "fftshift",
    "hfft",
    "hfft2",
    "hfftn",
    "ifft",
    "ifft2",
    "ifftn",
    "ifftshift",
    "ihfft",
    "ihfft2",
    "ihfftn",
    "irfft",
    "irfft2",
    "irfftn",
    "rfft",
    "rfft2",
    "rfftn",
    "rfftfreq",
]

"""Rule of Fft: torch.fft's transforms (``fft``, ``ifft``, ``rfft``, ``irfft``, ``hfft``,
``ihfft`` and their ``2``/``n`` forms) over some dims of one tensor.

A transform mixes every element along the dims it transforms, so those dims must be whole on
every device: a shard of them is refused (redistribute them first). The other dims keep their
shards, each device transforming its own block. Every transform is linear over the reals (the
real-input and real-output forms too: ``irfft`` of a sum is the sum of the ``irfft``\\ s), so
a Partial input gives a Partial result. Shapes and dtypes of the results are torch's own, from
running the function on meta tensors (its argument checks included); the dtypes torch's CPU
kernels refuse (half, bfloat16) are learned by running it once on a tiny tensor.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.opkind import FftKind
    >>> from dtorch.ir.params import FftParam
    >>> from dtorch.ir.placement import Shard
    >>> x = Operand(1, (4, 8), torch.float32, init_device_mesh("cpu", 2), (Shard(0),))
    >>> out = fft_rule("fft.rfft", FftParam(FftKind.RFFT), (x,)).outputs[0]
    >>> out.shape, out.dtype, out.placements
    ((4, 5), torch.complex64, (Shard(dim=0),))
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from dtorch.errors import DimError, DtypeError, ParamError, ShapeError, UnsupportedDtypeError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import FftKind, OpKind
from dtorch.ir.params import FftParam, OpParam
from dtorch.ir.rules.base import Inference, OutputMeta, Rule, all_replicate
from dtorch.ir.rules.signature import fresh_labels, one_output, signature

_SIG = signature(
    "R -> R", "Si -> Si", "P -> P",
    legend="i: a dim the transform does not transform",
    hint="redistribute the transformed dims to Replicate first: a transform needs each of "
    "its dims whole on every device",
)  # fmt: skip

#: torch's function of each kind, and how many dims its ``dim`` defaults to (0: the n-dim
#: forms, whose default follows ``s``).
_FUNCTIONS: dict[FftKind, tuple[Callable[..., torch.Tensor], int]] = {
    FftKind.FFT: (torch.fft.fft, 1),
    FftKind.IFFT: (torch.fft.ifft, 1),
    FftKind.RFFT: (torch.fft.rfft, 1),
    FftKind.IRFFT: (torch.fft.irfft, 1),
    FftKind.HFFT: (torch.fft.hfft, 1),
    FftKind.IHFFT: (torch.fft.ihfft, 1),
    FftKind.FFT2: (torch.fft.fft2, 2),
    FftKind.IFFT2: (torch.fft.ifft2, 2),
    FftKind.RFFT2: (torch.fft.rfft2, 2),
    FftKind.IRFFT2: (torch.fft.irfft2, 2),
    FftKind.HFFT2: (torch.fft.hfft2, 2),
    FftKind.IHFFT2: (torch.fft.ihfft2, 2),
    FftKind.FFTN: (torch.fft.fftn, 0),
    FftKind.IFFTN: (torch.fft.ifftn, 0),
    FftKind.RFFTN: (torch.fft.rfftn, 0),
    FftKind.IRFFTN: (torch.fft.irfftn, 0),
    FftKind.HFFTN: (torch.fft.hfftn, 0),
    FftKind.IHFFTN: (torch.fft.ihfftn, 0),
}


#: The transforms of a real input (torch refuses a complex one).
_REAL_INPUT = frozenset(
    {FftKind.RFFT, FftKind.RFFT2, FftKind.RFFTN, FftKind.IHFFT, FftKind.IHFFT2, FftKind.IHFFTN}
)
_REAL = "float32, float64, integers, bool"


def run_fft(param: FftParam, x: torch.Tensor) -> torch.Tensor:
    """torch's transform of ``param`` on ``x`` (a local block, or a meta tensor).

    Example:
        >>> run_fft(FftParam(FftKind.RFFT, s=(4,)), torch.ones(2)).tolist()
        [(2+0j), (1-1j), 0j]
    """
    fn, ndims = _FUNCTIONS[param.fn]
    norm = param.norm or None
    if ndims == 1:  # n and dim are ints there
        n = None if param.s is None else param.s[0]
        return fn(x, n, -1 if param.dim is None else param.dim[0], norm)
    dim = (-2, -1) if param.dim is None and ndims == 2 else param.dim
    return fn(x, param.s, dim, norm)


def transformed_dims(param: FftParam, ndim: int) -> tuple[int, ...]:
    """The dims ``param`` transforms in a tensor of ``ndim`` dims (torch's defaults: the last
    one, the last two, or for the n-dim forms the last ``len(s)`` or every dim).

    Example:
        >>> transformed_dims(FftParam(FftKind.FFTN, s=(4,)), 3)
        (2,)
    """
    ndims = _FUNCTIONS[param.fn][1]
    if param.dim is not None:
        dims = param.dim
    elif ndims:
        dims = tuple(range(-ndims, 0))
    else:
        dims = tuple(range(-len(param.s), 0)) if param.s is not None else tuple(range(ndim))
    return tuple(sorted(d % ndim for d in dims)) if ndim else ()


@functools.cache
def _refusal(nothing: FftParam | None, fn: FftKind, dtype: torch.dtype) -> tuple[str, bool]:
    """torch's message when its CPU kernel refuses ``dtype`` for ``fn``'s transform (''
    if it takes it), and whether torch has no kernel for the dtype at all (meta tensors take
    half, which the CPU kernels do not). ``nothing``: a call that transforms no dim (its own
    ``s``/``dim``, which torch judges apart: it copies complex32, refuses half)."""
    try:
        run_fft(nothing or FftParam(fn), torch.ones(2, 2, dtype=dtype))
    except (RuntimeError, TypeError) as error:
        message = str(error).strip().split("\n", 1)[0]
        return message, message.startswith("Unsupported dtype")
    return "", False


def _meta(name: str, param: FftParam, x: Operand) -> torch.Tensor:
    """The result's shape and dtype: torch's transform on a meta tensor (its own checks, in
    its order), then the dtype check of its CPU kernel where some dim is transformed."""
    try:
        meta = run_fft(param, torch.empty(x.shape, dtype=x.dtype, device="meta"))
    except IndexError as error:  # a dim out of range
        raise DimError(f"{name}: {str(error).strip()}") from None
    except (RuntimeError, ValueError) as error:  # torch's argument and dtype checks
        cpu, _ = _refusal(None, param.fn, x.dtype)  # its CPU kernel's words are clearer
        raise _refused(name, param, cpu or str(error).strip()) from None
    message, _ = _refusal(param if not transformed_dims(param, x.ndim) else None, param.fn,
                          x.dtype)  # fmt: skip
    if message:
        raise _refused(name, param, message)
    return meta


def _refused(name: str, param: FftParam, message: str) -> Exception:
    """torch's refusal of the call as dtorch's error of its kind."""
    if message.startswith(("Unsupported dtype", "MKL FFT doesn't")):
        accepted = _REAL if param.fn in _REAL_INPUT else f"{_REAL}, complex64, complex128"
        return UnsupportedDtypeError(f"{name}: {message}; accepted: {accepted}")
    if "expects a real" in message or message.startswith("Only supports floating-point"):
        return DtypeError(f"{name}: {message}; accepted: {_REAL}")
    if message.startswith("Invalid normalization mode"):
        return ParamError(f"{name}: {message}; accepted: None, 'backward', 'forward', 'ortho'")
    return ShapeError(f"{name}: {message}")


def fft_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """torch.fft's ``param.fn``: transformed dims whole, the others' shards kept, P kept."""
    assert isinstance(param, FftParam)
    (x,) = inputs
    meta = _meta(name, param, x)
    shape = tuple(meta.shape)
    if all_replicate(inputs):
        return Inference((OutputMeta(shape, meta.dtype, x.placements),))
    dims = transformed_dims(param, x.ndim)
    out_labels = tuple(-1000 - d if d in dims else d for d in range(x.ndim))  # not the input's
    labels = fresh_labels(x.ndim, dims)
    return one_output(name, _SIG, inputs, (labels,), out_labels, shape, meta.dtype)


RULES: dict[OpKind, Rule] = {OpKind.Fft: fft_rule}

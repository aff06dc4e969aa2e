"""``dtorch.nn.init``: torch.nn.init's initialisers on dtorch tensors and Parameters, with
torch's signatures, defaults, fan computation and errors; each fills the tensor in place and
returns it.

The random ones draw exactly what torch draws for the same generator (torch's default one
when ``generator`` is None), however the tensor is sharded, and advance the generator as
torch does (``dtorch.api.ops.random_fill``): after ``torch.manual_seed(s)``,
``init.kaiming_uniform_(w)`` gathers to the tensor ``torch.nn.init.kaiming_uniform_`` gives
a contiguous torch tensor of ``w``'s shape and dtype. ``orthogonal_`` and ``sparse_`` are
torch's own, run on the client on a torch tensor of ``w``'s shape (a QR of one draw, a draw
with rows zeroed per column: whole-tensor computations) and written into ``w``'s shards,
so they hold torch's values whatever the placements; the client holds ``w`` whole once.

Example:
    >>> import torch, dtorch
    >>> from dtorch.nn import init
    >>> mesh = dtorch.init_device_mesh("cpu", 2)
    >>> w = dtorch.empty(5, 3, device_mesh=mesh, placements=[dtorch.Shard(0)])
    >>> _ = torch.manual_seed(0)
    >>> got = init.kaiming_uniform_(w, a=5 ** 0.5).to_torch()
    >>> _ = torch.manual_seed(0)
    >>> torch.equal(got, torch.nn.init.kaiming_uniform_(torch.empty(5, 3), a=5 ** 0.5))
    True
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.create import create, distribute
from dtorch.api.handle import TensorBase
from dtorch.api.ops.convert import assign, cast
from dtorch.api.ops.random_fill import creatable_placements, drawn_layout, fill_random
from dtorch.api.record import tensor_arg
from dtorch.api.strides import contiguous_strides
from dtorch.ir.opkind import CreateKind

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

__all__ = [
    "calculate_gain",
    "constant_",
    "dirac_",
    "eye_",
    "kaiming_normal_",
    "kaiming_uniform_",
    "normal_",
    "ones_",
    "orthogonal_",
    "sparse_",
    "trunc_normal_",
    "uniform_",
    "xavier_normal_",
    "xavier_uniform_",
    "zeros_",
]


def calculate_gain(nonlinearity: str, param: int | float | None = None) -> float:
    """torch's ``calculate_gain``: the recommended gain for ``nonlinearity`` (``param``: the
    negative slope of ``leaky_relu``); torch's own table and errors.

    Example:
        >>> from dtorch.nn import init
        >>> init.calculate_gain("relu") == 2 ** 0.5, init.calculate_gain("tanh")
        (True, 1.6666666666666667)
    """
    return torch.nn.init.calculate_gain(nonlinearity, param)  # type: ignore[arg-type]


def _calculate_fan_in_and_fan_out(tensor: Any) -> tuple[int, int]:
    """torch's (fan_in, fan_out) of a weight of ``tensor``'s shape: dim 1 and dim 0 times the
    product of the other dims; ValueError under 2 dims. From the shape alone (torch's indexes
    the tensor, which here would record operators).

    Example:
        >>> import dtorch
        >>> _calculate_fan_in_and_fan_out(dtorch.empty(8, 4, 3, 3))
        (36, 72)
    """
    shape = tuple(tensor.shape)
    if len(shape) < 2:
        raise ValueError(
            "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions"
        )
    receptive_field_size = math.prod(shape[2:])
    return shape[1] * receptive_field_size, shape[0] * receptive_field_size


def _calculate_correct_fan(tensor: Any, mode: str) -> int:
    # torch's: fan_in or fan_out by ``mode`` (either case), ValueError for another
    mode = mode.lower()
    valid_modes = ["fan_in", "fan_out"]
    if mode not in valid_modes:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid_modes}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(
    tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: torch.Generator | None = None
) -> Tensor:
    """torch's ``uniform_``: ``tensor`` filled from U(``a``, ``b``).

    Example:
        >>> import torch, dtorch
        >>> from dtorch.nn import init
        >>> g, ref = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
        >>> got = init.uniform_(dtorch.empty(4), -2, 2, generator=g).to_torch()
        >>> torch.equal(got, torch.nn.init.uniform_(torch.empty(4), -2, 2, generator=ref))
        True
    """
    return tensor.uniform_(a, b, generator=generator)


def normal_(
    tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: torch.Generator | None = None
) -> Tensor:
    """torch's ``normal_``: ``tensor`` filled from N(``mean``, ``std``²).

    Example:
        >>> import torch, dtorch
        >>> from dtorch.nn import init
        >>> g, ref = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
        >>> got = init.normal_(dtorch.empty(4), 0.0, 0.02, generator=g).to_torch()
        >>> torch.equal(got, torch.nn.init.normal_(torch.empty(4), 0.0, 0.02, generator=ref))
        True
    """
    return tensor.normal_(mean, std, generator=generator)


def trunc_normal_(
    tensor: Tensor,
    mean: float = 0.0,
    std: float = 1.0,
    a: float = -2.0,
    b: float = 2.0,
    generator: torch.Generator | None = None,
) -> Tensor:
    """torch's ``trunc_normal_``: ``tensor`` filled from N(``mean``, ``std``²) truncated to
    [``a``, ``b``], by torch's own rejection sampler run on the full tensor (its draws depend
    on the values drawn), with its warning when ``mean`` is more than 2 ``std`` outside.

    Example:
        >>> import torch, dtorch
        >>> from dtorch.nn import init
        >>> g, ref = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
        >>> got = init.trunc_normal_(dtorch.empty(4, 4), std=0.02, generator=g).to_torch()
        >>> want = torch.nn.init.trunc_normal_(torch.empty(4, 4), std=0.02, generator=ref)
        >>> torch.equal(got, want)
        True
    """
    args = (mean, std, a, b)
    return fill_random("trunc_normal_", tensor, CreateKind.TRUNC_NORMAL, args, generator)


def orthogonal_(
    tensor: Tensor, gain: float = 1, generator: torch.Generator | None = None
) -> Tensor:
    """torch's ``orthogonal_``: a (semi-)orthogonal matrix from the QR of a normal draw,
    computed by torch on the client (module docstring) and written into ``tensor``.

    Example:
        >>> import torch, dtorch
        >>> from dtorch.nn import init
        >>> g, ref = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
        >>> w = dtorch.empty(4, 3, device_mesh=dtorch.init_device_mesh("cpu", 2),
        ...                  placements=[dtorch.Shard(1)])
        >>> got = init.orthogonal_(w, generator=g).to_torch()
        >>> torch.equal(got, torch.nn.init.orthogonal_(torch.empty(4, 3), generator=ref))
        True
    """
    tensor_arg("orthogonal_", tensor)
    full = torch.empty(tuple(tensor.shape), dtype=tensor.dtype)
    return tensor.copy_(torch.nn.init.orthogonal_(full, gain, generator=generator))


def sparse_(
    tensor: Tensor, sparsity: float, std: float = 0.01, generator: torch.Generator | None = None
) -> Tensor:
    """torch's ``sparse_``: a 2-D ``tensor`` drawn from N(0, ``std``²) (in its memory order,
    as torch draws into it), then a ``sparsity`` fraction of each column zeroed; computed by
    torch on the client (module docstring).

    Example:
        >>> import torch, dtorch
        >>> from dtorch.nn import init
        >>> _ = torch.manual_seed(1)  # torch draws the zeroed rows from the default generator
        >>> got = init.sparse_(dtorch.empty(4, 3), 0.5).to_torch()
        >>> _ = torch.manual_seed(1)
        >>> torch.equal(got, torch.nn.init.sparse_(torch.empty(4, 3), 0.5))
        True
    """
    tensor_arg("sparse_", tensor)
    shape = tuple(tensor.shape)
    strides = drawn_layout(tensor) or contiguous_strides(shape)  # torch draws in this order
    full = torch.empty_strided(shape, strides, dtype=tensor.dtype)
    return tensor.copy_(torch.nn.init.sparse_(full, sparsity, std, generator=generator))


def constant_(tensor: Tensor, val: float) -> Tensor:
    """torch's ``constant_``: ``tensor`` filled with ``val``.

    Example:
        >>> import dtorch
        >>> from dtorch.nn import init
        >>> init.constant_(dtorch.empty(2), 0.5).tolist()
        [0.5, 0.5]
    """
    return tensor.fill_(val)


def ones_(tensor: Tensor) -> Tensor:
    """torch's ``ones_``: ``tensor`` filled with 1.

    Example:
        >>> import dtorch
        >>> from dtorch.nn import init
        >>> init.ones_(dtorch.empty(2)).tolist()
        [1.0, 1.0]
    """
    return tensor.fill_(1.0)


def zeros_(tensor: Tensor) -> Tensor:
    """torch's ``zeros_``: ``tensor`` filled with 0.

    Example:
        >>> import dtorch
        >>> from dtorch.nn import init
        >>> init.zeros_(dtorch.ones(2)).tolist()
        [0.0, 0.0]
    """
    return tensor.zero_()


def eye_(tensor: Tensor) -> Tensor:
    """torch's ``eye_``: a 2-D ``tensor`` filled with the identity matrix (ones where the
    row index equals the column index), whatever its placements.

    Example:
        >>> import dtorch
        >>> from dtorch.nn import init
        >>> init.eye_(dtorch.empty(2, 3)).tolist()
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    """
    tensor_arg("eye_", tensor)
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = (_arange(tensor, n) for n in tensor.shape)
    diagonal = cols.unsqueeze(0) == rows.unsqueeze(1)
    return assign("eye_", tensor, cast(diagonal, tensor.dtype))


def _arange(t: Tensor, n: int) -> Tensor:
    # 0 .. n-1 replicated on t's mesh
    mesh, bounds = t.device_mesh, (0, n, 1)
    return create(
        type(t), CreateKind.ARANGE, (n,), torch.int64, graph=t.graph, device_mesh=mesh,
        device=None, placements=None, args=bounds,
    )  # fmt: skip


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """torch's ``dirac_``: a 3-, 4- or 5-D ``tensor`` filled with the Dirac delta (a
    convolution weight that keeps its input channels), with torch's errors. torch builds the
    full value, which is distributed as ``tensor``'s placements (convolution weights are small).

    Example:
        >>> import dtorch
        >>> from dtorch.nn import init
        >>> init.dirac_(dtorch.empty(2, 2, 3)).tolist()[1]
        [[0.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    """
    tensor_arg("dirac_", tensor)
    full = torch.nn.init.dirac_(torch.empty(tuple(tensor.shape), dtype=tensor.dtype), groups)
    on: dict[str, Any] = {"graph": tensor.graph, "device_mesh": tensor.device_mesh}
    value = distribute(type(tensor), full, placements=creatable_placements(tensor), **on)
    return assign("dirac_", tensor, value)


def xavier_uniform_(
    tensor: Tensor, gain: float = 1.0, generator: torch.Generator | None = None
) -> Tensor:
    """torch's ``xavier_uniform_`` (Glorot): U(-a, a) with a = gain·sqrt(6 / (fan_in +
    fan_out)), computed as torch computes it.

    Example:
        >>> import torch, dtorch
        >>> from dtorch.nn import init
        >>> g, ref = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
        >>> got = init.xavier_uniform_(dtorch.empty(3, 5), generator=g).to_torch()
        >>> torch.equal(got, torch.nn.init.xavier_uniform_(torch.empty(3, 5), generator=ref))
        True
    """
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std
    return tensor.uniform_(-a, a, generator=generator)


def xavier_normal_(
    tensor: Tensor, gain: float = 1.0, generator: torch.Generator | None = None
) -> Tensor:
    """torch's ``xavier_normal_`` (Glorot): N(0, std²) with std = gain·sqrt(2 / (fan_in +
    fan_out)).

    Example:
        >>> import torch, dtorch
        >>> from dtorch.nn import init
        >>> g, ref = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
        >>> got = init.xavier_normal_(dtorch.empty(3, 5), 2.0, generator=g).to_torch()
        >>> torch.equal(got, torch.nn.init.xavier_normal_(torch.empty(3, 5), 2.0, generator=ref))
        True
    """
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return tensor.normal_(0.0, std, generator=generator)


def kaiming_uniform_(
    tensor: Tensor,
    a: float = 0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: torch.Generator | None = None,
) -> Tensor:
    """torch's ``kaiming_uniform_`` (He): U(-bound, bound) with bound = sqrt(3)·gain /
    sqrt(fan), ``mode`` choosing the fan; a tensor with no elements is left as it is, with
    torch's warning.

    Example:
        >>> import torch, dtorch
        >>> from dtorch.nn import init
        >>> g, ref = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
        >>> got = init.kaiming_uniform_(dtorch.empty(4, 3), mode="fan_out", generator=g)
        >>> want = torch.nn.init.kaiming_uniform_(torch.empty(4, 3), mode="fan_out", generator=ref)
        >>> torch.equal(got.to_torch(), want)
        True
    """
    if _no_elements(tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)  # before the gain: torch's order of errors
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    return tensor.uniform_(-bound, bound, generator=generator)


def kaiming_normal_(
    tensor: Tensor,
    a: float = 0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: torch.Generator | None = None,
) -> Tensor:
    """torch's ``kaiming_normal_`` (He): N(0, std²) with std = gain / sqrt(fan), ``mode``
    choosing the fan; a tensor with no elements is left as it is, with torch's warning.

    Example:
        >>> import torch, dtorch
        >>> from dtorch.nn import init
        >>> g, ref = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
        >>> got = init.kaiming_normal_(dtorch.empty(4, 3), nonlinearity="relu", generator=g)
        >>> want = torch.nn.init.kaiming_normal_(torch.empty(4, 3), nonlinearity="relu",
        ...                                      generator=ref)
        >>> torch.equal(got.to_torch(), want)
        True
    """
    if _no_elements(tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)  # before the gain: torch's order of errors
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return tensor.normal_(0, std, generator=generator)


def _no_elements(tensor: TensorBase) -> bool:
    # torch's kaiming initialisers leave an empty tensor as it is, warning (at the caller)
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return True
    return False


def _deprecated(new: Callable[..., Tensor], old: str) -> Callable[..., Tensor]:
    """torch's deprecated initialiser ``old`` (``normal`` for ``normal_``): ``new`` with
    torch's FutureWarning."""

    def deprecated_init(*args: Any, **kwargs: Any) -> Tensor:
        warnings.warn(
            f"`nn.init.{old}` is now deprecated in favor of `nn.init.{new.__name__}`.",
            FutureWarning,
            stacklevel=2,
        )
        return new(*args, **kwargs)

    deprecated_init.__name__ = deprecated_init.__qualname__ = old
    deprecated_init.__doc__ = f"Deprecated: ``{new.__name__}``, with torch's FutureWarning."
    return deprecated_init


uniform = _deprecated(uniform_, "uniform")
normal = _deprecated(normal_, "normal")
constant = _deprecated(constant_, "constant")
eye = _deprecated(eye_, "eye")
dirac = _deprecated(dirac_, "dirac")
xavier_uniform = _deprecated(xavier_uniform_, "xavier_uniform")
xavier_normal = _deprecated(xavier_normal_, "xavier_normal")
kaiming_uniform = _deprecated(kaiming_uniform_, "kaiming_uniform")
kaiming_normal = _deprecated(kaiming_normal_, "kaiming_normal")
orthogonal = _deprecated(orthogonal_, "orthogonal")
sparse = _deprecated(sparse_, "sparse")

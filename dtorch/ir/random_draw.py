"""The full tensors of the random Create kinds, drawn exactly as torch draws them.

One table serves both sides of a random operator: the Create kernel regenerates the full
tensor from the operator's generator snapshot and keeps its shard, and the caller draws the
same tensor from its own generator so that it advances as torch's would. Sharing the table
keeps the two from ever drawing differently.

Example:
    >>> import torch
    >>> from dtorch.ir.opkind import CreateKind
    >>> g, ref = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    >>> got = draw(CreateKind.NORMAL, (3,), torch.float32, (2.0, 0.5), g)
    >>> torch.equal(got, torch.empty(3).normal_(2.0, 0.5, generator=ref))
    True
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch

from dtorch.ir.opkind import CreateKind

Shape = tuple[int, ...]
#: (shape, dtype, the operator's args, generator) -> the full tensor torch draws.
Draw = Callable[[Shape, torch.dtype, tuple[Any, ...], torch.Generator], torch.Tensor]
#: (the tensor, the operator's args, generator) -> the tensor filled in place, as torch fills.
Fill = Callable[[torch.Tensor, tuple[Any, ...], torch.Generator], torch.Tensor]


def _rand(shape: Shape, dtype: torch.dtype, args: tuple[Any, ...], g: torch.Generator) -> Any:
    return torch.rand(shape, generator=g, dtype=dtype)


def _randn(shape: Shape, dtype: torch.dtype, args: tuple[Any, ...], g: torch.Generator) -> Any:
    return torch.randn(shape, generator=g, dtype=dtype)


def _randint(shape: Shape, dtype: torch.dtype, args: tuple[Any, ...], g: torch.Generator) -> Any:
    low, high = args
    return torch.randint(int(low), int(high), shape, generator=g, dtype=dtype)


# torch's in-place fills of a tensor (uniform_ and normal_ so that the bounds and the dtype
# are checked as torch checks them; ``torch.rand(...) * std + mean`` would round differently:
# torch fuses them)
def _uniform(t: torch.Tensor, args: tuple[Any, ...], g: torch.Generator) -> Any:
    low, high = args
    return t.uniform_(low, high, generator=g)


def _normal(t: torch.Tensor, args: tuple[Any, ...], g: torch.Generator) -> Any:
    mean, std = args
    return t.normal_(mean, std, generator=g)


# torch's own rejection sampler, whose draws depend on the values drawn: only running it
# on the full tensor gives its values and advances the generator by as much
def _trunc_normal(t: torch.Tensor, args: tuple[Any, ...], g: torch.Generator) -> Any:
    mean, std, a, b = args
    return torch.nn.init.trunc_normal_(t, mean, std, a, b, generator=g)


# the fills of dtorch.api.ops.random_more: torch's own in-place fill of the full tensor, whose
# draws (MKL streams, rejection loops) only it reproduces
def _fill(method: str) -> Fill:
    """The fill that is torch's ``Tensor.<method>(*args)``."""

    def fill(t: torch.Tensor, args: tuple[Any, ...], g: torch.Generator) -> Any:
        return getattr(t, method)(*args, generator=g)

    return fill


# random_'s forms: () all of the dtype's range, (from, to), and (from,) for to=None
def _random(t: torch.Tensor, args: tuple[Any, ...], g: torch.Generator) -> Any:
    bounds = (args[0], None) if len(args) == 1 else args
    return t.random_(*bounds, generator=g)


def _randperm(shape: Shape, dtype: torch.dtype, args: tuple[Any, ...], g: torch.Generator) -> Any:
    return torch.randperm(shape[0], generator=g, dtype=dtype)


#: The random kinds that fill a tensor in place: a fill of a strided view draws into a tensor
#: of its layout (``draw``'s ``strides``), as torch's fill of the view draws.
RANDOM_FILLS: dict[CreateKind, Fill] = {
    CreateKind.UNIFORM: _uniform,
    CreateKind.NORMAL: _normal,
    CreateKind.TRUNC_NORMAL: _trunc_normal,
    CreateKind.EXPONENTIAL: _fill("exponential_"),
    CreateKind.GEOMETRIC: _fill("geometric_"),
    CreateKind.LOG_NORMAL: _fill("log_normal_"),
    CreateKind.CAUCHY: _fill("cauchy_"),
    CreateKind.RANDOM: _random,
    CreateKind.BERNOULLI: _fill("bernoulli_"),
}


def _filled(fill: Fill) -> Draw:
    """The draw that is ``fill`` of a new contiguous tensor."""
    return lambda shape, dtype, args, g: fill(torch.empty(shape, dtype=dtype), args, g)


#: Each random Create kind's draw of its full tensor.
RANDOM_DRAWS: dict[CreateKind, Draw] = {
    CreateKind.RAND: _rand,
    CreateKind.RANDN: _randn,
    CreateKind.RANDINT: _randint,
    CreateKind.RANDPERM: _randperm,
    **{kind: _filled(fill) for kind, fill in RANDOM_FILLS.items()},
}


def draw(
    kind: CreateKind,
    shape: Shape,
    dtype: torch.dtype,
    args: tuple[Any, ...],
    generator: torch.Generator,
    strides: Shape = (),
) -> torch.Tensor:
    """The full tensor of random kind ``kind`` that torch draws from ``generator`` (advancing
    it), with torch's errors for bounds or a dtype it refuses; with ``strides`` (a fill of
    a strided view), drawn into a tensor of that layout, returned contiguous.

    Example:
        >>> import torch
        >>> from dtorch.ir.opkind import CreateKind
        >>> g = torch.Generator().manual_seed(0)
        >>> draw(CreateKind.UNIFORM, (2,), torch.float64, (5.0, 6.0), g).dtype
        torch.float64
    """
    if strides:
        blank = torch.empty_strided(shape, strides, dtype=dtype)
        return RANDOM_FILLS[kind](blank, args, generator).contiguous()
    return RANDOM_DRAWS[kind](shape, dtype, args, generator)


#: Held while a generator's state is copied and then advanced: two threads drawing from one
#: generator would otherwise copy one state twice (equal values where torch gives two draws,
#: each of its draws being one call). Process-wide, as torch's generators are.
_DRAWS = threading.Lock()


def draws() -> threading.Lock:
    """The lock under which a generator's state is copied and advanced (see ``snapshot``)."""
    return _DRAWS


def snapshot(
    kind: CreateKind,
    shape: Shape,
    dtype: torch.dtype,
    args: tuple[Any, ...],
    generator: torch.Generator,
    strides: Shape = (),
) -> torch.Generator:
    """A copy of ``generator`` as it is, then ``generator`` advanced past the ``draw``
    (torch's errors raise here), in one step for other threads: the copy draws on the
    devices what torch would have drawn.

    Example:
        >>> import torch
        >>> from dtorch.ir.opkind import CreateKind
        >>> g = torch.Generator().manual_seed(0)
        >>> copy = snapshot(CreateKind.RANDN, (3,), torch.float32, (), g)
        >>> fresh = torch.Generator().manual_seed(0)
        >>> torch.equal(torch.randn(3, generator=copy), torch.randn(3, generator=fresh))
        True
    """
    with _DRAWS:
        copy = torch.Generator().set_state(generator.get_state())
        draw(kind, shape, dtype, args, generator, strides)
    return copy

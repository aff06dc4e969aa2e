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


def _rand(shape: Shape, dtype: torch.dtype, args: tuple[Any, ...], g: torch.Generator) -> Any:
    return torch.rand(shape, generator=g, dtype=dtype)


def _randn(shape: Shape, dtype: torch.dtype, args: tuple[Any, ...], g: torch.Generator) -> Any:
    return torch.randn(shape, generator=g, dtype=dtype)


def _randint(shape: Shape, dtype: torch.dtype, args: tuple[Any, ...], g: torch.Generator) -> Any:
    low, high = args
    return torch.randint(int(low), int(high), shape, generator=g, dtype=dtype)


# torch's uniform_ and normal_ in place, so the bounds and the dtype are checked as torch
# checks them (``torch.rand(...) * std + mean`` would round differently: torch fuses them)
def _uniform(shape: Shape, dtype: torch.dtype, args: tuple[Any, ...], g: torch.Generator) -> Any:
    low, high = args
    return torch.empty(shape, dtype=dtype).uniform_(low, high, generator=g)


def _normal(shape: Shape, dtype: torch.dtype, args: tuple[Any, ...], g: torch.Generator) -> Any:
    mean, std = args
    return torch.empty(shape, dtype=dtype).normal_(mean, std, generator=g)


# torch's own rejection sampler, whose draws depend on the values drawn: only running it
# on the full tensor gives its values and advances the generator by as much
def _trunc_normal(
    shape: Shape, dtype: torch.dtype, args: tuple[Any, ...], g: torch.Generator
) -> Any:
    mean, std, a, b = args
    full = torch.empty(shape, dtype=dtype)
    return torch.nn.init.trunc_normal_(full, mean, std, a, b, generator=g)


# the fills of dtorch.api.ops.random_more: torch's own in-place fill of the full tensor, whose
# draws (MKL streams, rejection loops) only it reproduces
def _fill(method: str) -> Draw:
    """The draw that is torch's ``Tensor.<method>(*args)`` of a new tensor."""

    def fill(shape: Shape, dtype: torch.dtype, args: tuple[Any, ...], g: torch.Generator) -> Any:
        return getattr(torch.empty(shape, dtype=dtype), method)(*args, generator=g)

    return fill


# random_'s forms: () all of the dtype's range, (from, to), and (from,) for to=None
def _random(shape: Shape, dtype: torch.dtype, args: tuple[Any, ...], g: torch.Generator) -> Any:
    bounds = (args[0], None) if len(args) == 1 else args
    return torch.empty(shape, dtype=dtype).random_(*bounds, generator=g)


def _randperm(shape: Shape, dtype: torch.dtype, args: tuple[Any, ...], g: torch.Generator) -> Any:
    return torch.randperm(shape[0], generator=g, dtype=dtype)


#: Each random Create kind's draw of its full tensor.
RANDOM_DRAWS: dict[CreateKind, Draw] = {
    CreateKind.RAND: _rand,
    CreateKind.RANDN: _randn,
    CreateKind.RANDINT: _randint,
    CreateKind.UNIFORM: _uniform,
    CreateKind.NORMAL: _normal,
    CreateKind.TRUNC_NORMAL: _trunc_normal,
    CreateKind.EXPONENTIAL: _fill("exponential_"),
    CreateKind.GEOMETRIC: _fill("geometric_"),
    CreateKind.LOG_NORMAL: _fill("log_normal_"),
    CreateKind.CAUCHY: _fill("cauchy_"),
    CreateKind.RANDOM: _random,
    CreateKind.BERNOULLI: _fill("bernoulli_"),
    CreateKind.RANDPERM: _randperm,
}


def draw(
    kind: CreateKind,
    shape: Shape,
    dtype: torch.dtype,
    args: tuple[Any, ...],
    generator: torch.Generator,
) -> torch.Tensor:
    """The full tensor of random kind ``kind`` that torch draws from ``generator`` (advancing
    it), with torch's errors for bounds or a dtype it refuses.

    Example:
        >>> import torch
        >>> from dtorch.ir.opkind import CreateKind
        >>> g = torch.Generator().manual_seed(0)
        >>> draw(CreateKind.UNIFORM, (2,), torch.float64, (5.0, 6.0), g).dtype
        torch.float64
    """
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
        draw(kind, shape, dtype, args, generator)
    return copy

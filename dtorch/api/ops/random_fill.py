"""Random fills in place: torch's ``Tensor.normal_`` and ``Tensor.uniform_``, and the core of
``dtorch.nn.init``'s random initialisers (``fill_random``).

A fill records a random Create operator of the tensor's shape, dtype, mesh and placements
(the path of ``dtorch.randn``), then copies it into the tensor in place (``convert.assign``,
the path of ``fill_``), so every alias and view of the tensor sees it and a Partial tensor
stays Partial (the value on the first rank of that mesh dimension, zeros elsewhere). The
operator carries a snapshot of the generator, the devices regenerate the full tensor from it
and keep their shard, and the caller's generator advances as torch's would: the gathered
tensor is bit-identical to torch's fill of the same torch tensor from the same generator
state, however it is sharded: a view torch holds strided (a slice, a transpose) is drawn into
a tensor of its layout (``drawn_layout``), where torch's kernels draw in memory order, and
``normal_`` by another kernel than for a contiguous tensor.

The cost of that: to advance the caller's generator exactly as torch would, the caller draws
the full tensor once too (torch's draws depend on the sizes, and ``trunc_normal_``'s on the
values), so a fill takes the full tensor's memory in the calling process for a moment (as
``dtorch.randn`` does); each device then regenerates it and keeps its shard.

Example:
    >>> import torch, dtorch
    >>> mesh = dtorch.init_device_mesh("cpu", 2)
    >>> t = dtorch.zeros(5, 3, device_mesh=mesh, placements=[dtorch.Shard(0)])
    >>> _ = torch.manual_seed(0)
    >>> got = t.normal_(1.0, 0.5).to_torch()
    >>> _ = torch.manual_seed(0)
    >>> torch.equal(got, torch.zeros(5, 3).normal_(1.0, 0.5)), t.placements
    (True, [Shard(dim=0)])
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.create import create
from dtorch.api.ops.convert import assign, writable
from dtorch.api.record import tensor_arg
from dtorch.api.strides import contiguous_strides, known
from dtorch.errors import (
    DTorchError,
    DtypeError,
    ParamError,
    ShapeError,
    UnsupportedDtypeError,
)
from dtorch.ir.opkind import CreateKind
from dtorch.ir.placement import Placement
from dtorch.ir.random_draw import snapshot
from dtorch.ir.subsplit import marks_problem

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def normal_(
    t: Tensor, mean: float = 0.0, std: float = 1.0, *, generator: torch.Generator | None = None
) -> Tensor:
    """torch's ``Tensor.normal_``: ``t`` filled in place with samples of the normal
    distribution N(``mean``, ``std``²) from ``generator`` (torch's default one if None),
    exactly the values torch draws, however ``t`` is sharded; torch's errors for a negative
    ``std`` or a dtype it cannot fill. Returns ``t``.

    Example:
        >>> import torch, dtorch
        >>> g, ref = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
        >>> t = dtorch.zeros(4, dtype=torch.float64)
        >>> t.normal_(2.0, 0.1, generator=g) is t
        True
        >>> torch.equal(t.to_torch(), torch.zeros(4, dtype=torch.float64).normal_(
        ...     2.0, 0.1, generator=ref))
        True
    """
    return fill_random("normal_", t, CreateKind.NORMAL, (mean, std), generator)


def uniform_(
    t: Tensor,
    from_: Any = None,
    to: float = 1.0,
    *,
    generator: torch.Generator | None = None,
    **kw: Any,
) -> Tensor:
    """torch's ``Tensor.uniform_(from=0, to=1, *, generator=None)``: ``t`` filled in place
    with samples of the uniform distribution on [``from``, ``to``) from ``generator``
    (torch's default one if None), exactly the values torch draws, however ``t`` is sharded.
    ``from`` is a Python keyword: give it positionally, as ``from_=``, or as ``**{"from":
    x}``. torch's errors for ``from > to`` or a dtype it cannot fill. Returns ``t``.

    Example:
        >>> import torch, dtorch
        >>> g, ref = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
        >>> got = dtorch.zeros(3).uniform_(-1, to=1, generator=g).to_torch()
        >>> torch.equal(got, torch.zeros(3).uniform_(-1, 1, generator=ref))
        True
    """
    low = _from_bound(from_, kw)
    return fill_random("uniform_", t, CreateKind.UNIFORM, (low, to), generator)


def _from_bound(from_: Any, kw: dict[str, Any]) -> Any:
    """``uniform_``'s lower bound: ``from_`` or torch's keyword ``from`` (default 0)."""
    unknown = set(kw) - {"from"}
    if unknown:
        raise TypeError(f"uniform_() got an unexpected keyword argument '{sorted(unknown)[0]}'")
    if "from" in kw and from_ is not None:
        raise TypeError("uniform_() got multiple values for argument 'from'")
    low = kw.get("from", from_)
    return 0.0 if low is None else low


def fill_random(
    name: str,
    t: Tensor,
    kind: CreateKind,
    args: tuple[Any, ...],
    generator: torch.Generator | None,
    *,
    exact: bool = False,
) -> Tensor:
    """``t`` filled in place with the full tensor of random Create ``kind`` (its ``args``:
    ``dtorch.ir.random_draw``) that torch draws from ``generator``; the caller's
    generator advances as torch's, and torch's errors (bounds, dtype) raise here, at the
    call, before anything is recorded. The operator carries ``args`` as floats, or as given
    with ``exact`` (``random_``'s int bounds). Returns ``t``.

    Example:
        >>> import torch, dtorch
        >>> from dtorch.ir.opkind import CreateKind
        >>> g, ref = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
        >>> t = dtorch.zeros(6)
        >>> _ = fill_random("trunc_normal_", t, CreateKind.TRUNC_NORMAL, (0.0, 1.0, -1.0, 1.0), g)
        >>> want = torch.nn.init.trunc_normal_(torch.zeros(6), 0.0, 1.0, -1.0, 1.0, generator=ref)
        >>> torch.equal(t.to_torch(), want)
        True
    """
    tensor_arg(name, t)
    writable(name, t)  # before the caller's generator advances
    source = generator_source(name, generator)
    shape = tuple(t.shape)
    layout = drawn_layout(t)
    with t._graph._writes:  # a write: not between another thread's read and write-back
        with torch_refusals(name):  # torch's checks, then the caller's generator advances
            copy = snapshot(kind, shape, t.dtype, args, source, layout)
        numbers = args if exact else tuple(float(a) for a in args)
        fresh = create(
            type(t), kind, shape, t.dtype, graph=t.graph, device_mesh=t.device_mesh,
            device=None, placements=creatable_placements(t), args=numbers, generator=copy,
            strides=layout,
        )  # fmt: skip
        return assign(name, t, fresh)


#: The dtorch class of a torch refusal (a RuntimeError) whose words say what was refused;
#: any other is a ParamError (a bound, a probability, a count out of range).
_REFUSED = (
    (re.compile(r"dtype|floating.point"), DtypeError),
    (re.compile(r"\bdim(ension)?\b"), ShapeError),
)


@contextlib.contextmanager
def torch_refusals(name: str) -> Iterator[None]:
    """torch's refusals of a random function's arguments, raised inside, raised as dtorch's
    classes (each derives from torch's, so ``except RuntimeError`` still catches it) with
    torch's words after ``name``: no kernel for a dtype (NotImplementedError) is an
    UnsupportedDtypeError, a refused dtype a DtypeError, a refused shape a ShapeError, any
    other value (torch's RuntimeError or ValueError) a ParamError. dtorch's own pass as
    they are.

    Example:
        >>> import torch
        >>> try:
        ...     with torch_refusals("normal_"):
        ...         torch.zeros(2).normal_(0.0, -1.0)
        ... except RuntimeError as error:
        ...     print(type(error).__name__, error)
        ParamError normal_: normal expects std >= 0.0, but found std -1
    """
    try:
        yield
    except DTorchError:
        raise
    except NotImplementedError as error:
        raise UnsupportedDtypeError(f"{name}: {error}") from None
    except (RuntimeError, ValueError) as error:
        kind = next((k for words, k in _REFUSED if words.search(str(error))), ParamError)
        raise kind(f"{name}: {error}") from None


def drawn_layout(t: Tensor) -> tuple[int, ...]:
    """The strides a fill of ``t`` draws into: ``t``'s global strides where torch would hold
    it strided (a slice, a transpose: torch's fill draws in its memory order, and ``normal_``
    of a tensor that is not contiguous by another kernel), else () (a contiguous draw).

    Example:
        >>> import dtorch
        >>> t = dtorch.zeros(4, 3)
        >>> drawn_layout(t), drawn_layout(t.t()), drawn_layout(t[:, 1:])
        ((), (1, 3), (3, 1))
    """
    strides = known(t)
    if strides is None or t.numel() <= 1:
        return ()
    row_major = contiguous_strides(tuple(t.shape))
    pairs = zip(t.shape, strides, row_major, strict=True)
    return () if all(n == 1 or s == r for n, s, r in pairs) else tuple(strides)


def generator_source(name: str, generator: Any) -> torch.Generator:
    """The generator a random function draws from: the given one, or torch's default (a CPU
    generator; anything else is a TypeError naming ``name``).

    Example:
        >>> import torch
        >>> generator_source("normal_", None) is torch.default_generator
        True
    """
    source = torch.default_generator if generator is None else generator
    if not isinstance(source, torch.Generator) or source.device.type != "cpu":
        raise TypeError(f"{name}: generator must be a CPU torch.Generator; got {source!r}")
    return source


def creatable_placements(t: Tensor) -> list[Placement] | None:
    """``t``'s placements, for a new tensor to be made in (each device then makes only its
    shard, its piece of every segment where ``t`` is marked); None (Replicate, for ``assign``
    to move to ``t``'s) where creation cannot make them (``marks_problem``).

    Example:
        >>> import dtorch
        >>> mesh = dtorch.init_device_mesh("cpu", 2)
        >>> creatable_placements(dtorch.zeros(4, device_mesh=mesh, placements=[dtorch.Shard(0)]))
        [Shard(dim=0)]
    """
    placements = list(t._operand.placements)
    return None if marks_problem(t._operand.shape, placements) else placements

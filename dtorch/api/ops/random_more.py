"""torch's other random functions: ``normal`` (its four forms), ``bernoulli`` (and the
methods ``bernoulli``/``bernoulli_``), the in-place fills ``random_``, ``exponential_``,
``geometric_``, ``log_normal_`` and ``cauchy_``, ``randperm`` and ``randint_like``; and
``poisson``, ``binomial`` and ``multinomial``, which wait for their input.

The same guarantee as ``dtorch.rand`` and ``Tensor.normal_`` (``random_fill``): after the
same seed, or from the same ``generator``, the gathered result is bit-identical to torch's
on the full tensor however it is sharded (a strided view's fill drawn into its layout, as
``random_fill.drawn_layout`` says), and the caller's generator advances
as torch's does. A fill is a random Create operator (its draw: ``dtorch.ir.random_draw``,
torch's own fill of the full tensor) copied into the tensor; ``normal`` and ``bernoulli``
of tensors are the composites torch's CPU kernels are (standard normals scaled and shifted;
a uniform draw compared with the probabilities), so the inputs' placements are kept and
nothing waits; their tensors must be sharded alike (as for ``mean * std``), and a Partial
one is refused before anything is drawn (the draws are not linear in it).

``poisson``, ``binomial`` (rejection samplers, whose draws follow the values) and
``multinomial`` (whose draws follow the values) fetch their input, run torch's own function
in the calling process and distribute the result: they wait for the input. ``poisson`` and
``binomial`` keep the input's shardings (Partial becomes Replicate), ``multinomial``'s
result is Replicate. The value checks that need the data (``normal``'s std >= 0 and
``bernoulli``'s 0 <= p <= 1 for tensors) are not made: they would wait.

Example:
    >>> import torch, dtorch
    >>> mesh = dtorch.init_device_mesh("cpu", 2)
    >>> mean = dtorch.zeros(5, device_mesh=mesh, placements=[dtorch.Shard(0)])
    >>> _ = torch.manual_seed(0)
    >>> got = dtorch.normal(mean, 2.0).to_torch()
    >>> _ = torch.manual_seed(0)
    >>> torch.equal(got, torch.normal(torch.zeros(5), 2.0))
    True
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.create import beside, create, float_dtype
from dtorch.api.dims import as_flag, as_int
from dtorch.api.ops.convert import assign, writable
from dtorch.api.ops.random_fill import (
    creatable_placements,
    drawn_layout,
    fill_random,
    generator_source,
    torch_refusals,
)
from dtorch.api.ops.scalars import as_real
from dtorch.api.record import composite, is_handle, tensor_arg
from dtorch.errors import ParamError, PlacementError, ShapeError, UnsupportedDtypeError
from dtorch.ir.opkind import CreateKind
from dtorch.ir.placement import Partial, Placement, Replicate, Shard
from dtorch.ir.random_draw import snapshot

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


# --- the in-place fills -------------------------------------------------------------------------
def exponential_(
    t: Tensor, lambd: float = 1.0, *, generator: torch.Generator | None = None
) -> Tensor:
    """torch's ``Tensor.exponential_``: ``t`` filled in place with samples of the exponential
    distribution of rate ``lambd``, exactly torch's values however ``t`` is sharded. Returns
    ``t``.

    Example:
        >>> import torch, dtorch
        >>> g, ref = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
        >>> got = dtorch.zeros(4).exponential_(2.0, generator=g).to_torch()
        >>> torch.equal(got, torch.zeros(4).exponential_(2.0, generator=ref))
        True
    """
    lambd = as_real("exponential_: lambd", lambd)
    return fill_random("exponential_", t, CreateKind.EXPONENTIAL, (lambd,), generator)


def geometric_(t: Tensor, p: float, *, generator: torch.Generator | None = None) -> Tensor:
    """torch's ``Tensor.geometric_``: ``t`` filled in place with the number of Bernoulli(``p``)
    trials up to the first success, exactly torch's values however ``t`` is sharded.

    Example:
        >>> import torch, dtorch
        >>> g, ref = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
        >>> got = dtorch.zeros(4).geometric_(0.3, generator=g).to_torch()
        >>> torch.equal(got, torch.zeros(4).geometric_(0.3, generator=ref))
        True
    """
    p = as_real("geometric_: p", p)
    return fill_random("geometric_", t, CreateKind.GEOMETRIC, (p,), generator)


def log_normal_(
    t: Tensor, mean: float = 1.0, std: float = 2.0, *, generator: torch.Generator | None = None
) -> Tensor:
    """torch's ``Tensor.log_normal_``: ``t`` filled in place with exp of N(``mean``,
    ``std``²) samples, exactly torch's values however ``t`` is sharded.

    Example:
        >>> import torch, dtorch
        >>> g, ref = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
        >>> got = dtorch.zeros(4).log_normal_(0.0, 0.5, generator=g).to_torch()
        >>> torch.equal(got, torch.zeros(4).log_normal_(0.0, 0.5, generator=ref))
        True
    """
    args = (as_real("log_normal_: mean", mean), as_real("log_normal_: std", std))
    return fill_random("log_normal_", t, CreateKind.LOG_NORMAL, args, generator)


def cauchy_(
    t: Tensor, median: float = 0.0, sigma: float = 1.0, *, generator: torch.Generator | None = None
) -> Tensor:
    """torch's ``Tensor.cauchy_``: ``t`` filled in place with samples of the Cauchy
    distribution, exactly torch's values however ``t`` is sharded.

    Example:
        >>> import torch, dtorch
        >>> g, ref = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
        >>> got = dtorch.zeros(4).cauchy_(1.0, 2.0, generator=g).to_torch()
        >>> torch.equal(got, torch.zeros(4).cauchy_(1.0, 2.0, generator=ref))
        True
    """
    args = (as_real("cauchy_: median", median), as_real("cauchy_: sigma", sigma))
    return fill_random("cauchy_", t, CreateKind.CAUCHY, args, generator)


def random_(t: Tensor, *args: Any, generator: torch.Generator | None = None, **kw: Any) -> Tensor:
    """torch's ``Tensor.random_``: ``random_()`` (the dtype's whole range, [0, 2**mantissa]
    for floats), ``random_(to)`` ([0, to)) or ``random_(from, to)`` (``to=None``: up to the
    dtype's largest value); ``from`` is a Python keyword: give it positionally or as ``**{"from":
    x}``. Exactly torch's values however ``t`` is sharded; torch's errors for empty ranges.

    Example:
        >>> import torch, dtorch
        >>> g, ref = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
        >>> got = dtorch.zeros(4, dtype=torch.int64).random_(2, 9, generator=g).to_torch()
        >>> torch.equal(got, torch.zeros(4, dtype=torch.int64).random_(2, 9, generator=ref))
        True
    """
    bounds = _random_bounds(args, kw)
    # the bounds kept as given: an int bound may not fit a float exactly
    return fill_random("random_", t, CreateKind.RANDOM, bounds, generator, exact=True)


def _random_bounds(args: tuple[Any, ...], kw: dict[str, Any]) -> tuple[int, ...]:
    """``random_``'s bounds as its draw takes them: (), (from, to) or (from,) for to=None."""
    unknown = set(kw) - {"from", "to"}
    if unknown or len(args) > 2 or len(args) + len(kw) > 2:
        bad = sorted(unknown)[0] if unknown else None
        why = f"unexpected keyword argument '{bad}'" if bad else "takes at most 2 arguments"
        raise TypeError(f"random_() {why}: accepted: random_(), random_(to), random_(from, to)")
    if not args and not kw:
        return ()
    if len(args) == 1 and not kw:  # random_(to)
        return (0, _bound("to", args[0]))
    names = dict(zip(("from", "to"), args, strict=False))
    if set(names) & set(kw):
        raise TypeError(
            f"random_() got multiple values for argument '{sorted(set(names) & set(kw))[0]}'"
        )
    names.update(kw)
    low = _bound("from", names.get("from", 0))
    return (low,) if names.get("to") is None else (low, _bound("to", names["to"]))


def _bound(name: str, value: Any) -> int:
    """A bound of ``random_``: an int, as torch's signature takes (not a bool or a float)."""
    if not isinstance(value, bool):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise TypeError(f"random_(): argument '{name}' must be an int, not {type(value).__name__}")


# --- bernoulli ----------------------------------------------------------------------------------
@composite()
def bernoulli_(t: Tensor, p: Any = 0.5, *, generator: torch.Generator | None = None) -> Tensor:
    """torch's ``Tensor.bernoulli_``: ``t`` filled in place with 1 with probability ``p`` (a
    number, or a floating tensor of probabilities that broadcasts to ``t``), 0 otherwise;
    exactly torch's values however ``t`` is sharded. Returns ``t``. A probability outside
    [0, 1] (or NaN) is refused at the call, as torch refuses it (a tensor's: a wait for one
    bool).

    Example:
        >>> import torch, dtorch
        >>> g, ref = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
        >>> got = dtorch.zeros(6).bernoulli_(0.3, generator=g).to_torch()
        >>> torch.equal(got, torch.zeros(6).bernoulli_(0.3, generator=ref))
        True
    """
    if not is_handle(p) and not isinstance(p, torch.Tensor):
        p = as_real("bernoulli_: p", p)
        return fill_random("bernoulli_", t, CreateKind.BERNOULLI, (p,), generator)
    tensor_arg("bernoulli_", t)
    writable("bernoulli_", t)
    probs = _probabilities("bernoulli_", t, p)
    _no_partial("bernoulli_", probs)
    _refuse_improbable("bernoulli_", probs)
    if torch.broadcast_shapes(tuple(t.shape), tuple(probs.shape)) != tuple(t.shape):
        raise ShapeError(f"bernoulli_: p of shape {list(probs.shape)} does not broadcast to "
                         f"the tensor's shape {list(t.shape)}")  # fmt: skip
    with t._graph._writes:  # drawn in t's memory order, as torch's in-place kernel draws
        ones = _drawn_ones(t, probs, t.dtype, generator, drawn_layout(t))
        return assign("bernoulli_", t, ones)


@composite()
def bernoulli(
    input: Tensor, p: float | None = None, *, generator: torch.Generator | None = None
) -> Tensor:
    """torch's ``bernoulli``: with ``p`` None, 1 where a uniform draw is below ``input``'s
    probability (a floating tensor), else 0, in ``input``'s dtype; with a number ``p``,
    ``empty_like(input).bernoulli_(p)``. Exactly torch's values, ``input``'s placements; a
    probability outside [0, 1] refused at the call (a wait for one bool), as torch does.

    Example:
        >>> import torch, dtorch
        >>> probs = torch.tensor([0.1, 0.9, 0.5, 0.5])
        >>> g, ref = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
        >>> got = dtorch.bernoulli(dtorch.tensor(probs), generator=g).to_torch()
        >>> torch.equal(got, torch.bernoulli(probs, generator=ref))
        True
    """
    tensor_arg("bernoulli", input)
    if p is not None:
        return bernoulli_(input.new_empty(input.shape), p, generator=generator)
    probs = _probabilities("bernoulli", input, input)
    _no_partial("bernoulli", probs)
    _refuse_improbable("bernoulli", probs)
    return _drawn_ones(input, probs, input.dtype, generator)


def _probabilities(name: str, t: Tensor, p: Any) -> Tensor:
    """``p`` as a dtorch tensor on ``t``'s mesh, refused as torch refuses a non-float one."""
    probs = beside(t, p) if isinstance(p, torch.Tensor) else p
    tensor_arg(name, probs)
    if not probs.dtype.is_floating_point:
        raise UnsupportedDtypeError(f"{name}: the probabilities must be a floating tensor "
                                    f"(\"bernoulli_tensor_cpu_p_\" not implemented for "
                                    f"'{probs.dtype}')")  # fmt: skip
    return probs


def _refuse_improbable(name: str, probs: Tensor) -> None:
    """torch's refusal of a probability outside [0, 1] (NaN too), before the generator
    advances: a wait for one bool (whether any entry is out), as torch's eager check."""
    if (~((probs >= 0) & (probs <= 1))).any().item():
        raise ParamError(f"{name}: Expected p_in >= 0 && p_in <= 1 to be true, but got false "
                         "(every probability must lie in [0, 1])")  # fmt: skip


def _refuse_negative_std(std: Tensor) -> None:
    """torch's refusal of a std tensor with a negative (or NaN) entry, before the generator
    advances: a wait for one bool, as torch's eager check."""
    if (~(std >= 0)).any().item():
        raise ParamError("normal: normal expects all elements of std >= 0.0")


def _drawn_ones(
    like: Tensor,
    probs: Tensor,
    dtype: torch.dtype,
    generator: torch.Generator | None,
    layout: tuple[int, ...] = (),
) -> Tensor:
    # torch's CPU kernel: one uniform per element of ``like`` (double for float64
    # probabilities, else float) drawn in ``layout``'s memory order (() row-major: the
    # out-of-place form's legacy-contiguous result), compared with the probability cast
    udt = torch.float64 if probs.dtype == torch.float64 else torch.float32
    shape = tuple(like.shape)
    source = generator_source("bernoulli", generator)
    # rand is uniform_(0, 1) of a new tensor; a strided layout draws as that fill of a view
    kind, bounds = (CreateKind.UNIFORM, (0.0, 1.0)) if layout else (CreateKind.RAND, ())
    copy = snapshot(kind, shape, udt, bounds, source, layout)
    uniform = create(
        type(like), kind, shape, udt, graph=like.graph, device_mesh=like.device_mesh,
        device=None, placements=_drawable(like), args=bounds, generator=copy, strides=layout,
    )  # fmt: skip
    return (uniform < probs.to(udt)).to(dtype)


def _no_partial(name: str, *tensors: Tensor) -> None:
    """The refusal of a Partial operand, before the generator advances: the draws are not
    linear in it."""
    for t in tensors:
        if any(isinstance(p, Partial) for p in t.placements):
            raise PlacementError(f"{name}: got a tensor with placements {list(t.placements)}; "
                                 "accepted: Shard and Replicate (a Partial tensor's draws are "
                                 "not linear in it): redistribute it first")  # fmt: skip


def _drawable(t: Tensor) -> list[Placement] | None:
    """``t``'s placements for a draw used in a computation: Partial is Replicate (a Partial
    draw would hold zeros on all but one rank)."""
    placements = creatable_placements(t)
    if placements is None:
        return None
    return [Replicate() if isinstance(p, Partial) else p for p in placements]


# --- normal -------------------------------------------------------------------------------------
@composite()
def normal(
    mean: Any = 0.0,
    std: Any = 1.0,
    size: Any = None,
    *,
    generator: torch.Generator | None = None,
    **kw: Any,
) -> Tensor:
    """torch's ``normal``: ``normal(mean, std)`` with either or both tensors (shapes
    broadcast; the result has the tensor mean's dtype, else std's), or ``normal(mean, std,
    size)`` with numbers, taking ``dtype``, ``device_mesh``, ``placements`` as ``dtorch.randn``.
    Exactly torch's values; tensor forms keep the tensors' placements. A std tensor with a
    negative (or NaN) entry is refused at the call, as torch refuses it (a wait for one bool).

    Example:
        >>> import torch, dtorch
        >>> g, ref = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
        >>> got = dtorch.normal(1.0, 0.5, (2, 3), generator=g).to_torch()
        >>> torch.equal(got, torch.normal(1.0, 0.5, (2, 3), generator=ref))
        True
    """
    tensors = is_handle(mean), is_handle(std)
    if not any(tensors):
        return _normal_sized(mean, std, size, generator, kw)
    if size is not None or kw:
        raise TypeError("normal(): size, dtype and placements are taken only with a number "
                        "mean and std; accepted: normal(Tensor mean, Tensor std), normal("
                        "Tensor mean, float std), normal(float mean, Tensor std), normal("
                        "float mean, float std, size)")  # fmt: skip
    _no_partial("normal", *[v for v in (mean, std) if is_handle(v)])
    if all(tensors):
        return _normal_tensors(mean, std, generator)
    if tensors[0]:
        return _normal_mean(mean, as_real("normal: std", std), generator)
    return _normal_std(as_real("normal: mean", mean), std, generator)


def _normal_sized(mean: Any, std: Any, size: Any, generator: Any, kw: dict[str, Any]) -> Tensor:
    # normal(float, float, size): a Create operator as dtorch.randn
    from dtorch.api import creation  # import cycle: creation imports Tensor, Tensor this

    if size is None:
        raise TypeError("normal(): with a number mean and std, size is required; accepted: "
                        "normal(float mean, float std, size) or a tensor mean or std")  # fmt: skip
    args = (as_real("normal: mean", mean), as_real("normal: std", std))
    dtype = float_dtype(kw.get("graph"), kw.pop("dtype", None))
    shape = creation._sizes("normal", (size,), {})
    return creation._random(CreateKind.NORMAL, shape, dtype, generator, args, kw)


def _standard(
    like: Tensor, shape: tuple[int, ...], dtype: torch.dtype, args: tuple[float, float],
    generator: Any,
) -> Tensor:  # fmt: skip
    # torch's first step: normal_(args) of the output, drawn in ``like``'s placements
    if not dtype.is_floating_point:
        raise UnsupportedDtypeError(f"normal: \"normal_kernel_cpu\" not implemented for "
                                    f"'{dtype}'; mean and std must be floating")  # fmt: skip
    placements = _drawable(like) if tuple(like.shape) == shape else None
    source = generator_source("normal", generator)
    with torch_refusals("normal"):
        copy = snapshot(CreateKind.NORMAL, shape, dtype, args, source)
    return create(
        type(like), CreateKind.NORMAL, shape, dtype, graph=like.graph,
        device_mesh=like.device_mesh, device=None, placements=placements, args=args,
        generator=copy,
    )  # fmt: skip


def _normal_tensors(mean: Tensor, std: Tensor, generator: Any) -> Tensor:
    # ATen: output.normal_(0, 1).mul_(std).add_(mean), output in mean's dtype
    shape = _broadcast("normal", mean, std)
    like = mean if tuple(mean.shape) == shape else std
    _refuse_negative_std(std)
    z = _standard(like, shape, mean.dtype, (0.0, 1.0), generator)
    return (z * std).to(mean.dtype) + mean


def _normal_mean(mean: Tensor, std: float, generator: Any) -> Tensor:
    # ATen: output.normal_(0, std).add_(mean)
    tensor_arg("normal", mean)
    return _standard(mean, tuple(mean.shape), mean.dtype, (0.0, std), generator) + mean


def _normal_std(mean: float, std: Tensor, generator: Any) -> Tensor:
    # ATen: output.normal_(0, 1).mul_(std).add_(mean), output in std's dtype
    tensor_arg("normal", std)
    _refuse_negative_std(std)
    z = _standard(std, tuple(std.shape), std.dtype, (0.0, 1.0), generator)
    return z * std + mean


def _broadcast(name: str, a: Tensor, b: Tensor) -> tuple[int, ...]:
    """The broadcast shape of ``a`` and ``b``, torch's ShapeError where they do not."""
    try:
        return tuple(torch.broadcast_shapes(tuple(a.shape), tuple(b.shape)))
    except RuntimeError as error:
        raise ShapeError(f"{name}: mean of shape {list(a.shape)} and std of shape "
                         f"{list(b.shape)} do not broadcast: {error}") from None  # fmt: skip


# --- randperm and randint_like ------------------------------------------------------------------
def randperm(
    n: int, *, generator: torch.Generator | None = None, dtype: torch.dtype | None = None,
    **kw: Any,
) -> Tensor:  # fmt: skip
    """torch's ``randperm``: a random permutation of 0..n-1, exactly torch's however the
    result is sharded (``device_mesh=``, ``placements=`` as ``dtorch.randn``).

    Example:
        >>> import torch, dtorch
        >>> g, ref = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
        >>> got = dtorch.randperm(6, generator=g).to_torch()
        >>> torch.equal(got, torch.randperm(6, generator=ref))
        True
    """
    from dtorch.api import creation  # import cycle: creation imports Tensor, Tensor this

    n = as_int("randperm", "n", n)
    if n < 0:
        raise ParamError(f"randperm: n must be non-negative, got {n}")
    dtype = torch.int64 if dtype is None else dtype
    return creation._random(CreateKind.RANDPERM, (n,), dtype, generator, (), kw)


def randint_like(
    input: Tensor, low: Any = 0, high: Any = None, *, generator: torch.Generator | None = None,
    dtype: torch.dtype | None = None, **kw: Any,
) -> Tensor:  # fmt: skip
    """torch's ``randint_like(input, high)`` / ``randint_like(input, low, high)``: ``randint``
    of ``input``'s shape, dtype, mesh and placements.

    Example:
        >>> import torch, dtorch
        >>> g, ref = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
        >>> got = dtorch.randint_like(dtorch.zeros(4), 2, 7, generator=g).to_torch()
        >>> torch.equal(got, torch.randint_like(torch.zeros(4), 2, 7, generator=ref))
        True
    """
    from dtorch.api import creation  # import cycle: creation imports Tensor, Tensor this

    if high is None:  # randint_like(input, high)
        low, high = 0, low
    kw = creation._like("randint_like", input, kw)
    dtype = input.dtype if dtype is None else dtype
    return creation.randint(low, high, input.shape, generator=generator, dtype=dtype, **kw)


# --- waiting for the input ----------------------------------------------------------------------
def poisson(input: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """torch's ``poisson``: a Poisson sample per rate of ``input``; torch's rejection sampler
    draws as many numbers as the values need, so this waits for ``input``, runs torch's own
    function in the calling process and returns the result with ``input``'s shardings.

    Example:
        >>> import torch, dtorch
        >>> g, ref = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
        >>> rates = torch.tensor([1.0, 4.0, 0.5])
        >>> got = dtorch.poisson(dtorch.tensor(rates), g).to_torch()
        >>> torch.equal(got, torch.poisson(rates, ref))
        True
    """
    tensor_arg("poisson", input)
    rates = input.to_torch()
    with torch_refusals("poisson"):
        value = torch.poisson(rates, generator=generator)
    return _kept(input, value)


def binomial(count: Tensor, prob: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """torch's ``binomial``: a Binomial(``count``, ``prob``) sample per element; it waits for
    both inputs (torch's sampler draws as the values need), runs torch's own function in the
    calling process and returns the result with ``count``'s shardings.

    Example:
        >>> import torch, dtorch
        >>> g, ref = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
        >>> n, p = torch.tensor([5.0, 10.0]), torch.tensor([0.5, 0.2])
        >>> got = dtorch.binomial(dtorch.tensor(n), dtorch.tensor(p), g).to_torch()
        >>> torch.equal(got, torch.binomial(n, p, ref))
        True
    """
    tensor_arg("binomial", count)
    tensor_arg("binomial", prob)
    counts, probs = count.to_torch(), prob.to_torch()
    with torch_refusals("binomial"):
        value = torch.binomial(counts, probs, generator=generator)
    return _kept(count, value)


def multinomial(
    input: Tensor, num_samples: int, replacement: bool = False, *,
    generator: torch.Generator | None = None,
) -> Tensor:  # fmt: skip
    """torch's ``multinomial``: ``num_samples`` indices per row of ``input``'s weights; its
    draws follow the values, so this waits for ``input``, runs torch's own function in the
    calling process and returns the result Replicate on ``input``'s mesh.

    Example:
        >>> import torch, dtorch
        >>> g, ref = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
        >>> w = torch.tensor([[0.1, 0.5, 0.4], [0.3, 0.3, 0.4]])
        >>> got = dtorch.multinomial(dtorch.tensor(w), 2, generator=g).to_torch()
        >>> torch.equal(got, torch.multinomial(w, 2, generator=ref))
        True
    """
    tensor_arg("multinomial", input)
    num_samples = as_int("multinomial", "num_samples", num_samples)
    replacement = as_flag(replacement, "multinomial", "replacement")
    value = input.to_torch()
    with torch_refusals("multinomial"):
        drawn = torch.multinomial(value, num_samples, replacement, generator=generator)
    return beside(input, drawn)


def _kept(like: Tensor, value: torch.Tensor) -> Tensor:
    # a client-side result, placed as ``like`` (its shards kept, Partial made Replicate)
    keep = [p if isinstance(p, Shard) else Replicate() for p in like.placements]
    return beside(like, value).redistribute(placements=keep)

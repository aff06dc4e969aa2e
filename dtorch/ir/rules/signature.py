"""Placement signatures: per-kind tables for ONE mesh dimension, and the shared expander
(``expand``; ``one_output`` and ``one_input`` turn its result into a rule's Inference).

Each rule labels the dimensions of its inputs and outputs (einsum style): two dims with the
same label are the same index of the computation. A dim whose label appears in an output is
*kept*; one whose label appears in no output is *contracted* (summed by matmul, reduced by
sum, dropped by an integer index, or made non-shardable on purpose, like a softmax dim).
Broadcast dims (size 1 against a larger size) get labels of their own, so they are never
"the same dim" as the size they broadcast to.

On one mesh dimension an input is ``R``, ``P``, ``Si`` (sharded on a kept label) or ``Sk``
(sharded on a contracted label). A signature maps the tuple of input classes to the output
class, e.g. matmul's ``Sk Sk -> P``. Every sharded input on that mesh dim must shard the SAME
label; a Replicate input that has that label too is turned into a Shard of it first (the one
implicit redistribution: a local chunk, no communication) when the signature allows it.

Example:
    >>> sig = signature("R R -> R", "Si Si -> Si", "Si R -> Si", "R Si -> Si", "P P -> P")
    >>> sig.accepted
    'R x R -> R, S(i) x S(i) -> S(i), S(i) x R -> S(i), R x S(i) -> S(i), P x P -> P'
"""

from __future__ import annotations

import enum
import functools
import itertools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

import torch

from dtorch.errors import PlacementError
from dtorch.ir.operator import Operand
from dtorch.ir.placement import (
    Partial,
    Placement,
    Replicate,
    Shard,
    normalize_placements,
    shard_order,
)
from dtorch.ir.rules.base import (
    Inference,
    OutputMeta,
    all_replicate,
    describe_inputs,
    replicated,
)

Labels = tuple[int, ...]


def fresh_labels(ndim: int, dims: Collection[int]) -> Labels:
    """The identity labels, ``dims`` given labels of their own (``-1 - d``): output dims
    that are not the input's (sorted, reduced to size 1, ...), so a shard there is refused.

    Example:
        >>> fresh_labels(3, (1,))
        (0, -2, 2)
    """
    return tuple(-1 - d if d in dims else d for d in range(ndim))


class Cls(enum.IntEnum):
    """The class of one input's placement on one mesh dimension."""

    R = 0
    P = 1
    SI = 2  # sharded on a label some output keeps
    SK = 3  # sharded on a contracted label


_TOKENS = {"R": Cls.R, "P": Cls.P, "Si": Cls.SI, "Sk": Cls.SK}
_TEXT = {Cls.R: "R", Cls.P: "P", Cls.SI: "S(i)", Cls.SK: "S(k)"}


@dataclass(frozen=True, slots=True, eq=False)
class Signature:
    """Legal input classes -> output class on one mesh dim, with the text messages show.

    Compared and hashed by identity: signatures are module constants (and cache keys).

    A Replicate input may be turned into the Shard of another input, except the inputs in
    ``fixed`` (in-place targets). ``legend`` says what ``i``/``k`` mean for this kind;
    ``hint`` tells the user what to do instead.
    """

    entries: Mapping[tuple[Cls, ...], Cls]
    accepted: str
    fixed: frozenset[int] = frozenset()
    legend: str = ""
    hint: str = ""
    variadic: bool = False  # entries are keyed by the SET of classes (any number of inputs)


def signature(*rows: str, fixed: Sequence[int] = (), legend: str = "", hint: str = "") -> Signature:
    """A signature from rows like ``"Si R -> Si"`` (input classes, then the output class)."""
    entries = _parse(rows)
    return Signature(entries, _render(entries), frozenset(fixed), legend, hint)


def _parse(rows: Sequence[str]) -> dict[tuple[Cls, ...], Cls]:
    entries: dict[tuple[Cls, ...], Cls] = {}
    for row in rows:
        lhs, rhs = row.split("->")
        entries[tuple(_TOKENS[t] for t in lhs.split())] = _TOKENS[rhs.strip()]
    return entries


def _render(entries: Mapping[tuple[Cls, ...], Cls]) -> str:
    return ", ".join(_rows(entries))


def _rows(entries: Mapping[tuple[Cls, ...], Cls]) -> list[str]:
    return [" x ".join(_TEXT[c] for c in ins) + " -> " + _TEXT[o] for ins, o in entries.items()]


def shard_rows(arity: int) -> dict[tuple[Cls, ...], Cls]:
    """Every R/Si combination of ``arity`` inputs: Si when any input is Si, else R."""
    return {
        combo: Cls.SI if Cls.SI in combo else Cls.R
        for combo in itertools.product((Cls.R, Cls.SI), repeat=arity)
    }


def elementwise(
    arity: int,
    partial: Sequence[str] = (),
    *,
    fixed: Sequence[int] = (),
    legend: str = "",
    hint: str = "",
) -> Signature:
    """Every R/Si combination of ``arity`` inputs (Si when any input is Si), plus the
    ``partial`` rows; messages summarise the combinations instead of listing them."""
    entries = shard_rows(arity)
    extra = _parse(partial)
    entries.update(extra)
    if arity > 2:
        shards = f"any mix of {arity} S(i) and R with at least one S(i) -> S(i)"
        text = ", ".join([" x ".join(["R"] * arity) + " -> R", shards, *_rows(extra)])
    else:
        text = ", ".join(_rows(entries))
    return Signature(entries, text, frozenset(fixed), legend, hint)


def variadic(*rows: str, legend: str = "", hint: str = "") -> Signature:
    """A signature for any number of inputs, keyed by which classes occur, e.g.
    ``"R Si -> Si"`` matches every mix of Replicate and Si inputs with both present."""
    entries = {tuple(sorted(k)): v for k, v in _parse(rows).items()}
    text = ", ".join(
        ("all " if len(ins) == 1 else "any mix of ")
        + " and ".join(_TEXT[c] for c in ins)
        + " -> "
        + _TEXT[out]
        for ins, out in entries.items()
    )
    return Signature(entries, text, frozenset(), legend, hint, variadic=True)


@functools.cache
def identity(ndim: int) -> Labels:
    """Labels of a tensor whose every dim maps to the same output dim."""
    return tuple(range(ndim))


@dataclass(frozen=True, slots=True)
class Expansion:
    """The expander's result: placements of every output and the requested input layouts."""

    outputs: tuple[tuple[Placement, ...], ...]
    requested: tuple[tuple[Placement, ...] | None, ...]


def reject(
    name: str, sig: Signature, inputs: Sequence[Operand], detail: str = ""
) -> PlacementError:
    """The PlacementError of a rule: what the operator got and what it accepts."""
    mesh = inputs[0].mesh
    legend = f" ({sig.legend})" if sig.legend else ""
    text = (
        f"{name}: got {describe_inputs(inputs)} on mesh {mesh.shape}; accepted per mesh "
        f"dimension: {sig.accepted}{legend}"
    )
    text += f"; {detail}" if detail else ""
    hint = sig.hint or _REDISTRIBUTE  # every refusal says what to do about it
    return PlacementError(f"{text}. {hint[:1].upper()}{hint[1:]}")


_REDISTRIBUTE = "redistribute the inputs to placements these rows accept first (redistribute())"


class _Mismatch(Exception):
    """Raised inside the cached expander; ``expand`` turns it into the user's message."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def expand(
    name: str,
    sig: Signature,
    inputs: Sequence[Operand],
    in_labels: tuple[Labels, ...],
    out_labels: tuple[Labels, ...],
) -> Expansion:
    """Apply ``sig`` on every mesh dimension and combine the results over the mesh.

    The result depends only on the signature, placements and labels, so it is cached: a
    program that repeats an operator pays one dict lookup for its placements.
    """
    placements = tuple([o.placements for o in inputs])
    try:
        return _expand(sig, placements, in_labels, out_labels)
    except _Mismatch as mismatch:
        raise reject(name, sig, inputs, mismatch.detail) from None


def one_output(
    name: str,
    sig: Signature,
    inputs: Sequence[Operand],
    in_labels: tuple[Labels, ...],
    out_labels: Labels,
    shape: tuple[int, ...],
    dtype: torch.dtype,
) -> Inference:
    """The Inference of an operator with one output of ``shape`` and ``dtype``: ``sig``
    expanded over the labels (callers take the all-Replicate fast path first)."""
    expansion = expand(name, sig, inputs, in_labels, (out_labels,))
    return Inference((OutputMeta(shape, dtype, expansion.outputs[0]),), expansion.requested)


def one_input(
    name: str, sig: Signature, x: Operand, out_labels: Labels, metas: Sequence[OutputMeta]
) -> Inference:
    """Metadata of every output of a one-input operator whose outputs share labels (the
    placements in ``metas`` are ignored)."""
    if all_replicate((x,)):
        if len(metas) == 1:
            return replicated(metas[0].shape, metas[0].dtype, len(x.placements))
        return Inference(tuple(OutputMeta(m.shape, m.dtype, x.placements) for m in metas))
    expansion = expand(name, sig, (x,), (identity(x.ndim),), (out_labels,) * len(metas))
    return Inference(
        tuple(
            OutputMeta(m.shape, m.dtype, p) for m, p in zip(metas, expansion.outputs, strict=True)
        )
    )


@functools.lru_cache(maxsize=8192)
def _expand(
    sig: Signature,
    placements: tuple[tuple[Placement, ...], ...],
    in_labels: tuple[Labels, ...],
    out_labels: tuple[Labels, ...],
) -> Expansion:
    walk = _Walk(sig, placements, in_labels, {label for lab in out_labels for label in lab})
    outs: list[list[Placement]] = [[] for _ in out_labels]
    for m in range(len(placements[0])):
        out_cls, label, src = walk.mesh_dim(m)
        for pls, labels in zip(outs, out_labels, strict=True):
            pls.append(_output_placement(out_cls, label, src, labels))
    return _finish(walk, [tuple(pls) for pls in outs], out_labels)


@dataclass(slots=True)
class _Walk:
    """The expander's state while it visits the mesh dims of one operator."""

    sig: Signature
    placements: tuple[tuple[Placement, ...], ...]
    in_labels: tuple[Labels, ...]
    kept: set[int]
    requested: list[list[Placement] | None] = field(default_factory=list)

    def mesh_dim(self, m: int) -> tuple[Cls, int, Shard | None]:
        """Output class, sharded label and a source Shard (for split_order) on mesh dim ``m``."""
        classes: list[Cls] = []
        label, src = -1, None
        for pls, labels in zip(self.placements, self.in_labels, strict=True):
            p = pls[m]
            if isinstance(p, Shard):
                if src is not None and labels[p.dim] != label:
                    raise _Mismatch(f"mesh dim {m} shards dims that do not correspond")
                label, src = labels[p.dim], p
                classes.append(Cls.SI if label in self.kept else Cls.SK)
            else:
                classes.append(Cls.P if p.__class__ is Partial else Cls.R)
        key = tuple(sorted(set(classes))) if self.sig.variadic else tuple(classes)
        out_cls = self.sig.entries.get(key)
        if out_cls is None:
            got = " x ".join(_TEXT[c] for c in classes)
            raise _Mismatch(f"mesh dim {m} is {got}, which is not one of these")
        if src is not None:
            self.convert_replicates(m, label, src)
        return out_cls, label, src

    def convert_replicates(self, m: int, label: int, src: Shard) -> None:
        """Replicate inputs holding the sharded label get sharded too (a local chunk)."""
        for i, (pls, labels) in enumerate(zip(self.placements, self.in_labels, strict=True)):
            if label not in labels or pls[m].__class__ is not Replicate:
                continue
            if i in self.sig.fixed:
                raise _Mismatch(f"input {i} is R on mesh dim {m} and cannot be redistributed")
            if not self.requested:
                self.requested = [None] * len(self.placements)
            wanted = self.requested[i]
            if wanted is None:
                wanted = self.requested[i] = list(pls)
            wanted[m] = Shard(labels.index(label), src.split_order)

    def effective(self) -> list[tuple[Placement, ...]]:
        """Input placements after the implicit redistributions."""
        if not self.requested:
            return list(self.placements)
        return [
            p if r is None else tuple(r)
            for p, r in zip(self.placements, self.requested, strict=True)
        ]


def _output_placement(out_cls: Cls, label: int, src: Shard | None, labels: Labels) -> Placement:
    if out_cls is Cls.SI and src is not None:
        return Shard(labels.index(label), src.split_order)
    return Partial() if out_cls is Cls.P else Replicate()


def _finish(
    walk: _Walk, outs: list[tuple[Placement, ...]], out_labels: tuple[Labels, ...]
) -> Expansion:
    """Canonical placements, after checking that nested shards nest the same way."""
    everything = [*walk.effective(), *outs]
    nested = any(isinstance(p, Shard) and p.split_order >= 0 for pls in everything for p in pls)
    if nested:
        _check_nesting(everything, [*walk.in_labels, *out_labels])
        mesh_ndim = len(walk.placements[0])
        outs = [
            normalize_placements(o, mesh_ndim, len(lab))
            for o, lab in zip(outs, out_labels, strict=True)
        ]
    requested: tuple[tuple[Placement, ...] | None, ...] = ()
    if walk.requested:
        requested = tuple(
            None if r is None else _canonical(r, len(lab), nested)
            for r, lab in zip(walk.requested, walk.in_labels, strict=True)
        )
    return Expansion(tuple(outs), requested)


def _canonical(placements: list[Placement], ndim: int, nested: bool) -> tuple[Placement, ...]:
    return normalize_placements(placements, len(placements), ndim) if nested else tuple(placements)


def _check_nesting(everything: list[tuple[Placement, ...]], labels: list[Labels]) -> None:
    """Every tensor holding a sharded label must split it over the mesh dims in one order."""
    orders: dict[int, tuple[int, ...]] = {}
    for placements, dims in zip(everything, labels, strict=True):
        for dim, label in enumerate(dims):
            order = shard_order(placements, dim)
            if order and orders.setdefault(label, order) != order:
                raise _Mismatch("the inputs nest the shards of one dim in different orders")

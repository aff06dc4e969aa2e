"""Placements: how a tensor lies along one mesh dimension.

* ``Shard(dim)``: the tensor is split along tensor dimension ``dim`` over the devices of this
  mesh dimension, with ``torch.chunk`` semantics (11 over 4 gives 3, 3, 3, 2; 5 over 4 gives
  2, 2, 1, 0). ``Shard(-1)`` counts from the end and is normalised against the tensor's rank.
* ``Replicate()``: every device of this mesh dimension holds the same values.
* ``Partial()``: every device holds a partial value; the tensor is their sum.

When several mesh dimensions shard the same tensor dimension, the splits nest: by default the
earlier mesh dimension splits first (outermost), as in PyTorch DTensor. ``Shard(dim,
sub_split=k)`` is the sub-split coordinate of DTorch's spec: the position (0 = outermost) of
this mesh dimension among those that shard ``dim``. It records nestings in another order,
which redistribution produces when it splits an already-sharded local tensor further.

Example:
    >>> from dtorch.ir.placement import Shard, Replicate, Partial
    >>> [Shard(0), Replicate(), Partial()]
    [Shard(dim=0), Replicate(), Partial(sum)]
    >>> Shard(1).is_shard(), Shard(1).get_shard_index(), Replicate().is_replicate()
    (True, 1, True)
    >>> Shard(-1).normalized(3)
    Shard(dim=2)
    >>> Placement("S1") == Shard(1), Placement("R"), Placement("P")
    (True, Replicate(), Partial(sum))
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dtorch.errors import PlacementError

_TEXT = re.compile(
    r"\s*(?:(R|Replicate\(\))|(P|Partial\((?:sum)?\))|(?:S|Shard\((?:dim=)?)(-?\d+)\)?)\s*"
)


class _FromText(type):
    """``Placement(text)`` builds the placement the text names (the subclasses build as usual)."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is Placement:
            return parse_placement(*args, **kwargs)
        return super().__call__(*args, **kwargs)


class Placement(metaclass=_FromText):
    """Base of the three placements; compare with ``==``, print as ``Shard(dim=0)``,
    ``Replicate()``, ``Partial(sum)``. ``Placement("S0")``, ``Placement("R")``,
    ``Placement("P")`` build one from text."""

    __slots__ = ()

    def is_shard(self, dim: int | None = None) -> bool:
        return False

    def is_replicate(self) -> bool:
        return False

    def is_partial(self) -> bool:
        return False

    def get_shard_index(self) -> int:
        """The sharded tensor dimension; -1 for placements that are not Shard."""
        return -1

    def __str__(self) -> str:
        return repr(self)


@dataclass(frozen=True, slots=True, repr=False)
class Shard(Placement):
    """Split along tensor dimension ``dim`` (``torch.chunk`` sizes); see the module doc."""

    dim: int
    sub_split: int = -1

    def __post_init__(self) -> None:
        if isinstance(self.dim, bool) or not isinstance(self.dim, int):
            raise PlacementError(f"Shard(dim) needs an int dimension, got {self.dim!r}")
        if isinstance(self.sub_split, bool) or not isinstance(self.sub_split, int):
            raise PlacementError(f"Shard sub_split must be an int, got {self.sub_split!r}")
        if self.sub_split < -1:
            raise PlacementError(
                f"Shard sub_split must be -1 or a position >= 0, got {self.sub_split}"
            )

    def is_shard(self, dim: int | None = None) -> bool:
        return dim is None or dim == self.dim

    def get_shard_index(self) -> int:
        return self.dim

    def normalized(self, ndim: int) -> Shard:
        """This placement with a negative ``dim`` counted from the end of an ``ndim``-D tensor."""
        if not -ndim <= self.dim < ndim:
            raise PlacementError(f"Shard({self.dim}) is out of range for a {ndim}-D tensor")
        return self if self.dim >= 0 else Shard(self.dim % ndim, self.sub_split)

    def __repr__(self) -> str:
        if self.sub_split < 0:
            return f"Shard(dim={self.dim})"
        return f"Shard(dim={self.dim}, sub_split={self.sub_split})"


@dataclass(frozen=True, slots=True, repr=False)
class Replicate(Placement):
    """Every device of the mesh dimension holds the whole (local) value."""

    def is_replicate(self) -> bool:
        return True

    def __repr__(self) -> str:
        return "Replicate()"


@dataclass(frozen=True, slots=True, repr=False)
class Partial(Placement):
    """Every device holds a partial value; the tensor is their sum."""

    def is_partial(self) -> bool:
        return True

    def __repr__(self) -> str:
        return "Partial(sum)"


def parse_placement(text: object) -> Placement:
    """The placement ``text`` names: ``"R"``, ``"P"``, ``"S<dim>"`` (or the printed forms
    ``Replicate()``, ``Partial(sum)``, ``Shard(dim=0)``); a Placement is returned as is.

    Example:
        >>> parse_placement("S-1"), parse_placement("Shard(dim=2)")
        (Shard(dim=-1), Shard(dim=2))
    """
    if isinstance(text, Placement):
        return text
    match = _TEXT.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise PlacementError(
            f"Placement({text!r}): not a placement; accepted: 'R', 'P', 'S<dim>' such as 'S0' "
            f"or 'S-1', or Replicate(), Partial(sum), Shard(dim=0)"
        )
    replicate, partial, dim = match.groups()
    return Replicate() if replicate else Partial() if partial else Shard(int(dim))


def shard_order(placements: Sequence[Placement], tensor_dim: int) -> tuple[int, ...]:
    """Mesh dims that shard ``tensor_dim``, outermost split first."""
    dims = [m for m, p in enumerate(placements) if isinstance(p, Shard) and p.dim == tensor_dim]
    subs = [placements[m].sub_split for m in dims]  # type: ignore[attr-defined]
    if all(s < 0 for s in subs):
        return tuple(dims)
    if sorted(subs) != list(range(len(dims))):
        raise PlacementError(
            f"sub_split positions {subs} of the mesh dims sharding tensor dim {tensor_dim} must be "
            f"0..{len(dims) - 1}, each once (or all -1 for mesh-dimension order)"
        )
    return tuple(m for _, m in sorted(zip(subs, dims, strict=True)))


def normalize_placements(
    placements: Sequence[Placement], mesh_shape: int | Sequence[int], tensor_ndim: int
) -> tuple[Placement, ...]:
    """Check ``placements`` against a mesh and a tensor rank; return them in canonical form.

    ``mesh_shape`` is the mesh's shape (an int: only its rank is known). Every placement on a
    mesh dimension of size 1 becomes ``Replicate()`` (one device holds the whole value);
    negative shard dims are counted from the end; sub-split positions that restate the
    default mesh-dimension order become -1, so equal layouts compare equal.

    Example:
        >>> normalize_placements([Shard(-1), Partial()], (2, 1), 2)
        (Shard(dim=1), Replicate())
    """
    sizes = None if isinstance(mesh_shape, int) else tuple(mesh_shape)
    mesh_ndim = len(sizes) if sizes is not None else mesh_shape
    placements = tuple(placements)
    if len(placements) != mesh_ndim:
        raise PlacementError(
            f"{len(placements)} placements {list(placements)} for a {mesh_ndim}-D mesh; "
            f"give one placement per mesh dimension"
        )
    out: list[Placement] = []
    for p in placements:
        if not isinstance(p, Placement):
            raise PlacementError(
                f"{p!r} is not a placement; accepted: Shard(d), Replicate(), Partial()"
            )
        out.append(p.normalized(tensor_ndim) if isinstance(p, Shard) else p)
    if sizes is not None:
        out = _replicate_size_one(out, sizes)
    return _canonical_sub_splits(out)


def _replicate_size_one(placements: list[Placement], sizes: tuple[int, ...]) -> list[Placement]:
    # Size-1 mesh dims hold everything: Replicate; the other shards keep their nesting order.
    out = [Replicate() if n == 1 else p for p, n in zip(placements, sizes, strict=True)]
    for tensor_dim in {p.dim for p in placements if isinstance(p, Shard) and p.sub_split >= 0}:
        kept = [m for m in shard_order(placements, tensor_dim) if sizes[m] != 1]
        for position, m in enumerate(kept):
            out[m] = Shard(tensor_dim, position)
    return out


def _canonical_sub_splits(placements: list[Placement]) -> tuple[Placement, ...]:
    for tensor_dim in {p.dim for p in placements if isinstance(p, Shard)}:
        order = shard_order(placements, tensor_dim)
        if list(order) == sorted(order):
            for m in order:
                placements[m] = Shard(tensor_dim)
    return tuple(placements)


def short_text(placement: Placement) -> str:
    """``S(0)``, ``R``, ``P``: the compact notation of the operators' signatures (messages)."""
    if isinstance(placement, Shard):
        sub = "" if placement.sub_split < 0 else f"<{placement.sub_split}>"
        return f"S({placement.dim}){sub}"
    return (
        "P"
        if isinstance(placement, Partial)
        else "R"
        if isinstance(placement, Replicate)
        else repr(placement)
    )


def format_placements(placements: Sequence[Placement]) -> str:
    """``(S(0), R)`` style text for messages, in the notation of the signatures they list
    (a one-element tuple keeps its comma: ``(P,)``).

    Example:
        >>> format_placements([Shard(0), Replicate()]), format_placements([Partial()])
        ('(S(0), R)', '(P,)')
    """
    texts = [short_text(p) for p in placements]
    return "(" + ", ".join(texts) + ("," if len(texts) == 1 else "") + ")"

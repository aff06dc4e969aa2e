"""Placements: how a tensor lies along one mesh dimension.

* ``Shard(dim)``: the tensor is split along tensor dimension ``dim`` over the devices of this
  mesh dimension, with ``torch.chunk`` semantics (11 over 4 gives 3, 3, 3, 2; 5 over 4 gives
  2, 2, 1, 0). ``Shard(-1)`` counts from the end and is normalised against the tensor's rank.
* ``Replicate()``: every device of this mesh dimension holds the same values.
* ``Partial()``: every device holds a partial value; the tensor is their sum.

When several mesh dimensions shard the same tensor dimension, the splits nest: by default the
earlier mesh dimension splits first (outermost), as in PyTorch DTensor. ``Shard(dim,
split_order=k)`` is the position (0 = outermost) of this mesh dimension among those that shard
``dim``. It records nestings in another order, which redistribution produces when it splits an
already-sharded local tensor further. (Before, this field was called ``sub_split``; payloads
that name it so still decode.)

``Shard(dim, sub_split_coordinates=(c1, c2, ...))`` is a different concept, DTorch's: the
tensor is the concatenation along ``dim`` of segments ``[0, c1)``, ``[c1, c2)``, ...,
``[ck, size)``, each chunked over this mesh dimension on its own (``torch.chunk`` sizes); a
device's local tensor is the concatenation of its chunk of every segment. ``cat`` of tensors
sharded along the cat dim makes it without moving data (see ``dtorch.ir.subsplit``).

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
    >>> Shard(0, sub_split_coordinates=(4,)).get_sub_split_coordinates()
    (4,)
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dtorch.errors import PlacementError

_TEXT = re.compile(
    r"\s*(?:(R|Replicate\(\))|(P|Partial\((?:sum)?\))|(?:S\(?|Shard\((?:dim=)?)(-?\d+)\)?)\s*"
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
    """Split along tensor dimension ``dim`` (``torch.chunk`` sizes); see the module doc.

    ``split_order`` is the nesting position among mesh dims sharding ``dim`` (-1: mesh order);
    ``sub_split_coordinates`` are the segment boundaries of a concatenation (empty: none).

    Example:
        >>> Shard(0, sub_split_coordinates=(4,))
        Shard(dim=0, sub_split_coordinates=(4,))
        >>> Shard(0, sub_split_coordinates=(4,)).has_sub_split_coordinates()
        True
    """

    dim: int
    split_order: int = field(default=-1, metadata={"formerly": ("sub_split",)})
    sub_split_coordinates: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.dim, (bool, int)) and hasattr(self.dim, "__index__"):
            object.__setattr__(self, "dim", operator.index(self.dim))  # a numpy integer
        if isinstance(self.dim, bool) or not isinstance(self.dim, int):
            raise PlacementError(f"Shard(dim) needs an int dimension, got {self.dim!r}")
        if isinstance(self.split_order, bool) or not isinstance(self.split_order, int):
            raise PlacementError(f"Shard split_order must be an int, got {self.split_order!r}")
        if self.split_order < -1:
            raise PlacementError(
                f"Shard split_order must be -1 or a position >= 0, got {self.split_order}"
            )
        object.__setattr__(self, "sub_split_coordinates", _coordinates(self.sub_split_coordinates))

    def is_shard(self, dim: int | None = None) -> bool:
        return dim is None or dim == self.dim

    def get_shard_index(self) -> int:
        return self.dim

    def has_sub_split_coordinates(self) -> bool:
        """Whether this shard is a concatenation of separately chunked segments."""
        return bool(self.sub_split_coordinates)

    def get_sub_split_coordinates(self) -> tuple[int, ...]:
        """The segment boundaries along ``dim`` (ascending; empty for a plain shard)."""
        return self.sub_split_coordinates

    def plain(self) -> Shard:
        """This placement without sub-split coordinates (the same nesting order)."""
        return Shard(self.dim, self.split_order)

    def normalized(self, ndim: int) -> Shard:
        """This placement with a negative ``dim`` counted from the end of an ``ndim``-D tensor."""
        if not -ndim <= self.dim < ndim:
            raise PlacementError(f"Shard({self.dim}) is out of range for a {ndim}-D tensor")
        if self.dim >= 0:
            return self
        return Shard(self.dim % ndim, self.split_order, self.sub_split_coordinates)

    def __repr__(self) -> str:
        order = f", split_order={self.split_order}" if self.split_order >= 0 else ""
        coords = self.sub_split_coordinates
        marks = f", sub_split_coordinates={coords}" if coords else ""
        return f"Shard(dim={self.dim}{order}{marks})"


# Coordinates are checked once here so every layout computation can trust them.
def _coordinates(coords: object) -> tuple[int, ...]:
    if not isinstance(coords, (tuple, list)) or not all(
        isinstance(c, int) and not isinstance(c, bool) for c in coords
    ):
        raise PlacementError(f"Shard sub_split_coordinates must be a tuple of ints, got {coords!r}")
    out = tuple(coords)
    if any(c <= 0 for c in out) or list(out) != sorted(set(out)):
        raise PlacementError(
            f"Shard sub_split_coordinates must be strictly increasing positive ints, got {out}"
        )
    return out


@dataclass(frozen=True, slots=True, repr=False)
class Replicate(Placement):
    """Every device of the mesh dimension holds the whole (local) value."""

    def is_replicate(self) -> bool:
        return True

    def __repr__(self) -> str:
        return "Replicate()"


@dataclass(frozen=True, slots=True, repr=False)
class Partial(Placement):
    """Every device holds a partial value; the tensor is their sum. ``Partial("sum")`` and
    ``Partial(reduce_op="sum")`` name the one reduction there is (DTensor's spelling).

    Example:
        >>> Partial("sum") == Partial()
        True
    """

    def __init__(self, reduce_op: str = "sum") -> None:
        if reduce_op != "sum":
            raise PlacementError(
                f"Partial({reduce_op!r}): dtorch's Partial is a sum; accepted: Partial() or "
                "Partial('sum')"
            )

    def is_partial(self) -> bool:
        return True

    def __repr__(self) -> str:
        return "Partial(sum)"


def parse_placement(text: object) -> Placement:
    """The placement ``text`` names: ``"R"``, ``"P"``, ``"S<dim>"`` (or the printed forms
    ``Replicate()``, ``Partial(sum)``, ``Shard(dim=0)``, and ``S(0)`` as error messages print
    it); a Placement is returned as is.

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
    subs = [placements[m].split_order for m in dims]  # type: ignore[attr-defined]
    if all(s < 0 for s in subs):
        return tuple(dims)
    if sorted(subs) != list(range(len(dims))):
        raise PlacementError(
            f"split_order positions {subs} of the mesh dims sharding tensor dim {tensor_dim} "
            f"must be "
            f"0..{len(dims) - 1}, each once (or all -1 for mesh-dimension order)"
        )
    return tuple(m for _, m in sorted(zip(subs, dims, strict=True)))


def normalize_placements(
    placements: Sequence[Placement], mesh_shape: int | Sequence[int], tensor_ndim: int
) -> tuple[Placement, ...]:
    """Check ``placements`` against a mesh and a tensor rank; return them in canonical form.

    ``mesh_shape`` is the mesh's shape (an int: only its rank is known). Every placement on a
    mesh dimension of size 1 becomes ``Replicate()`` (one device holds the whole value);
    negative shard dims are counted from the end; split_order positions that restate the
    default mesh-dimension order become -1, so equal layouts compare equal.

    Example:
        >>> normalize_placements([Shard(-1), Partial()], (2, 1), 2)
        (Shard(dim=1), Replicate())
    """
    sizes = None if isinstance(mesh_shape, int) else tuple(mesh_shape)
    mesh_ndim = len(sizes) if sizes is not None else mesh_shape
    if isinstance(placements, (Placement, str)):  # Shard(0) or "S0" for [Shard(0)]
        raise PlacementError(
            f"placements must be a list of one placement per mesh dimension, got "
            f"{placements!r}; did you mean [{placements!r}]?"
        )
    if not isinstance(placements, Iterable):
        raise PlacementError(
            f"placements must be a list of one placement per mesh dimension, got "
            f"{placements!r} ({type(placements).__name__})"
        )
    placements = tuple(placements)
    if len(placements) != mesh_ndim:
        raise PlacementError(
            f"{len(placements)} placements {list(placements)} for a {mesh_ndim}-D mesh; "
            f"give one placement per mesh dimension"
        )
    out: list[Placement] = []
    for given in placements:
        # text, as Placement("S0") reads it (and redistribute_by_dict)
        p = parse_placement(given) if isinstance(given, str) else given
        if not isinstance(p, Placement):
            raise PlacementError(
                f"{p!r} is not a placement; accepted: Shard(d), Replicate(), Partial()"
            )
        out.append(p.normalized(tensor_ndim) if isinstance(p, Shard) else p)
    if sizes is not None:
        out = _replicate_size_one(out, sizes)
    return _canonical_split_orders(out)


def _replicate_size_one(placements: list[Placement], sizes: tuple[int, ...]) -> list[Placement]:
    # Size-1 mesh dims hold everything: Replicate; the other shards keep their nesting order.
    out = [Replicate() if n == 1 else p for p, n in zip(placements, sizes, strict=True)]
    for tensor_dim in {p.dim for p in placements if isinstance(p, Shard) and p.split_order >= 0}:
        kept = [m for m in shard_order(placements, tensor_dim) if sizes[m] != 1]
        for position, m in enumerate(kept):
            coords = placements[m].get_sub_split_coordinates()  # type: ignore[attr-defined]
            out[m] = Shard(tensor_dim, position, coords)
    return out


def _canonical_split_orders(placements: list[Placement]) -> tuple[Placement, ...]:
    # only dims with a split_order given: all -1 is the canonical form already
    for tensor_dim in {p.dim for p in placements if isinstance(p, Shard) and p.split_order >= 0}:
        order = shard_order(placements, tensor_dim)
        if list(order) == sorted(order):
            for m in order:
                coords = placements[m].get_sub_split_coordinates()  # type: ignore[attr-defined]
                placements[m] = Shard(tensor_dim, -1, coords)
    return tuple(placements)


def short_text(placement: Placement) -> str:
    """``S(0)``, ``R``, ``P``: the compact notation of the operators' signatures (messages)."""
    if isinstance(placement, Shard):
        sub = "" if placement.split_order < 0 else f"<{placement.split_order}>"
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

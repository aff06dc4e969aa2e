"""``visualize_sharding``: a table of which device holds which block of a tensor.

Modelled on ``torch.distributed.tensor.debug.visualize_sharding``. It reads metadata only (the
tensor's shape, mesh and placements; ``dtorch.ir.sharding`` gives each device's box with
``torch.chunk`` semantics), so it records no operator, fetches no data, never waits, and prints
the same in thread and process mode.

What it draws:

* a 2-D tensor: a grid, a row per distinct row range (``Row 0:2``, half-open like a slice) and a
  column per distinct column range (``Col 3:6``); each cell names the devices that hold that
  block (``cpu:0,2``: several where a mesh dim replicates it);
* a 1-D tensor: the same grid with one column, ``devices``, a row per range (``0:3``);
* any other tensor (0-D, 3-D and more, or one with no elements): a flat table, a row per
  distinct box (``[0:2, 0:4, 0:3]``) with its devices;
* a Partial placement marks every cell ``(P)``: the block is the sum of the values its devices
  hold over the Partial mesh dims, and a caption says so;
* devices whose shard is empty (uneven: ``torch.chunk`` of 5 over 4 devices leaves the fourth
  without elements) are listed in a caption, ``empty: cpu:3``.

With ``rich`` installed (or ``use_rich=True``) the table is a ``rich`` Table, one colour per
block; otherwise plain text. Sub-split (marked) Shard placements, whose shards are not one box,
are refused with a PlacementError.

Example:
    >>> import dtorch
    >>> mesh = dtorch.init_device_mesh("cpu", (2, 2))
    >>> t = dtorch.zeros(4, 6, device_mesh=mesh, placements=[dtorch.Shard(0), dtorch.Shard(1)])
    >>> _ = visualize_sharding(t, use_rich=False)
            | Col 0:3 | Col 3:6
    --------+---------+--------
    Row 0:2 | cpu:0   | cpu:1
    Row 2:4 | cpu:2   | cpu:3
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

from dtorch.api.handle import TensorBase
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.placement import Placement
from dtorch.ir.sharding import device_shard

Range = tuple[int, int]  # half-open (start, stop) along one tensor dim

#: Background colours of the blocks in a rich table, cycled (dark enough for white text).
_COLOURS = ("blue", "magenta", "dark_green", "dark_red", "purple4", "dark_cyan", "orange4")

_PARTIAL_NOTE = "(P): partial, the block is the sum of its devices' values over the Partial dims"


@dataclass(frozen=True, slots=True)
class Block:
    """One box of the full tensor (a half-open range per dim) and the devices that hold it."""

    ranges: tuple[Range, ...]
    devices: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Layout:
    """What a table shows: the tensor's non-empty blocks, the devices holding nothing, the
    device kind that prefixes ids, and whether the values are partial."""

    shape: tuple[int, ...]
    blocks: tuple[Block, ...]
    empty: tuple[int, ...]
    kind: str
    partial: bool


@dataclass(frozen=True, slots=True)
class Grid:
    """A table as text cells: a corner, column headers, and rows of (label, cells)."""

    corner: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, tuple[str, ...]], ...]
    caption: str


def layout(shape: Sequence[int], mesh: DeviceMesh, placements: Sequence[Placement]) -> Layout:
    """Each device's box under ``placements`` on ``mesh``, grouped into blocks.

    Example:
        >>> from dtorch.ir.mesh import init_device_mesh
        >>> from dtorch.ir.placement import Shard
        >>> lay = layout((5,), init_device_mesh("cpu", 4), (Shard(0),))
        >>> [(b.ranges, b.devices) for b in lay.blocks], lay.empty
        ([(((0, 2),), (0,)), (((2, 4),), (1,)), (((4, 5),), (2,))], (3,))
    """
    held: dict[tuple[Range, ...], list[int]] = {}
    empty = []
    for device in sorted(mesh.device_ids):
        spec = device_shard(shape, mesh, placements, device)
        if 0 in spec.shape:
            empty.append(device)
            continue
        box = tuple((o, o + s) for o, s in zip(spec.offset, spec.shape, strict=True))
        held.setdefault(box, []).append(device)
    blocks = tuple(Block(box, tuple(ids)) for box, ids in sorted(held.items()))
    partial = any(p.is_partial() for p in placements)
    return Layout(tuple(shape), blocks, tuple(empty), mesh.device_kind, partial)


def _cell(lay: Layout, devices: Sequence[int]) -> str:
    # ``cpu:0,2``, as DTensor names the devices of a block; ``(P)`` marks partial values
    text = f"{lay.kind}:{','.join(map(str, devices))}" if devices else ""
    return f"{text} (P)" if lay.partial and devices else text


def _span(r: Range) -> str:
    return f"{r[0]}:{r[1]}"


def _caption(lay: Layout) -> str:
    notes = []
    if lay.empty:  # named without the partial mark: they hold nothing
        notes.append(f"empty: {lay.kind}:{','.join(map(str, lay.empty))}")
    if lay.partial:
        notes.append(_PARTIAL_NOTE)
    return "\n".join(notes)


def _grid_2d(lay: Layout) -> Grid:
    # every (row range, column range) pair is one block: each dim is partitioned on its own
    rows = sorted({b.ranges[0] for b in lay.blocks})
    cols = sorted({b.ranges[1] for b in lay.blocks})
    cells = {b.ranges: b.devices for b in lay.blocks}
    body = tuple(
        (f"Row {_span(r)}", tuple(_cell(lay, cells.get((r, c), ())) for c in cols)) for r in rows
    )
    return Grid("", tuple(f"Col {_span(c)}" for c in cols), body, _caption(lay))


def _grid_1d(lay: Layout) -> Grid:
    body = tuple((_span(b.ranges[0]), (_cell(lay, b.devices),)) for b in lay.blocks)
    return Grid("", ("devices",), body, _caption(lay))


def _grid_flat(lay: Layout) -> Grid:
    # any rank: one row per box; a 0-D tensor's one box is ``[]``
    body = tuple(
        ("[" + ", ".join(map(_span, b.ranges)) + "]", (_cell(lay, b.devices),)) for b in lay.blocks
    )
    return Grid("block", ("devices",), body, _caption(lay))


def grid(lay: Layout) -> Grid:
    """The table of ``lay``: a grid for a 1-D or 2-D tensor with elements, else a flat table.

    Example:
        >>> from dtorch.ir.mesh import init_device_mesh
        >>> from dtorch.ir.placement import Replicate
        >>> grid(layout((3, 2, 2), init_device_mesh("cpu", 2), (Replicate(),))).rows
        (('[0:3, 0:2, 0:2]', ('cpu:0,1',)),)
    """
    if not lay.blocks or len(lay.shape) not in (1, 2):
        return _grid_flat(lay)
    return _grid_2d(lay) if len(lay.shape) == 2 else _grid_1d(lay)


def plain_text(table: Grid, header: str = "") -> str:
    """``table`` as aligned text: ``|`` between columns, a rule under the headers."""
    lines = [(table.corner, *table.headers)] + [(label, *cells) for label, cells in table.rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    text = [" | ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) for line in lines]
    text.insert(1, "-+-".join("-" * w for w in widths))
    head = [header] if header else []
    tail = [table.caption] if table.caption else []
    return "\n".join(head + [t.rstrip() for t in text] + tail) + "\n"


def _rich_text(table: Grid, header: str, file: TextIO) -> str:
    # lazy: rich is optional; the console records what it prints, as plain text
    import rich.box
    import rich.console
    import rich.table
    from rich.text import Text  # Text, not markup: a label such as "[0:2]" stays literal

    out = rich.table.Table(
        *(table.corner, *table.headers), title=header or None, show_lines=True, box=rich.box.SQUARE
    )
    colours = itertools.cycle(_COLOURS)  # one per block, row-major
    for label, cells in table.rows:
        out.add_row(Text(label), *(Text(f" {t} ", f"white on {next(colours)}") for t in cells))
    console = rich.console.Console(file=file, record=True)
    # wider than the terminal rather than cells cut to "c…": the table is the information
    natural = console.measure(out, options=console.options.update(max_width=1 << 20)).maximum
    console.width = max(console.width, natural)
    console.print(out)
    if table.caption:  # below the table, not a caption wrapped to its width
        console.print(Text(table.caption))
    return console.export_text()


def _rich_present() -> bool:
    return importlib.util.find_spec("rich") is not None


def _wants_rich(use_rich: bool | None) -> bool:
    present = _rich_present()
    if use_rich and not present:
        raise ImportError("visualize_sharding(use_rich=True) needs the rich package installed")
    return present if use_rich is None else use_rich


def visualize_sharding(
    tensor: TensorBase,
    *,
    header: str = "",
    use_rich: bool | None = None,
    file: TextIO | None = None,
) -> str:
    """Print, and return as text, which device holds which block of ``tensor``.

    ``header`` is printed above the table; ``use_rich`` picks a ``rich`` table (None: when
    rich is installed) or plain text; ``file`` is where it prints (None: standard output). The
    module doc describes the tables; this reads metadata only and never waits.

    Example:
        >>> import io
        >>> import dtorch
        >>> mesh = dtorch.init_device_mesh("cpu", 2)
        >>> t = dtorch.zeros(5, device_mesh=mesh, placements=[dtorch.Partial()])
        >>> text = visualize_sharding(t, header="t", use_rich=False, file=io.StringIO())
        >>> print(text.splitlines()[3])
        0:5 | cpu:0,1 (P)
    """
    if not isinstance(tensor, TensorBase):
        raise TypeError(
            f"visualize_sharding: expected a dtorch.Tensor (or dtorch.nn.Parameter), "
            f"got {type(tensor).__module__}.{type(tensor).__qualname__}"
        )
    table = grid(layout(tuple(tensor.shape), tensor.device_mesh, tensor.placements))
    target = sys.stdout if file is None else file
    if _wants_rich(use_rich):
        return _rich_text(table, header, target)
    text = plain_text(table, header)
    target.write(text)
    return text

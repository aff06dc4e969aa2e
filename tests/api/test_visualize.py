"""visualize_sharding against torch.chunk: every device is named in the cell of the block that
``torch.chunk`` of an index tensor gives it, once, on 1-D/2-D meshes, even and uneven, in the
plain and the rich table, on both runners; other ranks get the flat table; no data is fetched."""

from __future__ import annotations

import io
from collections.abc import Sequence

import pytest
import torch

import dtorch
from dtorch import Partial, Placement, Replicate, Shard
from dtorch.api import visualize
from dtorch.errors import PlacementError

Box = tuple[tuple[int, int], ...]

MESHES = {"1d": (4,), "2d": (2, 3)}

#: (tensor shape, mesh, placements): Shard/Replicate/Partial, nested, uneven, empty shards.
CASES = [
    ((8,), "1d", (Shard(0),)),
    ((5,), "1d", (Shard(0),)),  # torch.chunk: 2, 2, 1 and the fourth device empty
    ((6,), "1d", (Replicate(),)),
    ((6,), "1d", (Partial(),)),
    ((8, 6), "1d", (Shard(1),)),
    ((7, 3), "1d", (Shard(0),)),
    ((3, 5), "1d", (Partial(),)),
    ((4, 6), "2d", (Shard(0), Shard(1))),
    ((5, 7), "2d", (Shard(1), Shard(0))),
    ((11, 4), "2d", (Shard(0), Shard(0))),  # nested: chunks of chunks
    ((6, 5), "2d", (Replicate(), Shard(1))),
    ((6, 5), "2d", (Partial(), Shard(0))),
    ((7,), "2d", (Shard(0), Replicate())),
    ((4, 4), "2d", (Replicate(), Replicate())),
]


def _oracle(
    shape: Sequence[int], mesh: dtorch.DeviceMesh, placements: Sequence[Placement]
) -> dict[int, Box | None]:
    """Each device's box, from torch.chunk of an index tensor per dim (None: it holds none)."""
    out: dict[int, Box | None] = {}
    for device in mesh.device_ids:
        coord = mesh.coordinate_of(device)
        index = [torch.arange(n) for n in shape]
        for m, p in enumerate(placements):
            if isinstance(p, Shard):
                chunks = torch.chunk(index[p.dim], mesh.shape[m])
                index[p.dim] = chunks[coord[m]] if coord[m] < len(chunks) else torch.arange(0)
        empty = any(len(i) == 0 for i in index)
        out[device] = None if empty else tuple((int(i[0]), int(i[-1]) + 1) for i in index)
    return out


def _rows(text: str) -> list[list[str]]:
    """The table's lines as cells, plain (``a | b``) or rich (``│ a │ b │``); rules dropped."""
    rows = []
    for line in text.splitlines():
        if line.startswith("│"):
            rows.append([c.strip() for c in line.strip("│").split("│")])
        elif " | " in line or line.endswith(" |"):
            rows.append([c.strip() for c in line.split(" | ")])
    return rows


def _cells(text: str) -> dict[tuple[str, str], str]:
    """(row label, column header) -> cell text."""
    head, *body = _rows(text)
    return {(row[0], h): cell for row in body for h, cell in zip(head[1:], row[1:], strict=True)}


def _labels(box: Box) -> tuple[str, str]:
    if len(box) == 1:
        return f"{box[0][0]}:{box[0][1]}", "devices"
    return f"Row {box[0][0]}:{box[0][1]}", f"Col {box[1][0]}:{box[1][1]}"


def _devices(cell: str) -> list[int]:
    kind, _, ids = cell.removesuffix(" (P)").partition(":")
    assert kind == "cpu", cell
    return [int(i) for i in ids.split(",")]


def _check(text: str, oracle: dict[int, Box | None], partial: bool) -> None:
    cells = _cells(text)
    named = sorted(d for cell in cells.values() if cell for d in _devices(cell))
    assert named == sorted(d for d, box in oracle.items() if box is not None), text
    for device, box in oracle.items():
        if box is not None:
            cell = cells[_labels(box)]
            assert device in _devices(cell) and cell.endswith(" (P)") == partial, (device, text)
    empty = [d for d, box in oracle.items() if box is None]
    assert (f"empty: cpu:{','.join(map(str, empty))}" in text) == bool(empty), text


def _make(shape, mesh_name, placements, graph):  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", MESHES[mesh_name])
    full = torch.arange(float(torch.Size(shape).numel())).reshape(shape)
    return dtorch.from_torch(full, device_mesh=mesh, placements=list(placements), graph=graph)


@pytest.mark.parametrize(("shape", "mesh_name", "placements"), CASES)
def test_plain_table_names_each_device_at_its_torch_chunk_block(
    shape, mesh_name, placements, graph
) -> None:  # type: ignore[no-untyped-def]
    t = _make(shape, mesh_name, placements, graph)
    out = io.StringIO()
    text = dtorch.visualize_sharding(t, use_rich=False, file=out)
    assert out.getvalue() == text
    partial = any(p.is_partial() for p in placements)
    _check(text, _oracle(shape, t.device_mesh, placements), partial)
    assert ("(P): partial" in text) == partial


@pytest.mark.parametrize(("shape", "mesh_name", "placements"), CASES[1::3])
def test_rich_table_names_the_same_blocks(shape, mesh_name, placements, graph) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("rich")
    t = _make(shape, mesh_name, placements, graph)
    out = io.StringIO()
    text = dtorch.visualize_sharding(t, header="my tensor", use_rich=True, file=out)
    assert "┌" in text and "my tensor" in text and out.getvalue().strip()
    partial = any(p.is_partial() for p in placements)
    _check(text, _oracle(shape, t.device_mesh, placements), partial)


def test_a_wide_rich_table_is_not_cut(graph) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("rich")
    mesh = dtorch.init_device_mesh("cpu", 12)
    t = dtorch.zeros(3, 120, device_mesh=mesh, placements=[Shard(1)], graph=graph)
    text = dtorch.visualize_sharding(t, use_rich=True, file=io.StringIO())
    _check(text, _oracle((3, 120), mesh, (Shard(1),)), partial=False)


def test_the_plain_grid_is_drawn_as_documented(graph) -> None:  # type: ignore[no-untyped-def]
    t = _make((5, 7), "2d", (Shard(0), Replicate()), graph)
    text = dtorch.visualize_sharding(t, header="w", use_rich=False, file=io.StringIO())
    assert text == (
        "w\n        | Col 0:7\n--------+----------\nRow 0:3 | cpu:0,1,2\nRow 3:5 | cpu:3,4,5\n"
    )


@pytest.mark.parametrize(
    ("shape", "placements", "rows"),
    [
        ((2, 3, 5), (Shard(2),), ["[0:2, 0:3, 0:2]", "[0:2, 0:3, 2:4]", "[0:2, 0:3, 4:5]"]),
        ((), (Replicate(),), ["[]"]),
        ((0, 3), (Shard(0),), []),
    ],
)
def test_other_ranks_and_empty_tensors_get_the_flat_table(shape, placements, rows, graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", 4)
    t = dtorch.zeros(shape, device_mesh=mesh, placements=list(placements), graph=graph)
    text = dtorch.visualize_sharding(t, use_rich=False, file=io.StringIO())
    head, *body = _rows(text)
    assert head == ["block", "devices"] and [r[0] for r in body] == rows, text
    oracle = _oracle(shape, mesh, placements)
    for label, cell in body:  # the flat table's box labels against the oracle's boxes
        box = "[" + ", ".join(f"{a}:{b}" for a, b in oracle[_devices(cell)[0]] or ()) + "]"
        assert box == label
    empty = [d for d, box in oracle.items() if box is None]
    assert (f"empty: cpu:{','.join(map(str, empty))}" in text) == bool(empty)


def test_it_records_no_operator_and_fetches_nothing(graph, kinds) -> None:  # type: ignore[no-untyped-def]
    t = _make((6, 4), "2d", (Partial(), Shard(1)), graph)
    before = list(kinds)
    dtorch.visualize_sharding(t, use_rich=False, file=io.StringIO())
    assert kinds == before
    t.to_torch()  # the spy does see a fetch
    assert len(kinds) > len(before)


def test_a_parameter_is_accepted(graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", 2)
    p = dtorch.nn.Parameter(torch.zeros(4), device_mesh=mesh, placements=[Shard(0)], graph=graph)
    text = dtorch.visualize_sharding(p, use_rich=False, file=io.StringIO())
    assert _cells(text) == {("0:2", "devices"): "cpu:0", ("2:4", "devices"): "cpu:1"}


@pytest.mark.parametrize("value", [torch.zeros(2, 2), [1, 2], None])
def test_a_non_dtorch_input_is_a_type_error(value) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError, match=r"expected a dtorch\.Tensor .*got "):
        dtorch.visualize_sharding(value)


def test_prints_to_stdout_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    t = dtorch.zeros(4, device_mesh=dtorch.init_device_mesh("cpu", 2), placements=[Shard(0)])
    text = dtorch.visualize_sharding(t, use_rich=False)
    assert capsys.readouterr().out == text


def test_a_marked_shard_is_refused_with_a_placement_error() -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    with pytest.raises(PlacementError, match="sub_split_coordinates"):
        visualize.layout((8,), mesh, (Shard(0, sub_split_coordinates=(4,)),))


def test_without_rich_the_plain_table_is_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(visualize, "_rich_present", lambda: False)
    t = dtorch.zeros(4, device_mesh=dtorch.init_device_mesh("cpu", 2), placements=[Shard(0)])
    plain = dtorch.visualize_sharding(t, use_rich=False, file=io.StringIO())
    assert dtorch.visualize_sharding(t, file=io.StringIO()) == plain
    with pytest.raises(ImportError, match="rich"):
        dtorch.visualize_sharding(t, use_rich=True, file=io.StringIO())

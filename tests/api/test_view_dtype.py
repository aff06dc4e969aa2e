"""``t.view(dtype)`` and ``t.view(size=...)`` against torch on the full tensor.

``view(dtype)`` reads the same bits as another dtype, on every device's own shard: any
placement works for dtypes of one element size except Partial (the bits of the parts do not
add up), and where the element size differs the last dim's size changes as in torch, so it
must not be sharded. The values are compared bit for bit (random bits: NaNs and infinities
included). Also: the ``size=`` and ``dtype=`` keywords, marked (concatenated) tensors, writes
through the view, traced programs (replayed, saved and loaded) and the codec.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

import dtorch
from dtorch import Partial, Replicate, Shard
from dtorch.errors import DtypeError, KernelError, PlacementError, ShapeError
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import ViewDtypeParam

_G = torch.Generator().manual_seed(17)
_INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _random_bits(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """A tensor of ``dtype`` holding random bits (bools: 0 or 1, the only valid bools)."""
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=_G).bool()
    count = dtype.itemsize * int(torch.Size(shape).numel())
    raw = torch.randint(0, 256, (count,), generator=_G, dtype=torch.uint8)
    return raw.view(dtype).view(shape)


def _bits(t: torch.Tensor) -> torch.Tensor:
    """``t``'s bits as integers (torch.equal holds for equal NaNs then)."""
    return t if t.dtype == torch.bool else t.view(_INT_OF_SIZE[t.dtype.itemsize])


def _same_bits(got: dtorch.Tensor, want: torch.Tensor) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    assert torch.equal(_bits(got.to_torch()), _bits(want))


def _place(full: torch.Tensor, mesh_shape: tuple[int, ...], placements: list[Any]) -> Any:
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    return dtorch.from_torch(full, device_mesh=mesh, placements=placements)


# (mesh shape, placements) of a 2-D tensor whose last dim may be sharded.
ANY_LAYOUT = [
    ((1,), [Replicate()]),
    ((3,), [Shard(0)]),
    ((3,), [Shard(1)]),
    ((2, 2), [Shard(1), Shard(0)]),
    ((2, 2), [Replicate(), Shard(1)]),
]
# ... and those that leave the last dim whole on every device.
LAST_DIM_WHOLE = [
    ((1,), [Replicate()]),
    ((3,), [Shard(0)]),
    ((4,), [Shard(0)]),  # 5 rows over 4 devices: uneven
    ((2, 2), [Shard(0), Replicate()]),
]

SAME_SIZE = [
    (torch.float32, torch.int32),
    (torch.int32, torch.float32),
    (torch.float16, torch.bfloat16),
    (torch.bfloat16, torch.int16),
    (torch.int16, torch.float16),
    (torch.float64, torch.int64),
    (torch.int64, torch.float64),
    (torch.uint8, torch.int8),
    (torch.bool, torch.uint8),
    (torch.float32, torch.float32),
]
OTHER_SIZE = [
    (torch.float32, torch.int16),
    (torch.float32, torch.uint8),
    (torch.int16, torch.float32),
    (torch.uint8, torch.float64),
    (torch.float64, torch.bfloat16),
    (torch.bfloat16, torch.int64),
]


@pytest.mark.parametrize(("mesh_shape", "placements"), ANY_LAYOUT)
@pytest.mark.parametrize(("src", "dst"), SAME_SIZE)
def test_same_element_size_on_any_layout(  # type: ignore[no-untyped-def]
    src, dst, mesh_shape, placements, graph
) -> None:
    full = _random_bits((5, 8), src)
    t = _place(full, mesh_shape, placements)
    for got in (t.view(dst), t.view(dtype=dst)):
        _same_bits(got, full.view(dst))
        assert got.placements == placements


@pytest.mark.parametrize(("mesh_shape", "placements"), LAST_DIM_WHOLE)
@pytest.mark.parametrize(("src", "dst"), OTHER_SIZE)
def test_other_element_size_resizes_the_last_dim(  # type: ignore[no-untyped-def]
    src, dst, mesh_shape, placements, graph
) -> None:
    full = _random_bits((5, 8), src)
    t = _place(full, mesh_shape, placements)
    got = t.view(dst)
    _same_bits(got, full.view(dst))
    assert got.placements == placements
    _same_bits(got.view(src), full)  # and back


def test_one_dim_and_three_dim_tensors(graph: dtorch.Graph) -> None:
    flat = _random_bits((12,), torch.float32)
    _same_bits(_place(flat, (2,), [Replicate()]).view(torch.int8), flat.view(torch.int8))
    _same_bits(_place(flat, (3,), [Shard(0)]).view(torch.int32), flat.view(torch.int32))
    cube = _random_bits((4, 3, 4), torch.int16)
    t = _place(cube, (2, 3), [Shard(0), Shard(1)])
    _same_bits(t.view(torch.float64), cube.view(torch.float64))
    _same_bits(t.view(torch.float16), cube.view(torch.float16))


def test_zero_dim_and_empty_tensors(graph: dtorch.Graph) -> None:
    scalar = torch.tensor(1.5)
    _same_bits(dtorch.from_torch(scalar).view(torch.int32), scalar.view(torch.int32))
    empty = torch.zeros(0, 4)
    got = _place(empty, (2,), [Shard(0)]).view(torch.int64)
    assert got.shape == (0, 2) and got.dtype == torch.int64
    rows = _random_bits((2, 4), torch.float32)  # 2 rows on 3 devices: one holds none
    _same_bits(_place(rows, (3,), [Shard(0)]).view(torch.int64), rows.view(torch.int64))


def test_partial_is_refused_unless_nothing_changes(graph: dtorch.Graph) -> None:
    full = torch.arange(8.0).view(2, 4)
    t = _place(full, (2,), [Partial()])
    for dtype in (torch.int32, torch.int16):
        with pytest.raises(PlacementError, match=r"^view: got \(P,\).*Partial's parts do not"):
            t.view(dtype)
    same = t.view(torch.float32)
    assert same.placements == [Partial()] and torch.equal(same.to_torch(), full)
    mixed = _place(full, (2, 2), [Shard(0), Partial()])
    with pytest.raises(PlacementError, match="redistribute it to Replicate first"):
        mixed.view(torch.int32)
    wanted = full.view(torch.int32)
    _same_bits(mixed.redistribute(placements=[Shard(0), Replicate()]).view(torch.int32), wanted)


def test_a_sharded_last_dim_is_refused_for_another_element_size(graph: dtorch.Graph) -> None:
    t = _place(torch.zeros(4, 8), (2,), [Shard(1)])
    with pytest.raises(PlacementError, match=r"^view: got \(S\(1\),\).*the last dim to Replicate"):
        t.view(torch.int16)
    with pytest.raises(PlacementError, match="the last dim to Replicate"):
        t.view(torch.float64)
    assert t.view(torch.int32).placements == [Shard(1)]  # one size: no dim changes


def test_shapes_torch_refuses(graph: dtorch.Graph) -> None:
    with pytest.raises(RuntimeError, match="divisible by 2"):
        torch.zeros(2, 3).view(torch.int64)
    with pytest.raises(ShapeError, match=r"must be divisible by 2 to view torch\.float32 as"):
        dtorch.zeros(2, 3).view(torch.int64)
    with pytest.raises(RuntimeError, match="cannot be 0"):
        torch.tensor(1.0).view(torch.int16)
    with pytest.raises(ShapeError, match=r"a 0-d tensor cannot be viewed as torch\.int16"):
        dtorch.tensor(1.0).view(torch.int16)


def test_dtypes_no_device_holds_are_refused(graph: dtorch.Graph) -> None:
    t = dtorch.zeros(2, 4)
    for dtype in (torch.quint8, torch.uint4):
        with pytest.raises(DtypeError, match=rf"cannot view a torch\.float32 tensor as {dtype}"):
            t.view(dtype)
    with pytest.raises(TypeError, match=r"view: dtype must be a torch\.dtype .* got 'int32'"):
        t.view(dtype="int32")  # type: ignore[arg-type]


def test_after_a_transpose_as_torch(graph: dtorch.Graph) -> None:
    """One element size views any layout; another needs the last dim contiguous in memory,
    as in torch: the devices fail with torch's message (at the fetch) until ``contiguous()``."""
    full = _random_bits((4, 6), torch.float32)
    t = _place(full, (2,), [Shard(1)]).transpose(0, 1)  # Shard(0) of the (6, 4) result
    _same_bits(t.view(torch.int32), full.t().view(torch.int32))
    with pytest.raises(RuntimeError, match="stride"):
        full.t().view(torch.int16)
    with pytest.raises(KernelError, match=r"view.*stride\(-1\) must be 1"):
        t.view(torch.int16).to_torch()
    want = full.t().contiguous()
    _same_bits(t.contiguous().view(torch.int16), want.view(torch.int16))
    _same_bits(t.contiguous().view(torch.float64), want.view(torch.float64))


def test_marked_tensors_keep_their_mark(graph: dtorch.Graph) -> None:
    a, b = _random_bits((4, 4), torch.float32), _random_bits((6, 4), torch.float32)
    cat = dtorch.cat([_place(a, (2,), [Shard(0)]), _place(b, (2,), [Shard(0)])])
    (mark,) = cat.placements
    assert mark.sub_split_coordinates == (4,)  # type: ignore[attr-defined]
    want = torch.cat([a, b])
    for dtype in (torch.int32, torch.int16, torch.float64):
        got = cat.view(dtype)
        assert got.placements == [mark]
        _same_bits(got, want.view(dtype))


def test_writes_through_the_view_reach_the_base(graph: dtorch.Graph) -> None:
    full = torch.zeros(4, 6)
    t = _place(full, (2,), [Shard(0)])
    v, want = t.view(torch.int32), full.view(torch.int32)
    v += 1
    want += 1
    _same_bits(t, full)
    _same_bits(v, want)


def test_records_one_operator(graph: dtorch.Graph, kinds: list[OpKind]) -> None:
    t = dtorch.zeros(2, 4, graph=graph)
    kinds.clear()
    t.view(torch.int16)
    assert kinds == [OpKind.ViewDtype]


def _abs_by_bits(x: dtorch.Tensor) -> dtorch.Tensor:
    return (x.view(torch.int32) & 0x7FFFFFFF).view(torch.float32).view(torch.int16).view(-1)


def _abs_want(x: torch.Tensor) -> torch.Tensor:
    return x.abs().view(torch.int16).view(-1)


def test_traced_saved_and_loaded(graph: dtorch.Graph, tmp_path: Path) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)

    def place(x: torch.Tensor) -> dtorch.Tensor:
        return dtorch.from_torch(x, device_mesh=mesh, placements=[Shard(0)])

    program = dtorch.trace(_abs_by_bits, place(torch.randn(4, 3, generator=_G)))
    path = tmp_path / "bits.dtorch"
    program.save(path)
    loaded = dtorch.load_program(path, graph=graph)
    for run in (program, loaded):
        x = torch.randn(4, 3, generator=_G)
        _same_bits(run(place(x)), _abs_want(x))


def test_the_codec_carries_the_param() -> None:
    for dtype in (torch.int16, torch.bfloat16, torch.bool):
        read = dtorch.deserialize(dtorch.serialize(ViewDtypeParam(dtype)))
        assert isinstance(read, ViewDtypeParam) and read.dtype is dtype


# --- view(size=...) --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mesh_shape", "placements"), [((1,), [Replicate()]), ((2,), [Shard(0)]), ((2,), [Partial()])]
)
def test_size_keyword(mesh_shape, placements, graph) -> None:  # type: ignore[no-untyped-def]
    full = torch.arange(24.0).view(4, 6)
    t = _place(full, mesh_shape, placements)
    for size in ((4, 3, 2), [4, -1], torch.Size([4, 6])):
        got = t.view(size=size)
        assert got.shape == full.view(size=size).shape
        assert torch.equal(got.to_torch(), full.view(size=size))
    with pytest.raises(TypeError):
        full.view(24, size=(24,))
    with pytest.raises(TypeError, match="give one of"):
        t.view(24, size=(24,))
    with pytest.raises(TypeError, match="give one of"):
        t.view(size=(24,), dtype=torch.int32)
    with pytest.raises(TypeError, match="not both"):
        t.view(size=(24,), placements=[Replicate()] * len(mesh_shape))

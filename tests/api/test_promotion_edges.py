"""Promotion and conversion edges against torch on the full tensor, where dtorch's composite
forms once differed: ``clamp`` promotes its three operands at once (not step by step), a 0-d
torch tensor in ``where``/``clamp`` keeps its dtype, setitem drops a value's leading size-1
dims, complex ``addcdiv``/``addcmul`` keep torch's infinities, a number written by ``copy_``
or through a mask converts as torch converts it, and ``rsub``; thread and process mode."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

import dtorch
from dtorch import Replicate, Shard
from tests.api.ops_harness import place

pytestmark = pytest.mark.timeout(120)

_INF, _NAN = math.inf, math.nan


def _same(got: torch.Tensor, want: torch.Tensor) -> None:
    """Equal dtype and values, NaN where torch has NaN (complex parts compared apart)."""
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.is_complex():
        got, want = torch.view_as_real(got), torch.view_as_real(want)
    torch.testing.assert_close(got, want, equal_nan=True, rtol=0, atol=0)


def _mesh() -> dtorch.DeviceMesh:
    return dtorch.init_device_mesh("cpu", (2, 2))


def _on(graph: Any, value: Any, placements: list | None = None) -> Any:
    """A torch tensor with dims as a dtorch one (Replicate unless given); others as they are."""
    if not isinstance(value, torch.Tensor) or (value.ndim == 0 and placements is None):
        return value
    return place(value, _mesh(), placements or [Replicate(), Replicate()], graph)


_BOOLS = torch.tensor([True, False, True, True])
_I8 = torch.tensor([1, 5, -3, 2], dtype=torch.int8)
_U8_0D, _I32_0D = torch.tensor(2, dtype=torch.uint8), torch.tensor(3, dtype=torch.int32)
_I16_0D, _BF16_0D = torch.tensor(1, dtype=torch.int16), torch.tensor(0.5, dtype=torch.bfloat16)
_U8 = torch.tensor([2, 3, 2, 3], dtype=torch.uint8)
_F16 = torch.tensor([2.0, 3.0, 4.0, 5.0], dtype=torch.float16)
_F64_0D = torch.tensor(0.5, dtype=torch.float64)

#: (input, min, max): torch promotes all three at once; a 0-d bound ranks below a bound with
#: dims of its category, a 0-d torch bound beside a number is a number.
_CLAMPS = [
    (_BOOLS, _U8_0D, _I32_0D),
    (_BOOLS, _I16_0D, _U8),
    (_I8, _BF16_0D, _F16),
    (_BOOLS, _U8_0D, None),
    (_BOOLS, None, torch.tensor(2.5, dtype=torch.bfloat16)),
    (_I8, _F64_0D, torch.tensor(2.0, dtype=torch.float64)),
    (_BOOLS, _U8_0D, 3.5),
    (_I8, 0, 3.5),
]


@pytest.mark.parametrize("dtorch_bounds", [False, True], ids=["torch 0-d", "dtorch 0-d"])
@pytest.mark.parametrize(("x", "low", "high"), _CLAMPS)
def test_clamp_promotes_all_three_operands_as_torch(x, low, high, dtorch_bounds, graph) -> None:
    want = torch.clamp(x, low, high)
    bound = lambda b: _on(graph, b, [Replicate()] * 2) if dtorch_bounds else _on(graph, b)  # noqa: E731
    t = place(x, _mesh(), [Shard(0), Replicate()], graph)
    _same(torch.clamp(t, bound(low), bound(high)).to_torch(), want)
    _same(t.clamp(bound(low), bound(high)).to_torch(), x.clamp(low, high))
    if want.dtype == x.dtype:  # in place: the input's dtype must hold the result
        _same(t.clone().clamp_(bound(low), bound(high)).to_torch(), x.clone().clamp_(low, high))


def test_clamp_refuses_a_tensor_and_a_number_as_torch(graph) -> None:
    x = torch.tensor([1.0, 5.0, -3.0])
    with pytest.raises(TypeError):
        torch.clamp(x, torch.tensor([0.0, 1.0, 2.0]), 2.0)
    t = _on(graph, x)
    with pytest.raises(TypeError, match="both bounds as tensors or both as numbers"):
        torch.clamp(t, _on(graph, torch.tensor([0.0, 1.0, 2.0])), 2.0)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (_I8, _F64_0D),
        (_F64_0D, _I8),
        (torch.tensor(2, dtype=torch.int16), torch.tensor(1.5, dtype=torch.float16)),
        (1.5, torch.tensor(2, dtype=torch.int16)),
        (torch.tensor(7, dtype=torch.uint8), 3),
    ],
)
def test_where_keeps_a_zero_dim_torch_tensors_dtype(a, b, graph) -> None:
    condition = _I8 > 2
    got = torch.where(
        place(condition, _mesh(), [Shard(0), Replicate()], graph), _on(graph, a), _on(graph, b)
    )
    _same(got.to_torch(), torch.where(condition, a, b))


#: (index, value): torch drops a value's leading size-1 dims before broadcasting it.
_SETS: list[tuple[Any, torch.Tensor]] = [
    (0, torch.tensor([7.0])),
    (slice(1, 3), torch.tensor([[7.0, 8.0]])),
    ((Ellipsis,), torch.ones(1, 1, 4)),
    ([0, 2], torch.tensor([[7.0, 8.0]])),
    ([1], torch.ones(1, 1, 1)),
    ("mask", torch.tensor([[7.0]])),
]


@pytest.mark.parametrize("value_on_devices", [False, True], ids=["torch value", "dtorch value"])
@pytest.mark.parametrize("layout", [[Shard(0), Replicate()], [Replicate(), Replicate()]])
@pytest.mark.parametrize(("index", "value"), _SETS, ids=[str(i) for i, _ in _SETS])
def test_setitem_drops_leading_ones_of_the_value(index, value, layout, value_on_devices, graph):
    full = torch.arange(4.0)
    want, t = full.clone(), place(full, _mesh(), layout, graph)
    mask = index == "mask"
    want[full > 1.5 if mask else index] = value
    t[t > 1.5 if mask else index] = _on(graph, value) if value_on_devices else value
    _same(t.to_torch(), want)


def test_setitem_names_sharded_leading_ones(graph) -> None:
    t = place(torch.zeros(4), _mesh(), [Shard(0), Replicate()], graph)
    value = place(torch.ones(1, 2), _mesh(), [Shard(0), Replicate()], graph)
    with pytest.raises(RuntimeError, match="leading size-1 dims, but a mesh dim shards one"):
        t[1:3] = value


def _specials(seed: int) -> list[torch.Tensor]:
    """Three complex vectors of 0, ±1, ±inf, NaN and 0.5 parts (the third real at times)."""
    g = torch.Generator().manual_seed(seed)
    values = torch.tensor([0.0, 1.0, -1.0, _INF, -_INF, _NAN, 0.5])
    parts = values[torch.randint(0, len(values), (3, 2, 6), generator=g)]
    made = [torch.complex(re, im) for re, im in parts]
    return [*made[:2], made[2].real.clone() if seed % 2 else made[2]]


@pytest.mark.parametrize("value", [1, 2, -0.5])
@pytest.mark.parametrize("name", ["addcdiv", "addcmul"])
def test_complex_addc_keeps_torchs_infinities(name, value, graph) -> None:
    """torch's kernels add ``input + (value * t1) / t2`` plainly, where ``add`` would compute
    ``input + 1·q`` (NaN from an infinite ``q``), and multiply by ``value`` even when it is 1."""
    ours, theirs = getattr(dtorch, name), getattr(torch, name)
    for seed in range(40):
        args = _specials(seed)
        placed = [place(a, _mesh(), [Shard(0), Replicate()], graph) for a in args]
        _same(ours(*placed, value=value).to_torch(), theirs(*args, value=value))


@pytest.mark.parametrize(
    "dtype", [torch.uint8, torch.int8, torch.float16, torch.bfloat16, torch.bool, torch.int32]
)
def test_a_number_written_by_copy_or_a_mask_converts_as_torch(dtype, graph) -> None:
    """``copy_(number)`` converts a 0-d int64/double tensor (300 wraps to 44 in uint8, 1e10 is
    inf in float16); ``t[mask] = number`` refuses what the dtype cannot hold unless it is a
    float dtype, where it is inf; ``fill_`` refuses both."""
    for number in (300, -129, 1e10, 7e4, 2.7, -1, True, torch.tensor(300)):
        want = torch.zeros(4, dtype=dtype)
        t = place(want.clone(), _mesh(), [Shard(0), Replicate()], graph)
        _same(t.copy_(number).to_torch(), want.copy_(number))
        if isinstance(number, torch.Tensor):
            continue  # torch's masked write of a tensor value checks it as a number: dtorch's
            # value is on the devices (docs/compatibility.md)
        try:
            _write_everywhere(want, number)
        except RuntimeError:
            with pytest.raises(RuntimeError, match="overflow"):
                _write_everywhere(t, number)
        else:
            _write_everywhere(t, number)
            _same(t.to_torch(), want)


def _write_everywhere(t: Any, number: Any) -> None:
    t[t.isfinite()] = number  # a mask that holds everywhere


def test_rsub_matches_torch(graph) -> None:
    x = torch.tensor([1.0, 2.0, -3.0, 4.0])
    t = place(x, _mesh(), [Shard(0), Replicate()], graph)
    for other, alpha in ((5, 1), (2.5, 2), (torch.tensor(3), -1), (x.flip(0), 3)):
        mine = _on(graph, other)
        _same(dtorch.rsub(t, mine, alpha=alpha).to_torch(), torch.rsub(x, other, alpha=alpha))
        _same(torch.rsub(t, mine, alpha=alpha).to_torch(), torch.rsub(x, other, alpha=alpha))
    ints = place(torch.tensor([1, 2]), _mesh(), [Replicate(), Replicate()], graph)
    with pytest.raises(RuntimeError, match="alpha must not be a floating point"):
        dtorch.rsub(ints, 3, alpha=0.5)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (_I8, 2.5),
        (_I8, _F64_0D),
        (_F64_0D, _I8),
        (_F16, _F64_0D),
        (_I8, True),
        (2, _I8),
        (_I8, _F16),
    ],
)
def test_result_type_is_torchs(a, b, graph) -> None:
    """From the dtypes and whether each has dims, as torch's: nothing is read."""
    ours = lambda v: _on(graph, v, [Replicate(), Replicate()]) if isinstance(v, torch.Tensor) else v  # noqa: E731
    assert torch.result_type(ours(a), ours(b)) == torch.result_type(a, b)
    assert dtorch.result_type(ours(a), ours(b)) == torch.result_type(a, b)


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64])
def test_masked_fill_by_a_tensor_refuses_dtypes_torch_has_no_kernel_for(dtype, graph) -> None:
    """As the number form is refused: torch's masked_fill has no kernel for these."""
    x, mask = torch.zeros(4, dtype=dtype), torch.tensor([True, False, True, False])
    with pytest.raises(NotImplementedError):
        x.masked_fill(mask, torch.tensor(7, dtype=dtype))
    t = _on(graph, x, [Shard(0), Replicate()])
    value = _on(graph, torch.tensor(7, dtype=dtype), [Replicate(), Replicate()])
    with pytest.raises(NotImplementedError, match="not implemented for"):
        t.masked_fill(_on(graph, mask, [Shard(0), Replicate()]), value)
    assert t.tolist() == [0, 0, 0, 0]

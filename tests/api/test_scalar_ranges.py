"""Python numbers a tensor's dtype cannot hold, against torch on the full tensor: where torch
refuses one (``int8.clamp(min=300)``, ``int8 ** 2**40``, ``uint8 % 256``: a divisor that
wraps to 0, ``int32.masked_fill(m, nan)``, ``uint8[0] = 300``) dtorch refuses it at the
call, with torch's class family and message; where torch takes it (wrapping, promoting:
``uint8.clamp(min=-1)``, ``where(c, float16, 1e6)``, ``int8 // 300``) dtorch gives torch's
values. Also ``add``/``sub`` of a bool number scaled by ``alpha`` (a bool result stays bool)
and ``masked_fill`` of a real tensor by a complex 0-d tensor (refused at the call)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import torch

import dtorch
from dtorch.errors import DTorchError, KernelError
from tests.api.ops_harness import S0, R, compare, place

pytestmark = pytest.mark.timeout(120)

I8 = torch.tensor([[1, -2, 3, 4], [5, -6, 7, 8]], dtype=torch.int8)
U8 = torch.tensor([[0, 1, 2, 5], [7, 9, 200, 255]], dtype=torch.uint8)
F16 = I8.to(torch.float16)
I32 = I8.to(torch.int32)
F32 = I8.to(torch.float32)
B = I8 > 2
NAN, INF = float("nan"), float("inf")
IDX = torch.tensor([0, 2])

#: A case: ``fn(lib, x)`` with ``lib`` torch or dtorch and ``x`` the full tensor or its
#: distributed twin (in-place forms return ``x``).
Case = tuple[str, torch.Tensor, Callable[[Any, Any], Any]]


def _setitem(index: Any, value: Any) -> Callable[[Any, Any], Any]:
    def run(lib: Any, x: Any) -> Any:
        x[_index(lib, x, index)] = value
        return x

    return run


def _index(lib: Any, x: Any, index: Any) -> Any:
    """A tensor index as ``lib`` takes it (a dtorch one on ``x``'s mesh)."""
    if not isinstance(index, torch.Tensor) or lib is torch:
        return index
    return dtorch.from_torch(index, device_mesh=x.device_mesh, placements=[R])


def _mask(lib: Any, x: Any) -> Any:
    """``x > 2``, of ``x``'s own kind."""
    return x > 2


def _like(lib: Any, x: Any, value: Any) -> Any:
    """A 0-d tensor of ``value`` beside ``x``."""
    if lib is torch:
        return torch.tensor(value)
    return dtorch.tensor(value, device_mesh=x.device_mesh)


def _iop(op: Callable[[Any, Any], Any], value: Any) -> Callable[[Any, Any], Any]:
    """An augmented assignment, ``x op= value``, returning ``x``."""

    def run(lib: Any, x: Any) -> Any:
        return op(x, value)

    return run


def _ipow(x: Any, v: Any) -> Any:
    x **= v
    return x


def _ifloordiv(x: Any, v: Any) -> Any:
    x //= v
    return x


def _imod(x: Any, v: Any) -> Any:
    x %= v
    return x


#: Item 1: numbers the dtype cannot hold where torch converts with a check.
CONVERTED: list[Case] = [
    ("i8.clamp(min=300)", I8, lambda L, x: x.clamp(min=300)),
    ("i8.clamp(min=-200)", I8, lambda L, x: x.clamp(min=-200)),
    ("clamp(i8, max=2**40)", I8, lambda L, x: L.clamp(x, max=2**40)),
    ("u8.clamp(min=-1)", U8, lambda L, x: x.clamp(min=-1)),
    ("u8.clamp(max=-255)", U8, lambda L, x: x.clamp(max=-255)),
    ("u8.clamp(max=-256)", U8, lambda L, x: x.clamp(max=-256)),
    ("i8.clamp(min=300.0)", I8, lambda L, x: x.clamp(min=300.0)),
    ("i8.clamp(min=nan)", I8, lambda L, x: x.clamp(min=NAN)),
    ("f16.clamp(min=1e6)", F16, lambda L, x: x.clamp(min=1e6)),
    ("f16.clamp(max=inf)", F16, lambda L, x: x.clamp(max=INF)),
    ("b.clamp(min=300)", B, lambda L, x: x.clamp(min=300)),
    ("clamp_min(i8, 300)", I8, lambda L, x: L.clamp_min(x, 300)),
    ("i8.clamp_max(2**40)", I8, lambda L, x: x.clamp_max(2**40)),
    ("i8.clamp_(min=300)", I8, lambda L, x: x.clamp_(min=300)),
    ("i8.clamp_(min=-100)", I8, lambda L, x: x.clamp_(min=-100)),
    ("i8 ** 2**40", I8, lambda L, x: x ** 2**40),
    ("i8 ** 300", I8, lambda L, x: x**300),
    ("pow(i8, 2**63)", I8, lambda L, x: L.pow(x, 2**63)),
    ("f16 ** 2**40", F16, lambda L, x: x ** 2**40),
    ("f16 ** 1e6", F16, lambda L, x: x**1e6),
    ("i8.pow_(300)", I8, lambda L, x: x.pow_(300)),
    ("i8 **= 2**40", I8, _iop(_ipow, 2**40)),
    ("empty i8 ** 300", I8[:, :0], lambda L, x: x**300),
    ("i8 ** 2.0**40", I8, lambda L, x: x**2.0**40),
    ("f32 ** 1e300", F32, lambda L, x: x**1e300),
    ("300 ** i8", I8, lambda L, x: 300**x),
    ("1e6 ** f16", F16, lambda L, x: 1e6**x),
    ("i8 + 2**40", I8, lambda L, x: x + 2**40),
    ("i8 * 1000", I8, lambda L, x: x * 1000),
    ("where(c, u8, 300)", U8, lambda L, x: L.where(_mask(L, x), x, 300)),
    ("where(c, 300, u8)", U8, lambda L, x: L.where(_mask(L, x), 300, x)),
    ("where(c, u8, -1)", U8, lambda L, x: L.where(_mask(L, x), x, -1)),
    ("where(c, u8, -300)", U8, lambda L, x: L.where(_mask(L, x), x, -300)),
    ("where(c, u8, 300.0)", U8, lambda L, x: L.where(_mask(L, x), x, 300.0)),
    ("where(c, f16, 1e6)", F16, lambda L, x: L.where(_mask(L, x), x, 1e6)),
    ("where(c, f16, 2**40)", F16, lambda L, x: L.where(_mask(L, x), x, 2**40)),
    ("where(c, i32, nan)", I32, lambda L, x: L.where(_mask(L, x), x, NAN)),
    ("where(c, b, 300)", B, lambda L, x: L.where(x, x, 300)),
    ("where(c, 300, 1)", I8, lambda L, x: L.where(_mask(L, x), 300, 1)),
    ("i32.masked_fill(m, nan)", I32, lambda L, x: x.masked_fill(_mask(L, x), NAN)),
    ("i32.masked_fill(m, -inf)", I32, lambda L, x: x.masked_fill(_mask(L, x), -INF)),
    ("u8.masked_fill(m, 300)", U8, lambda L, x: x.masked_fill(_mask(L, x), 300)),
    ("u8.masked_fill(m, -1)", U8, lambda L, x: x.masked_fill(_mask(L, x), -1)),
    ("i8.masked_fill(m, 1000.0)", I8, lambda L, x: x.masked_fill(_mask(L, x), 1000.0)),
    ("i8.masked_fill(m, 1.5)", I8, lambda L, x: x.masked_fill(_mask(L, x), 1.5)),
    ("f16.masked_fill(m, 1e6)", F16, lambda L, x: x.masked_fill(_mask(L, x), 1e6)),
    ("b.masked_fill(m, 300)", B, lambda L, x: x.masked_fill(x, 300)),
    ("b.masked_fill(m, nan)", B, lambda L, x: x.masked_fill(x, NAN)),
    ("u8.masked_fill(none, 300)", U8, lambda L, x: x.masked_fill(x > 255, 300)),
    ("masked_fill(i32, m, nan)", I32, lambda L, x: L.masked_fill(x, _mask(L, x), NAN)),
    ("u8.masked_fill_(m, 300)", U8, lambda L, x: x.masked_fill_(_mask(L, x), 300)),
    ("i8.index_fill(1, idx, 300)", I8, lambda L, x: x.index_fill(1, _index(L, x, IDX), 300)),
    ("u8[0] = 300", U8, _setitem(0, 300)),
    ("u8[0, 1] = -1", U8, _setitem((0, 1), -1)),
    ("u8[1:, 2:2] = 300", U8, _setitem((slice(1, None), slice(2, 2)), 300)),
    ("i32[:, 0] = nan", I32, _setitem((slice(None), 0), NAN)),
    ("i8[0] = 1000.0", I8, _setitem(0, 1000.0)),
    ("i8[0] = 3.7", I8, _setitem(0, 3.7)),
    ("f16[1] = 1e6", F16, _setitem(1, 1e6)),
    ("b[0] = 300", B, _setitem(0, 300)),
    ("i32[mask] = nan", I32, _setitem(I32 > 2, NAN)),
    ("u8[mask] = 300", U8, _setitem(U8 > 2, 300)),
    ("u8[:, idx] = 300", U8, _setitem((slice(None), torch.tensor([0, 3])), 300)),
    ("u8[:, idx] = -2", U8, _setitem((slice(None), torch.tensor([0, 3])), -2)),
]  # fmt: skip

#: Item 2: divisors that convert to 0 in the integer result dtype.
DIVISORS: list[Case] = [
    ("u8 % 256", U8, lambda L, x: x % 256),
    ("u8 % -256", U8, lambda L, x: x % -256),
    ("i8 // 2**40", I8, lambda L, x: x // 2**40),
    ("i32 // 2**32", I32, lambda L, x: x // 2**32),
    ("i8 // 2**63", I8, lambda L, x: x // 2**63),
    ("fmod(i8, 2**40)", I8, lambda L, x: L.fmod(x, 2**40)),
    ("i8.fmod(-2**63)", I8, lambda L, x: x.fmod(-(2**63))),
    ("u8 % 512", U8, lambda L, x: x % 512),
    ("div(i8, 256, floor)", I8, lambda L, x: L.div(x, 256, rounding_mode="floor")),
    ("div(i8, 2**40, trunc)", I8, lambda L, x: L.div(x, 2**40, rounding_mode="trunc")),
    ("i8.div_(256, floor)", I8, lambda L, x: x.div_(256, rounding_mode="floor")),
    ("u8 //= 256", U8, _iop(_ifloordiv, 256)),
    ("i8 %= 2**40", I8, _iop(_imod, 2**40)),
    ("u8.floor_divide_(256)", U8, lambda L, x: x.floor_divide_(256)),
    ("u8.remainder_(256)", U8, lambda L, x: x.remainder_(256)),
    ("i8 // False", I8, lambda L, x: x // False),
    ("i8 // 300", I8, lambda L, x: x // 300),
    ("u8 // -1", U8, lambda L, x: x // -1),
    ("u8 % 257", U8, lambda L, x: x % 257),
    ("i64 // 2**63", I8.long(), lambda L, x: x // 2**63),
    ("i64 % 2**63", I8.long(), lambda L, x: x % 2**63),
    ("empty u8 % 256", U8[:, :0], lambda L, x: x % 256),
    ("u8 / 256", U8, lambda L, x: x / 256),
    ("f16 // 2**40", F16, lambda L, x: x // 2**40),
]  # fmt: skip

#: Item 3: ``alpha`` scales a number in the result dtype (a bool one stays bool).
ALPHAS: list[Case] = [
    ("add(b, True, alpha=2)", B, lambda L, x: L.add(x, True, alpha=2)),
    ("add(b, True, alpha=0)", B, lambda L, x: L.add(x, True, alpha=0)),
    ("add(b, False, alpha=2)", B, lambda L, x: L.add(x, False, alpha=2)),
    ("add(b, True, alpha=True)", B, lambda L, x: L.add(x, True, alpha=True)),
    ("add(b, True, alpha=-1)", B, lambda L, x: L.add(x, True, alpha=-1)),
    ("add(b, True, alpha=2.5)", B, lambda L, x: L.add(x, True, alpha=2.5)),
    ("b.add(True, alpha=2)", B, lambda L, x: x.add(True, alpha=2)),
    ("b.add_(True, alpha=2)", B, lambda L, x: x.add_(True, alpha=2)),
    ("add(True, b, alpha=2)", B, lambda L, x: L.add(True, x, alpha=2)),
    ("add(False, b, alpha=3)", B, lambda L, x: L.add(False, x, alpha=3)),
    ("add(True, b, alpha=2.5)", B, lambda L, x: L.add(True, x, alpha=2.5)),
    ("add(b, 1, alpha=2)", B, lambda L, x: L.add(x, 1, alpha=2)),
    ("add(1, b, alpha=2)", B, lambda L, x: L.add(1, x, alpha=2)),
    ("add(i8, True, alpha=3)", I8, lambda L, x: L.add(x, True, alpha=3)),
    ("add(f32, True, alpha=2.5)", F32, lambda L, x: L.add(x, True, alpha=2.5)),
    ("add(i8, 100, alpha=3)", I8, lambda L, x: L.add(x, 100, alpha=3)),
    ("sub(b, True, alpha=2)", B, lambda L, x: L.sub(x, True, alpha=2)),
    ("sub(i8, True, alpha=3)", I8, lambda L, x: L.sub(x, True, alpha=3)),
]  # fmt: skip


def _tensor_fill(value: complex | float, method: str = "masked_fill") -> Callable[..., Any]:
    """``x.<method>(x > 2, tensor(value))`` (``masked_fill``, ``masked_fill_``)."""
    return lambda L, x: getattr(x, method)(_index(L, x, F32 > 2), _like(L, x, value))


def _tensor_index_fill(value: complex) -> Callable[..., Any]:
    """``x.index_fill(1, tensor([1]), tensor(value))``."""
    return lambda L, x: x.index_fill(1, _index(L, x, torch.tensor([1])), _like(L, x, value))


C64 = F32.to(torch.complex64)

#: Item 4: a complex 0-d tensor filling a real tensor.
COMPLEX_FILLS: list[Case] = [
    ("f32.masked_fill(m, tensor(1+1j))", F32, _tensor_fill(1 + 1j)),
    ("i32.masked_fill(m, tensor(2+1j))", I32, _tensor_fill(2 + 1j)),
    ("masked_fill(f32, m, 1j)", F32, lambda L, x: L.masked_fill(x, x > 2, _like(L, x, 1j))),
    ("f32.masked_fill_(m, tensor(1+1j))", F32, _tensor_fill(1 + 1j, "masked_fill_")),
    ("f32[mask] = tensor(1+1j)", F32, lambda L, x: _setitem(x > 2, _like(L, x, 1 + 1j))(L, x)),
    ("c64.masked_fill(m, tensor(1+1j))", C64, _tensor_fill(1 + 1j)),
    ("b.masked_fill(m, tensor(1+1j))", B, _tensor_fill(1 + 1j)),
    ("f32.masked_fill(m, tensor(2.5))", F32, _tensor_fill(2.5)),
    ("f32.index_fill(1, idx, tensor(1+0j))", F32, _tensor_index_fill(1 + 0j)),
    ("b.index_fill(1, idx, tensor(1+1j))", B, _tensor_index_fill(1 + 1j)),
    ("c64.index_fill(1, idx, tensor(1+1j))", C64, _tensor_index_fill(1 + 1j)),
]  # fmt: skip


def _first_line(error: BaseException) -> str:
    return str(error).split("\n", 1)[0]


def check_case(graph: dtorch.Graph, case: Case) -> None:
    """torch's answer on the full tensor, or its refusal raised by dtorch at the call (not a
    KernelError at the fetch) with torch's class family and the gist of its message."""
    name, full, fn = case
    mesh = dtorch.init_device_mesh("cpu", (2,))
    try:
        want = fn(torch, full.clone())
    except (RuntimeError, TypeError, ValueError) as error:
        x = place(full, mesh, [S0], graph)
        with pytest.raises(type(error)) as raised:
            fn(dtorch, x)  # at the call: nothing is fetched here
        assert isinstance(raised.value, DTorchError), f"{name}: {raised.value!r}"
        assert not isinstance(raised.value, KernelError), f"{name}: {raised.value!r}"
        gist = re.escape(_first_line(error)[:60])
        assert re.search(gist, str(raised.value)), f"{name}: {raised.value} vs torch's {error}"
        assert (x + 0).to_torch().equal(full + 0), f"{name}: the input changed"
        return
    got = fn(dtorch, place(full, mesh, [S0], graph))
    compare(got.to_torch(), want, True, name)


#: Every case above, its id prefixed by its family.
_FAMILIES = {
    "converted": CONVERTED,
    "divisor": DIVISORS,
    "alpha": ALPHAS,
    "complex-fill": COMPLEX_FILLS,
}
_CASES = [(f"{family}-{case[0]}", case) for family, cases in _FAMILIES.items() for case in cases]


@pytest.mark.parametrize("case", [c for _, c in _CASES], ids=[i for i, _ in _CASES])
def test_numbers_as_torch(graph: dtorch.Graph, case: Case) -> None:
    """Numbers a dtype cannot hold, divisors that wrap to 0, alpha in the result dtype and
    complex fill values: torch's result, or torch's refusal at the call."""
    check_case(graph, case)


def test_refusal_leaves_the_graph_usable(graph: dtorch.Graph) -> None:
    """A refused number records nothing: the next operator on the same tensor runs."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    x = place(U8, mesh, [S0], graph)
    with pytest.raises(RuntimeError, match="without overflow"):
        x.clamp(min=300)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        x % 256
    assert (x % 7).to_torch().equal(U8 % 7)

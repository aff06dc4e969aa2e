"""Operators at the edges of the layout space, through the public API against torch:
single-device tensors, meshes whose device ids do not start at 0, devices holding empty shards
(fewer rows than devices), chains of operators whose Partial and sharded results feed the next
one, and a device-side failure (its error names the operator and the user's line, and the
graph keeps working)."""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import dtorch
import dtorch.nn.functional as DF
from dtorch.errors import KernelError
from tests.api.ops_harness import (
    S0,
    S1,
    P,
    R,
    elementwise_table,
    expected_layout,
    place,
    run_api,
    sample,
)
from tests.simulate import layout_combos

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(8080)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(8080)


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=_G)


def _cat(t: Any) -> Any:
    return torch.cat([t, t], 1) if isinstance(t, torch.Tensor) else dtorch.cat([t, t], 1)


#: One-input programs (dtorch and torch spell them alike), the operator that refuses a layout
#: first, and whether the result is exact.
_PROGRAMS: list[tuple[str, Callable[[Any], Any], bool]] = [
    ("exp", lambda t: t.exp(), False),
    ("relu", lambda t: t.relu() * 2 - 1, True),
    ("sum", lambda t: t.sum(0), False),
    ("sum", lambda t: t.sum(1, keepdim=True), False),
    ("mean", lambda t: t.mean(), False),
    ("max", lambda t: t.max(1).values, True),
    ("argmin", lambda t: t.argmin(1), True),
    ("softmax", lambda t: t.softmax(1), False),
    ("reshape", lambda t: t.reshape(-1), True),
    ("add", lambda t: (t + 1).T, True),
    ("getitem", lambda t: t[:, 1:], True),
    ("cat", _cat, True),
    ("matmul", lambda t: t @ t.T, False),
    ("gt", lambda t: (t > 0).float() * t, True),
]
_IDS = [f"{i}-{p[0]}" for i, p in enumerate(_PROGRAMS)]


@pytest.mark.parametrize(("name", "program", "exact"), _PROGRAMS, ids=_IDS)
def test_single_device_tensors(name: str, program: Any, exact: bool, graph) -> None:  # type: ignore[no-untyped-def]
    """A tensor on one device (``device="cpu:2"``) is Replicate on a (1,) mesh; every operator runs
    there and keeps it there."""
    x = _randn(3, 4)
    t = dtorch.from_torch(x, device="cpu:2", graph=graph)
    out = program(t)
    assert out.placements == [dtorch.Replicate()] and not out.is_dtensor
    assert out.device_mesh == dtorch.DeviceMesh("cpu", 2)
    want = program(x)
    if exact:
        assert torch.equal(out.to_torch(), want)
    else:
        torch.testing.assert_close(out.to_torch(), want)


@pytest.mark.parametrize(("name", "program", "exact"), _PROGRAMS, ids=_IDS)
def test_empty_shards(name: str, program: Any, exact: bool, graph) -> None:  # type: ignore[no-untyped-def]
    """A (2, 3) tensor over 4 devices: two devices hold empty row shards, one an empty
    column shard; every accepted layout gives torch's values."""
    x = _randn(2, 3)
    accepted = run_api(graph, name, program, [x], (4,), [program(x)], table=None, exact=exact)
    assert accepted
    nested = run_api(
        graph, name, program, [x], (2, 3), [program(x)], table=None, exact=exact, limit=12
    )
    assert nested


def test_mesh_with_offset_device_ids(graph: dtorch.Graph) -> None:
    """A 2-D mesh of devices 4..9: matmul to Partial, a reduction and a fetch."""
    mesh = dtorch.DeviceMesh("cpu", [[4, 5, 6], [7, 8, 9]], mesh_dim_names=("dp", "tp"))
    a, b = _randn(5, 6), _randn(6, 4)
    c = place(a, mesh, [S0, S1], graph) @ place(b, mesh, [R, S0], graph)
    assert c.placements == [S0, P] and c.device_mesh == mesh
    torch.testing.assert_close(c.to_torch(), a @ b)
    total = (c * 2).sum(0)
    assert total.placements == [P, P]
    torch.testing.assert_close(total.to_torch(), (a @ b * 2).sum(0))
    positive = c.redistribute(mesh, [S0, R]) > 0
    assert positive.placements == [S0, R]
    assert torch.equal(dtorch.nonzero(positive).to_torch(), torch.nonzero(a @ b > 0))


def test_chained_partials_and_shards(graph: dtorch.Graph) -> None:
    """A small attention-like block on a (2, 2) mesh: scores = q @ k^T sharded on heads and
    contracted dim, softmax after an explicit redistribution, weighted sum, residual."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    q, k, v = _randn(2, 5, 6), _randn(2, 5, 6), _randn(2, 5, 6)
    tq = place(q, mesh, [S0, dtorch.Shard(2)], graph)
    tk = place(k, mesh, [S0, dtorch.Shard(2)], graph)
    tv = place(v, mesh, [S0, R], graph)
    scores = tq @ tk.transpose(1, 2) / 6**0.5
    assert scores.placements == [S0, P]
    weights = scores.redistribute(mesh, [S0, S1]).softmax(-1)
    assert weights.placements == [S0, S1]
    out = weights @ tv + tq.redistribute(mesh, [S0, R])
    assert out.placements == [S0, S1]
    want = torch.softmax(q @ k.transpose(1, 2) / 6**0.5, -1) @ v + q
    torch.testing.assert_close(out.to_torch(), want)
    loss = F.mse_loss(want, torch.zeros_like(want))
    got = (out * out).mean()
    assert got.placements == [P, P]
    torch.testing.assert_close(got.to_torch(), loss)
    torch.testing.assert_close(DF.silu(out).sum(-1).to_torch(), F.silu(want).sum(-1))


def test_device_failure_names_the_operator_and_line(graph: dtorch.Graph) -> None:
    """An integer division by zero fails on the devices: the fetch raises KernelError naming
    the operator and this file's line; dependent values fail too; the graph keeps working."""
    mesh = dtorch.init_device_mesh("cpu", 3)
    x = torch.arange(6).reshape(3, 2)
    t = place(x, mesh, [S0], graph)
    line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
    bad = operator.floordiv(t, place(torch.zeros(3, 2, dtype=torch.int64), mesh, [S0], graph))
    with pytest.raises(KernelError, match=rf"floor_divide.*test_ops_edges\.py:{line}"):
        bad.to_torch()
    with pytest.raises(dtorch.DTorchError):
        (bad + 1).to_torch()
    assert torch.equal((t * 2).to_torch(), x * 2)
    assert torch.equal(t.sum(0).to_torch(), x.sum(0))


#: dtorch.* functions called with torch's keyword names, and the torch call.
_KEYWORDS: list[tuple[Callable[[Any], Any], Callable[[Any], Any]]] = [
    (lambda a: dtorch.add(input=a, other=a, alpha=2), lambda a: torch.add(a, a, alpha=2)),
    (lambda a: dtorch.sub(a, other=1.5), lambda a: torch.sub(a, 1.5)),
    (lambda a: dtorch.mul(input=a, other=a), lambda a: torch.mul(a, a)),
    (lambda a: dtorch.div(a, other=2, rounding_mode="floor"), lambda a: torch.div(a, 2).floor()),
    (lambda a: dtorch.pow(a, exponent=2), lambda a: torch.pow(a, 2)),
    (lambda a: dtorch.maximum(a, other=a.T.T * 0), lambda a: torch.maximum(a, a * 0)),
    (lambda a: dtorch.gt(input=a, other=0), lambda a: torch.gt(a, 0)),
    (lambda a: dtorch.matmul(input=a, other=a.T), lambda a: torch.matmul(a, a.T)),
    (lambda a: dtorch.outer(a[:, 0], vec2=a[:, 1]), lambda a: torch.outer(a[:, 0], a[:, 1])),
    (lambda a: DF.linear(input=a, weight=a, bias=None), lambda a: F.linear(a, a)),
    (lambda a: dtorch.where(a > 0, input=a, other=0.0), lambda a: torch.where(a > 0, a, 0.0)),
    (lambda a: dtorch.clamp(a, min=0.0), lambda a: torch.clamp(a, min=0.0)),
    (lambda a: dtorch.masked_fill(a, mask=a > 0, value=1.0), lambda a: a.masked_fill(a > 0, 1.0)),
    (lambda a: dtorch.sum(input=a, dim=1, keepdim=True), lambda a: torch.sum(a, 1, keepdim=True)),
    (lambda a: dtorch.mean(a, dim=[0, 1]), lambda a: torch.mean(a, [0, 1])),
    (lambda a: dtorch.argmax(a, dim=1), lambda a: torch.argmax(a, 1)),
    (lambda a: dtorch.max(a, dim=1).values, lambda a: torch.max(a, 1).values),
    (lambda a: dtorch.softmax(a, dim=1), lambda a: torch.softmax(a, 1)),
    (lambda a: DF.softmax(input=a, dim=0), lambda a: F.softmax(a, dim=0)),
    (lambda a: DF.gelu(input=a, approximate="tanh"), lambda a: F.gelu(a, approximate="tanh")),
    (lambda a: dtorch.cat(tensors=[a, a], dim=1), lambda a: torch.cat([a, a], 1)),
    (lambda a: dtorch.stack(tensors=[a, a], dim=2), lambda a: torch.stack([a, a], 2)),
    (lambda a: dtorch.chunk(a, chunks=3, dim=1)[1], lambda a: torch.chunk(a, 3, 1)[1]),
    (lambda a: dtorch.unbind(a, dim=1)[2], lambda a: torch.unbind(a, 1)[2]),
    (lambda a: dtorch.transpose(a, dim0=0, dim1=1), lambda a: torch.transpose(a, 0, 1)),
    (lambda a: dtorch.permute(a, dims=(1, 0)), lambda a: torch.permute(a, (1, 0))),
    (lambda a: dtorch.reshape(a, shape=(-1,)), lambda a: torch.reshape(a, (-1,))),
    (lambda a: dtorch.flatten(a, start_dim=0, end_dim=1), lambda a: torch.flatten(a, 0, 1)),
    (lambda a: dtorch.squeeze(a[None], dim=0), lambda a: torch.squeeze(a[None], 0)),
    (lambda a: dtorch.unsqueeze(a, dim=1), lambda a: torch.unsqueeze(a, 1)),
    (lambda a: dtorch.repeat_interleave(a, repeats=2, dim=1), lambda a: a.repeat_interleave(2, 1)),
]  # fmt: skip


def test_torch_keyword_names(graph: dtorch.Graph) -> None:
    """The ``dtorch.*`` functions take torch's keyword names (``input``, ``other``, ``dims``,
    ``shape``, ...), so programs that spell them out run unchanged."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = _randn(4, 3)
    t = place(x, mesh, [R], graph)
    for call, ref in _KEYWORDS:
        torch.testing.assert_close(call(t).to_torch(), ref(x), rtol=1.3e-6, atol=1e-5)


def test_torch_keyword_names_on_methods(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = _randn(4, 3)
    t = place(x, mesh, [S0], graph)
    checks = [
        (t.add(other=t), x.add(other=x)),
        (t.matmul(other=place(x.T, mesh, [R], graph)), x.matmul(other=x.T)),
        (t.pow(exponent=2), x.pow(exponent=2)),
        (t.permute(dims=(1, 0)), x.permute(dims=(1, 0))),
        (t.reshape(shape=(12,)).redistribute(mesh, [R]), x.reshape(shape=(12,))),
        (t.unsqueeze(1).expand(size=(4, 2, 3)), x.unsqueeze(1).expand(size=(4, 2, 3))),
    ]
    for got, want in checks:
        torch.testing.assert_close(got.to_torch(), want)


def _needs_chunking(table: Any, combo: Any) -> bool:
    """Accepted, and some Replicate input must be chunked to its partner's shard first."""
    layout = expected_layout(table, combo)
    if layout is None:
        return False
    return any(
        p == R and isinstance(out, dtorch.Shard)
        for pls in combo
        for p, out in zip(pls, layout, strict=True)
    )


_IMPLICIT: list[tuple[str, Callable[..., Any], Callable[..., Any], list[tuple[int, ...]]]] = [
    ("add", operator.add, operator.add, [(5, 3), (5, 3)]),
    ("mul", operator.mul, operator.mul, [(5, 3), (3,)]),
    ("where", lambda c, a: dtorch.where(c, a, 0.0), lambda c, a: torch.where(c, a, 0.0),
     [(5, 3), (5, 3)]),
    ("copy_", lambda d, s: d.copy_(s), lambda d, s: d.clone().copy_(s), [(5, 3), (5, 3)]),
]  # fmt: skip


@pytest.mark.parametrize("mesh_shape", [(2, 3), (2, 2, 2), (3, 2)])
@pytest.mark.parametrize(
    ("name", "call", "ref", "shapes"), _IMPLICIT, ids=[i[0] for i in _IMPLICIT]
)
def test_implicit_chunking_on_nd_meshes(  # type: ignore[no-untyped-def]
    name, call, ref, shapes, mesh_shape, graph
) -> None:
    """The one implicit redistribution (a Replicate operand chunked to its partner's shard),
    on 2-D and 3-D meshes with nested and uneven shards: every sampled combination that needs
    it gives the expanded placements and torch's values."""
    fulls = [_randn(*s) for s in shapes]
    if name == "where":
        fulls[0] = fulls[0] > 0
    bools = [f.dtype == torch.bool for f in fulls]
    partial = {(P, P): P} if name in ("add", "copy_") else {}
    table = elementwise_table(shapes, partial, bools=bools, fixed=[0] if name == "copy_" else [])
    if name == "copy_":
        table = {row: row[0] for row in table}
    combos = layout_combos(len(mesh_shape), fulls, limit=4000, seed=7)
    chosen = sample([c for c in combos if _needs_chunking(table, c)], 24, seed=len(mesh_shape))
    assert chosen
    run_api(
        graph, name, call, fulls, mesh_shape, [ref(*fulls)], table=table, combos=chosen,
    )  # fmt: skip


@pytest.mark.parametrize("mesh_shape", [(4,), (2, 2)], ids=str)
def test_dim_forms_of_a_0d_tensor_are_torch_s(mesh_shape: tuple[int, ...], graph: Any) -> None:
    # torch takes dim 0 and -1 of a 0-d tensor as the tensor itself: views, nothing moves
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    full = torch.tensor(1.75)
    t = dtorch.from_torch(full, device_mesh=mesh)
    forms = [
        lambda x: x.transpose(0, -1),
        lambda x: x.transpose(0, 0),
        lambda x: x.swapaxes(0, -1),
        lambda x: x.squeeze(0),
        lambda x: x.squeeze(-1),
        lambda x: x.squeeze((0,)),
        lambda x: x.permute(()),
    ]
    for form in forms:
        got, want = form(t), form(full)
        assert got.shape == want.shape and torch.equal(got.to_torch(), want)
    t.transpose(0, -1).fill_(3.0)  # a view: the write reaches t
    t.squeeze(0).mul_(2.0)
    assert t.item() == 6.0
    with pytest.raises(TypeError, match="missing 1 required positional arguments"):
        t.permute()
    with pytest.raises(IndexError):  # torch's own: dim 1 is out of range for a 0-d tensor
        full.transpose(0, 1)
    with pytest.raises(IndexError):
        t.transpose(0, 1)

"""In-place arithmetic through the public API against torch: the augmented assignments
(``t += x``, ``-= *= /= //= %= **= &= |= ^=``) and the named methods (``add_``, ``sub_``,
``mul_``, ``div_``, ``floor_divide_``, ``remainder_``, ``pow_``, ``bitwise_and_/or_/xor_``,
``clamp_``) change the tensor's own values, so every alias and every view of it sees the change,
as in torch; the tensor keeps its layout; torch's refusals (a result dtype that does not cast
back, a result shape that is not the tensor's) are refused at the call and change nothing."""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable
from typing import Any

import pytest
import torch

import dtorch
from dtorch.errors import DtypeError, PlacementError, ShapeError
from tests.api.ops_harness import S0, S1, P, R, compare, place

pytestmark = pytest.mark.timeout(120)

_G = torch.Generator().manual_seed(77)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(77)


#: name in messages, the augmented assignment, the operand kind.
_AUGMENTED: list[tuple[str, Callable[[Any, Any], Any], str]] = [
    ("add", operator.iadd, "float"),
    ("sub", operator.isub, "float"),
    ("mul", operator.imul, "float"),
    ("div", operator.itruediv, "float"),
    ("floor_divide", operator.ifloordiv, "int"),
    ("remainder", operator.imod, "int"),
    ("pow", operator.ipow, "positive"),
    ("bitwise_and", operator.iand, "int"),
    ("bitwise_or", operator.ior, "int"),
    ("bitwise_xor", operator.ixor, "int"),
]


def _pair(kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A (4, 3) target and a broadcast (3,) operand."""
    if kind == "int":
        return torch.randint(-9, 10, (4, 3), generator=_G), torch.randint(1, 6, (3,), generator=_G)
    a, b = torch.randn(4, 3, generator=_G), torch.randn(3, generator=_G)
    return (a.abs() + 0.5, b) if kind == "positive" else (a, b)


_LAYOUTS = [[R], [S0], [S1]]


@pytest.mark.parametrize(("name", "op", "kind"), _AUGMENTED)
def test_augmented_assignment_changes_aliases_and_views(  # type: ignore[no-untyped-def]
    name, op, kind, graph
) -> None:
    """``t op= x`` for a tensor and a number ``x``, on every layout of ``t`` and ``x``: the
    same handle back, torch's values in ``t``, in an alias and in a view taken before; ``t``'s
    placements unchanged (a Replicate ``t`` with a sharded ``x`` stays Replicate)."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    full, other = _pair(kind)
    for t_layout in _LAYOUTS:
        # x's one dim is t's dim 1: x may be sharded where t's dim 1 is, or t is Replicate
        for operand in [[R], 2, *([[S0]] if t_layout != [S0] else [])]:
            # a slice of an unsharded dim (a sharded one would have to be redistributed)
            index = (slice(None), slice(1, None)) if t_layout == [S0] else (slice(1, None),)
            want = full.clone()
            view_want = want[index]
            x_full = other if not isinstance(operand, int) else operand
            op(want, x_full)
            t = place(full, mesh, t_layout, graph)
            alias, view = t, t[index]
            x = x_full if isinstance(operand, int) else place(other, mesh, operand, graph)
            result = op(t, x)
            context = f"{name}= on {t_layout} with {operand}"
            assert result is alias and t.placements == t_layout, context
            compare(t.to_torch(), want, True, context)
            compare(view.to_torch(), view_want, True, context)


def test_writes_through_a_view_reach_the_base(graph: dtorch.Graph) -> None:
    """The reviewer's case: ``r = t[2]; r *= 0; r += 2`` changes row 2 of ``t``; a transposed
    view and an augmented index (``t[1] += 5``) too."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    full = torch.randn(4, 6, generator=_G)
    want = full.clone()
    t = place(full, mesh, [S1, R], graph)
    r, wr = t[2], want[2]
    r *= 0
    r += 2
    wr *= 0
    wr += 2
    tt, wt = t.transpose(0, 1), want.transpose(0, 1)
    tt[:, 3] -= 1.5
    wt[:, 3] -= 1.5
    t[1] += 5
    want[1] += 5
    assert torch.equal(t.to_torch(), want)
    assert torch.equal(r.to_torch(), wr) and torch.equal(tt.to_torch(), wt)


def test_named_in_place_methods(graph: dtorch.Graph) -> None:
    """The ``op_`` methods return the tensor itself and give torch's values."""
    mesh = dtorch.init_device_mesh("cpu", (3,))
    a, b = torch.randn(6, 2, generator=_G) * 4, torch.randn(6, 2, generator=_G) + 0.1
    ints = torch.randint(-20, 20, (6, 2), generator=_G)
    calls: list[tuple[Callable[[Any, Any], Any], torch.Tensor, torch.Tensor]] = [
        (lambda t, o: t.add_(o, alpha=2), a, b),
        (lambda t, o: t.sub_(o, alpha=0.5), a, b),
        (lambda t, o: t.mul_(o), a, b),
        (lambda t, o: t.div_(o), a, b),
        (lambda t, o: t.div_(o, rounding_mode="floor"), a, b),
        (lambda t, o: t.div_(3, rounding_mode="trunc"), ints, b),
        (lambda t, o: t.floor_divide_(3), ints, b),
        (lambda t, o: t.remainder_(7), ints, b),
        (lambda t, o: t.pow_(2), a, b),
        (lambda t, o: t.bitwise_and_(6), ints, b),
        (lambda t, o: t.bitwise_or_(1), ints, b),
        (lambda t, o: t.bitwise_xor_(5), ints, b),
        (lambda t, o: t.clamp_(-1, 1), a, b),
        (lambda t, o: t.clip_(max=0.5), a, b),
    ]
    for i, (call, full, other) in enumerate(calls):
        want = full.clone()
        call(want, other)
        t = place(full, mesh, [S0], graph)
        o = place(other, mesh, [R], graph)
        assert call(t, o) is t and t.placements == [S0], i
        compare(t.to_torch(), want, True, f"call {i}")


def test_partial_targets_where_linear(graph: dtorch.Graph) -> None:
    """A Partial tensor takes ``+= P``, ``*= number`` and ``*= R`` in place and stays
    Partial; a non-linear update is refused with the operator's name and leaves it alone."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    a, b, w = (torch.randn(5, generator=_G) for _ in range(3))
    t = place(a, mesh, [P], graph)
    t += place(b, mesh, [P], graph)
    t *= 3
    t *= place(w, mesh, [R], graph)
    want = (a + b) * 3 * w
    assert t.placements == [P]
    torch.testing.assert_close(t.to_torch(), want)
    with pytest.raises(PlacementError, match=r"^add: got \(P,\)"):
        t += 1
    torch.testing.assert_close(t.to_torch(), want)


def test_refusals_change_nothing(graph: dtorch.Graph) -> None:
    """torch's refusals, at the call: an integer tensor cannot take a float result, a (3,)
    tensor cannot take a broadcast (2, 3) result; the tensor keeps its values."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    ints = torch.arange(6).reshape(2, 3)
    t = place(ints, mesh, [S0], graph)
    with pytest.raises(DtypeError, match="can't be cast to the desired output type"):
        t += 1.5
    with pytest.raises(RuntimeError):
        ints.clone().add_(1.5)  # torch refuses the same
    row = place(torch.ones(3), mesh, [R], graph)
    with pytest.raises(ShapeError, match=r"output with shape \[3\] doesn't match.*\[2, 3\]"):
        row += place(torch.ones(2, 3), mesh, [R], graph)
    with pytest.raises(RuntimeError):
        torch.ones(3).add_(torch.ones(2, 3))
    assert torch.equal(t.to_torch(), ints) and torch.equal(row.to_torch(), torch.ones(3))


@pytest.mark.parametrize(
    "call",
    [
        lambda x, y: x.add_(y),
        lambda x, y: x.__imul__(y),
        lambda x, y: x.clamp_(y),
        lambda x, y: x.atan2_(y),
        lambda x, y: x.lerp_(y, 0.5),
    ],
    ids=["add_", "*=", "clamp_", "atan2_", "lerp_"],
)
def test_an_operand_growing_the_tensor_is_a_shape_error_on_every_layout(
    call: Callable[..., Any], graph: dtorch.Graph
) -> None:
    """torch's ShapeError for an in-place operand that broadcasts the tensor larger, checked
    before the operator's placement rule (on sharded layouts it raised PlacementError)."""
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        call(torch.zeros(4), torch.zeros(2, 4))
    mesh = dtorch.init_device_mesh("cpu", 2)
    for placements in ([S0], [R]):
        x = place(torch.zeros(4), mesh, placements, graph)
        y = place(torch.ones(2, 4), mesh, placements, graph)
        with pytest.raises(
            ShapeError, match=r"output with shape \[4\] doesn't match the broadcast shape \[2, 4\]"
        ):
            call(x, y)
        assert torch.equal(x.to_torch(), torch.zeros(4))
    full = torch.zeros(1, 4)  # addmm_'s matrices need not broadcast to the tensor
    want = full.clone().addmm_(torch.ones(1, 2), torch.ones(2, 4))
    got = place(full, mesh, [R], graph).addmm_(
        place(torch.ones(1, 2), mesh, [R], graph), place(torch.ones(2, 4), mesh, [R], graph)
    )
    assert torch.equal(got.to_torch(), want)


def test_in_place_writes_from_several_threads_lose_nothing(graph: dtorch.Graph) -> None:
    """Four threads writing one tensor in place: each write is one step, as each of torch's
    in-place operators is one call (an in-place operator records a read and a write-back,
    and another thread's write between them was lost: about 2,200 of 8,000 additions)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    t = dtorch.zeros(4, device_mesh=mesh, placements=[dtorch.Shard(0)], graph=graph)

    def work() -> None:
        nonlocal t  # t += 2 rebinds it (to itself)
        for _ in range(100):
            t.add_(1)
            t += 2
            t.mul_(1)
            t[1:3] = 5.0  # a write without a read, between the others'
            t.clamp_(max=10000.0)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert t.to_torch().tolist()[::3] == [1200.0, 1200.0]


def test_in_place_flags_index_put_and_random_fills_from_several_threads(
    graph: dtorch.Graph,
) -> None:
    """The other writers: ``inplace=True`` activations, ``index_put_(accumulate=True)`` (read
    on the client, written back) and the random fills, whose generator's state is copied and
    advanced in one step (two threads had copied one state: equal draws)."""
    t = dtorch.zeros(4, graph=graph)
    ids, ones = torch.arange(4), torch.ones(4)

    def adder() -> None:
        for _ in range(60):
            t.add_(1)

    def flags() -> None:
        for _ in range(60):
            dtorch.nn.functional.hardtanh(t, -1e9, 1e9, inplace=True)
            dtorch.nn.functional.relu(t, inplace=True)
            t.index_put_((ids,), ones, accumulate=True)

    _run_together([adder, flags])
    assert t.to_torch().tolist() == [120.0] * 4
    generator, drawn = torch.Generator().manual_seed(5), []

    def fills() -> None:
        for _ in range(40):
            drawn.append(dtorch.zeros(8, graph=graph).normal_(generator=generator).to_torch())
            drawn.append(dtorch.randn(8, generator=generator, graph=graph).to_torch())

    _run_together([fills, fills])
    reference = torch.Generator().manual_seed(5)
    want = {tuple(torch.randn(8, generator=reference).tolist()) for _ in range(160)}
    assert {tuple(d.tolist()) for d in drawn} == want


def _run_together(targets: list[Callable[[], None]]) -> None:
    threads = [threading.Thread(target=target) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)


def test_a_rebind_never_lands_inside_another_thread_s_in_place_write(
    graph: dtorch.Graph,
) -> None:
    """``t.data = other`` holds the write lock: between an ``add_``'s read and write-back it
    had released the value read (the runner then failed on the freed operand, breaking the
    graph) or let the write-back land in the new value (200 where 1,000 + k is right)."""
    t = dtorch.zeros(4, graph=graph)
    fresh = [dtorch.full((4,), 1000.0, graph=graph) for _ in range(40)]

    def adder() -> None:
        for _ in range(200):
            t.add_(1)

    def rebinder() -> None:
        for value in fresh:
            t.data = value.clone()

    _run_together([adder, rebinder])
    got = t.to_torch().tolist()
    assert len(set(got)) == 1 and 1000.0 <= got[0] <= 1200.0, got


def test_a_read_racing_a_rebind_gives_a_value_or_an_error_never_a_broken_graph(
    graph: dtorch.Graph,
) -> None:
    """A plain read (``t + 1``) takes no lock: another thread's ``t.data = other`` can release
    the value it read before its operator is queued. That operator fails, saying so, and the
    graph goes on (the runner had failed on the freed operand: every later operator raised
    GraphError). Every other result is a value ``t`` held."""
    t = dtorch.zeros(16, graph=graph)
    stop, results = threading.Event(), []

    def reader() -> None:  # results fetched one by one below: a few thousand at most
        while not stop.is_set() and len(results) < 4000:
            results.append(t + 1)

    def rebinder() -> None:
        for step in range(1500):
            t.data = dtorch.full((16,), float(step), graph=graph)
        stop.set()

    _run_together([reader, rebinder])
    for result in results:
        try:
            value = result.to_torch()
        except dtorch.KernelError as error:
            assert "was released before it ran: another thread rebound" in str(error)
            continue
        assert (value == value[0]).all() and 1.0 <= value[0].item() <= 1500.0
    assert t.to_torch().tolist() == [1499.0] * 16 and (t * 2).sum().item() == 1499.0 * 32


def test_operators_queued_after_their_input_s_release_fail_alone(graph: dtorch.Graph) -> None:
    """The race above made certain: a handle of a value that a rebind released, read after
    the release reached the devices (a handle no rebind releases again). Each operator that
    reads it fails saying so, dependents and fetches with it, and sync() raises it once,
    in thread and process mode; the graph goes on (process mode's controller had failed to
    address the batch: every later operator raised GraphError)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    t = dtorch.from_torch(torch.arange(8.0).reshape(2, 4), device_mesh=mesh,
                          placements=[dtorch.Shard(1)], graph=graph)  # fmt: skip
    stale = t._operand
    t.data = dtorch.full((2, 4), 5.0, device_mesh=mesh, placements=[dtorch.Shard(1)], graph=graph)
    graph.sync()
    assert (t + 0).to_torch().sum().item() == 40.0  # the release has reached the devices
    ghost = dtorch.Tensor._wrap(graph, stale)
    ghost._base = t  # as an alias: it releases nothing
    late = [ghost + 1, (ghost * 2).sum(), ghost.max(1).values, ghost.topk(2, 1).indices]
    for result in late:
        with pytest.raises(dtorch.KernelError, match="was released before it ran"):
            result.to_torch()
    with pytest.raises(dtorch.KernelError, match="was released before it ran"):
        ghost.to_torch()
    _ = ghost + 1
    with pytest.raises(dtorch.KernelError, match="was released before it ran"):
        graph.sync()
    graph.sync()  # once
    assert t.to_torch().tolist() == [[5.0] * 4] * 2 and (t * 2).sum().item() == 80.0

"""dtorch.trace and Program replay, against torch on the full tensors, on both runners."""

from __future__ import annotations

import gc
import math
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import torch

import dtorch
from dtorch.errors import TraceError
from dtorch.ir.operator import ExecuteBatch


def _mesh(n: int = 2) -> dtorch.DeviceMesh:
    return dtorch.init_device_mesh("cpu", n)


def test_replay_equals_torch_on_new_inputs(graph: dtorch.Graph) -> None:
    mesh = _mesh(4)
    weight = torch.randn(8, 8)
    w = dtorch.from_torch(weight, device_mesh=mesh, placements=[dtorch.Shard(1)])

    def fn(t: dtorch.Tensor) -> dtorch.Tensor:
        return ((t @ w.redistribute(mesh, [dtorch.Replicate()])).relu() * 2).sum(0)

    example = dtorch.from_torch(torch.randn(6, 8), device_mesh=mesh, placements=[dtorch.Shard(0)])
    program = dtorch.trace(fn, example)
    for _ in range(3):
        x = torch.randn(6, 8)
        got = program(dtorch.from_torch(x, device_mesh=mesh, placements=[dtorch.Shard(0)]))
        torch.testing.assert_close(got.to_torch(), ((x @ weight).relu() * 2).sum(0))


def test_nested_arguments_and_results(graph: dtorch.Graph) -> None:
    mesh = _mesh()
    place = [dtorch.Shard(0)]

    def fn(pair: tuple, scale: float = 2.0, extra: dict | None = None) -> dict:
        a, b = pair
        return {"sum": [a + b, (a * scale, 7)], "b": b, "e": extra["k"] - a}

    make = lambda t: dtorch.from_torch(t, device_mesh=mesh, placements=place)  # noqa: E731
    ta, tb, tk = torch.randn(4), torch.randn(4), torch.randn(4)
    program = dtorch.trace(fn, (make(ta), make(tb)), 3.0, extra={"k": make(tk)})
    ta, tb, tk = torch.randn(4), torch.randn(4), torch.randn(4)
    out = program((make(ta), make(tb)), 3.0, extra={"k": make(tk)})
    torch.testing.assert_close(out["sum"][0].to_torch(), ta + tb)
    torch.testing.assert_close(out["sum"][1][0].to_torch(), ta * 3.0)
    assert out["sum"][1][1] == 7
    torch.testing.assert_close(out["b"].to_torch(), tb)
    torch.testing.assert_close(out["e"].to_torch(), tk - ta)


def test_torch_s_named_result_tuples_are_results(graph: dtorch.Graph, tmp_path: Path) -> None:
    """``max(dim)``, ``topk``, ``linalg.slogdet``, ... return torch's named tuples: a
    program returns them as such (fields by name, in eager's types), also from its file."""
    mesh = _mesh()

    def fn(t: dtorch.Tensor) -> dict:
        whole = t.redistribute(mesh, [dtorch.Replicate()])
        return {"max": t.max(1), "top": [t.topk(2, 1)], "det": dtorch.linalg.slogdet(whole)}

    make = lambda t: dtorch.from_torch(t, device_mesh=mesh, placements=[dtorch.Shard(0)])  # noqa: E731
    program = dtorch.trace(fn, make(torch.randn(4, 4)))
    program.save(tmp_path / "named.dtp")
    loaded = dtorch.load_program(tmp_path / "named.dtp", graph=graph)
    x = torch.randn(4, 4)
    for out in (program(make(x)), loaded(make(x))):
        assert type(out["max"]) is torch.return_types.max
        assert type(out["top"][0]) is torch.return_types.topk
        assert type(out["det"]) is torch.return_types.linalg_slogdet
        torch.testing.assert_close(out["max"].values.to_torch(), x.max(1).values)
        assert torch.equal(out["max"].indices.to_torch(), x.max(1).indices)
        torch.testing.assert_close(out["top"][0].values.to_torch(), x.topk(2, 1).values)
        torch.testing.assert_close(out["det"].logabsdet.to_torch(), torch.linalg.slogdet(x)[1])


def test_constants_outlive_their_handles(graph: dtorch.Graph) -> None:
    weight = torch.randn(3)
    held = [dtorch.from_torch(weight)]
    program = dtorch.trace(lambda x: x * held[0], dtorch.zeros(3))
    held.clear()  # the program's pin keeps the value on the devices
    graph.sync()
    x = torch.randn(3)
    torch.testing.assert_close(program(dtorch.from_torch(x)).to_torch(), x * weight)


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (lambda t: t.sum().item(), "reads a tensor's value"),
        (lambda t: t if t.sum() > 0 else -t, "reads a tensor's value"),
        (lambda t: t + dtorch.randn(4), "random numbers"),
    ],
)
def test_value_dependent_code_is_refused_naming_the_line(
    graph: dtorch.Graph, fn: object, words: str
) -> None:
    with pytest.raises(dtorch.TraceError, match=words) as info:
        dtorch.trace(fn, dtorch.ones(4))  # type: ignore[arg-type]
    assert "test_trace.py:" in str(info.value)
    assert (dtorch.ones(2) + 1).tolist() == [2.0, 2.0]  # the graph goes on


def _put_rows(t: dtorch.Tensor) -> dtorch.Tensor:
    t[[0, 2]] = 7.0
    return t * 1


@pytest.mark.parametrize(
    ("fn", "form"),
    [(lambda t: t[t > 0], r"t\[index\]'s"), (_put_rows, r"t\[index\] = value's")],
    ids=["mask", "rows-of-a-sharded-dim"],
)
def test_indexing_computed_on_the_client_is_refused_naming_the_index(
    graph: dtorch.Graph, fn: Any, form: str
) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = dtorch.from_torch(torch.zeros(4, 3), device_mesh=mesh, placements=[dtorch.Shard(0)])
    with pytest.raises(dtorch.TraceError, match=rf"{form}: this index .* on the client") as info:
        dtorch.trace(fn, x)
    assert "redistribute that dim to Replicate" in str(info.value)


def test_every_kind_a_body_may_not_hold_is_refused_in_words() -> None:
    from dtorch.program.trace import _REFUSED
    from dtorch.runtime.subgraph import REFUSED_KINDS

    assert set(_REFUSED) == REFUSED_KINDS
    assert all(_REFUSED[kind] for kind in REFUSED_KINDS)


def test_calling_another_program_is_refused_naming_the_line(graph: dtorch.Graph) -> None:
    inner = dtorch.trace(lambda t: t + 1, dtorch.zeros(3))
    with pytest.raises(dtorch.TraceError, match=r"calls another traced program.*test_trace\.py:"):
        dtorch.trace(lambda t: inner(t) * 2, dtorch.zeros(3))
    assert inner(dtorch.ones(3)).tolist() == [2.0, 2.0, 2.0]  # the graph goes on


def test_other_inputs_are_refused(graph: dtorch.Graph) -> None:
    mesh = _mesh()
    x = dtorch.ones(4, 2, device_mesh=mesh, placements=[dtorch.Shard(0)])
    program = dtorch.trace(lambda t, k=1: t * k, x, k=1)
    with pytest.raises(dtorch.TraceError, match=r"float32\[4, 3\].*traced with float32\[4, 2\]"):
        program(dtorch.ones(4, 3, device_mesh=mesh, placements=[dtorch.Shard(0)]), k=1)
    with pytest.raises(dtorch.TraceError, match=r"S\(0\).*traced with|traced with"):
        program(dtorch.ones(4, 2, device_mesh=mesh, placements=[dtorch.Replicate()]), k=1)
    with pytest.raises(dtorch.TraceError, match="fixed when the program is traced"):
        program(x, k=2)
    half = dtorch.ones(2, 2, device_mesh=mesh, placements=[dtorch.Shard(0)])
    with pytest.raises(dtorch.TraceError, match=r"sub_split_coordinates=\(2,\)\)\], the traced"):
        program(dtorch.cat([half, half]), k=1)  # cat marks the shards: describe() hides it


def _write_then_read(a: Any, b: Any) -> Any:
    a.add_(1)
    return b * 2


def test_aliasing_at_a_call_one_way_only(graph: dtorch.Graph) -> None:
    """Arguments traced as one tensor must be one again (TraceError); arguments traced apart
    may be one tensor or overlapping views at a call, and replay as the eager function."""
    program = dtorch.trace(_write_then_read, dtorch.ones(2), dtorch.ones(2))
    z, want_z = dtorch.ones(2), torch.ones(2)
    assert torch.equal(program(z, z).to_torch(), _write_then_read(want_z, want_z))
    assert torch.equal(z.to_torch(), want_z)
    w, want_w = dtorch.ones(4), torch.ones(4)
    got, want = program(w[0:2], w[1:3]), _write_then_read(want_w[0:2], want_w[1:3])
    assert torch.equal(got.to_torch(), want) and torch.equal(w.to_torch(), want_w)
    x = dtorch.ones(2)
    twice = dtorch.trace(_write_then_read, x, x)
    with pytest.raises(dtorch.TraceError, match="arguments 0 and 1 were one tensor"):
        twice(x, dtorch.ones(2))


def test_a_kernel_failure_in_a_replay_names_the_traced_line(graph: dtorch.Graph) -> None:
    ints = lambda v: dtorch.full((4,), v, dtype=torch.int64)  # noqa: E731
    program = dtorch.trace(lambda a, b: a // b, ints(1), ints(1))
    with pytest.raises(dtorch.DTorchError, match=r"test_trace\.py"):
        program(ints(1), ints(0)).to_torch()
    assert program(ints(6), ints(3)).tolist() == [2, 2, 2, 2]


def test_in_place_changes_of_inputs_are_written_back(graph: dtorch.Graph) -> None:
    def fn(t: dtorch.Tensor) -> dtorch.Tensor:
        t[0] = 5.0
        return t * 2

    program = dtorch.trace(fn, dtorch.zeros(3))
    x = dtorch.from_torch(torch.tensor([1.0, 2.0, 3.0]))
    assert program(x).tolist() == [10.0, 4.0, 6.0]
    assert x.tolist() == [5.0, 2.0, 3.0]


def test_a_function_that_runs_no_operator_replays(graph: dtorch.Graph) -> None:
    """Its first call carries an empty body: the devices compile it all the same, and a call
    of a program that returns nothing, or a constant, leaves the graph working."""
    mesh = _mesh()
    w = dtorch.from_torch(torch.arange(4.0), device_mesh=mesh)
    returns_w = dtorch.trace(lambda: w)
    returns_nothing = dtorch.trace(lambda: None)
    for _ in range(2):  # the body, then the name
        assert returns_w().tolist() == [0.0, 1.0, 2.0, 3.0]
        assert returns_nothing() is None
    graph.sync()
    assert (w + 1).tolist() == [1.0, 2.0, 3.0, 4.0]


def test_an_input_the_function_also_reads_from_its_closure(graph: dtorch.Graph) -> None:
    """The example input is the function's own weight: the argument and the closure's read
    are two things, as in torch (the read is a constant, the argument an input)."""
    mesh = _mesh()
    weight = torch.tensor([10.0, 20.0, 30.0, 40.0])
    bias = dtorch.from_torch(weight, device_mesh=mesh, placements=[dtorch.Shard(0)])

    def fn(x: dtorch.Tensor) -> dtorch.Tensor:
        x.mul_(2)  # in place on the argument: the trace run is an eager call
        return x + bias

    program = dtorch.trace(fn, bias)
    torch.testing.assert_close(bias.to_torch(), weight * 2)  # the trace run changed bias
    assert len(program.spec.inputs) == 1 and len(program.spec.constants) == 1
    x = torch.tensor([1.0, 2.0, 3.0, 4.0])
    dx = dtorch.from_torch(x, device_mesh=mesh, placements=[dtorch.Shard(0)])
    torch.testing.assert_close(program(dx).to_torch(), x * 2 + weight * 2)
    torch.testing.assert_close(dx.to_torch(), x * 2)  # written back to the argument
    torch.testing.assert_close(bias.to_torch(), weight * 2)  # the constant is unchanged
    twice = dtorch.trace(lambda a, b: a * b + bias, bias, bias)  # one tensor passed twice
    torch.testing.assert_close(twice(dx, dx).to_torch(), (x * 2) ** 2 + weight * 2)


def test_plain_values_are_compared_by_type_and_value(graph: dtorch.Graph) -> None:
    """2, 2.0 and True make results of other dtypes: a program traced with one refuses the
    others; NaN is the value NaN, which a call may pass again."""
    x = torch.tensor([1, 2, 3, 4])
    dx = dtorch.from_torch(x)
    program = dtorch.trace(lambda t, s: t * s, dx, 2)
    assert program(dx, 2).dtype == (x * 2).dtype == torch.int64
    for other in (2.0, True):
        with pytest.raises(dtorch.TraceError, match=r"traced with 2 \(int\), called with"):
            program(dx, other)
    floats = dtorch.from_torch(x.float())
    with_nan = dtorch.trace(lambda t, s: t * s, floats, float("nan"))
    got = with_nan(floats, float("nan")).to_torch()
    torch.testing.assert_close(got, x.float() * math.nan, equal_nan=True)
    signed = dtorch.trace(lambda t, s: t * s, floats, -0.0)
    with pytest.raises(dtorch.TraceError, match=r"traced with -0.0 \(float\), called with 0.0"):
        signed(floats, 0.0)


def test_keyword_arguments_may_come_in_any_order(graph: dtorch.Graph) -> None:
    def fn(x: dtorch.Tensor, *, bias: dtorch.Tensor, scale: dtorch.Tensor) -> dtorch.Tensor:
        return x * scale + bias

    x, b, s = torch.randn(4), torch.randn(4), torch.randn(4)
    dx, db, ds = (dtorch.from_torch(t) for t in (x, b, s))
    program = dtorch.trace(fn, dx, bias=db, scale=ds)
    torch.testing.assert_close(program(dx, scale=ds, bias=db).to_torch(), x * s + b)
    torch.testing.assert_close(program(dx, bias=db, scale=ds).to_torch(), x * s + b)
    with pytest.raises(dtorch.TraceError, match="keys"):
        program(dx, bias=db, shift=ds)


def test_an_input_on_another_mesh_names_both_meshes(graph: dtorch.Graph) -> None:
    program = dtorch.trace(lambda t: t + 1, dtorch.zeros(4, device_mesh=_mesh()))
    others = {
        r"DeviceMesh\('cpu', \[2, 3\]\), the traced one DeviceMesh\('cpu', \[0, 1\]\)": (
            dtorch.DeviceMesh("cpu", [2, 3])
        ),
        r"mesh_dim_names=\('tp',\)\), the traced one DeviceMesh\('cpu', \[0, 1\]\)": (
            dtorch.init_device_mesh("cpu", 2, mesh_dim_names=("tp",))
        ),
    }
    for words, mesh in others.items():
        with pytest.raises(dtorch.TraceError, match=words):
            program(dtorch.zeros(4, device_mesh=mesh))


def test_a_released_program_releases_its_compiled_body(
    graph: dtorch.Graph, runner: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The program's name reaches the runner as a release when the program goes (both
    runners); a thread-mode host then holds neither the body nor what its operators hold
    (worker processes hand their releases to the same host: tests/runtime/test_host.py)."""
    released: list[int] = []
    execute = graph.executor.runner.execute

    def spy(batch: ExecuteBatch) -> None:
        released.extend(batch.no_hold)
        execute(batch)

    monkeypatch.setattr(graph.executor.runner, "execute", spy)
    x = dtorch.zeros(64)
    table = torch.randn(64)
    program = dtorch.trace(lambda t: t + dtorch.from_torch(table), x)
    torch.testing.assert_close(program(x).to_torch(), table)
    value = weakref.ref(program.spec.body.operators[0].param.value)
    key = program._key[0]
    del program
    gc.collect()
    graph.sync()
    assert key in released
    if runner == "thread":
        assert not graph.executor.runner._host._programs
        gc.collect()
        assert value() is None


def test_an_input_handle_the_function_keeps_stays_its_tensor(graph: dtorch.Graph) -> None:
    """The handles the function gets for its inputs are its own, but one it keeps (a cache,
    a module attribute) reads and writes the tensor it stood for after the trace."""
    kept: list[dtorch.Tensor] = []

    def fn(t: dtorch.Tensor) -> dtorch.Tensor:
        kept.extend([t, t.detach()])
        return t * 2

    x = dtorch.from_torch(torch.tensor([1.0, 2.0]))
    program = dtorch.trace(fn, x)
    assert all(k.tolist() == [1.0, 2.0] for k in kept)
    kept[1].add_(1)  # in place on a view of x, as on x itself
    assert x.tolist() == [2.0, 3.0] and kept[0].tolist() == [2.0, 3.0]
    assert program(x).tolist() == [4.0, 6.0]
    graph.sync()


def test_a_rebound_constant_is_followed(graph: dtorch.Graph, tmp_path: Path) -> None:
    """``w.data = other`` after the trace: later calls (and a save) read ``other``, as eager
    code reading ``w`` does; in-place changes of ``other`` are seen too; the pins go with
    the program."""
    mesh = _mesh()
    weight, x = torch.randn(3, 4), torch.randn(5, 4)
    w = dtorch.from_torch(weight, device_mesh=mesh, placements=[dtorch.Shard(0)])
    program = dtorch.trace(lambda t: (t @ w.T, w.sum(1)), _replicated(x, mesh))

    def check(run: dtorch.Program, expected: torch.Tensor) -> None:
        product, sums = run(_replicated(x, mesh))
        torch.testing.assert_close(product.to_torch(), x @ expected.T)
        torch.testing.assert_close(sums.to_torch(), expected.sum(1))

    new = weight
    for _ in range(2):  # twice: the second rebinds a rebound constant
        new = torch.randn(3, 4)
        w.data = dtorch.from_torch(new, device_mesh=mesh, placements=[dtorch.Shard(0)])
        check(program, new)
    w.copy_(dtorch.from_torch(new * 2, device_mesh=mesh, placements=[dtorch.Shard(0)]))
    check(program, new * 2)
    program.save(tmp_path / "p.dtp")
    loaded = dtorch.load_program(tmp_path / "p.dtp")
    check(loaded, new * 2)
    del program, loaded
    gc.collect()
    graph.sync()
    assert not graph.executor._pins and not graph.executor.rebound


def test_a_constant_rebound_to_another_layout_is_refused(graph: dtorch.Graph) -> None:
    mesh = _mesh()
    w = dtorch.from_torch(torch.randn(3, 4), device_mesh=mesh, placements=[dtorch.Shard(0)])
    program = dtorch.trace(lambda t: t @ w.T, _replicated(torch.randn(5, 4), mesh))
    w.data = dtorch.from_torch(torch.randn(3, 4), device_mesh=mesh, placements=[dtorch.Shard(1)])
    with pytest.raises(dtorch.TraceError, match=r"constant 0 was rebound .*S\(1\).*traced with"):
        program(_replicated(torch.randn(5, 4), mesh))
    w.data = dtorch.from_torch(torch.randn(3, 4), device_mesh=mesh, graph=dtorch.Graph())
    with pytest.raises(dtorch.TraceError, match="another graph"):
        program(_replicated(torch.randn(5, 4), mesh))


def test_a_rebind_inside_the_traced_function_is_refused(graph: dtorch.Graph) -> None:
    """The rebind of an input or a constant inside ``fn`` is no operator: a program could
    not replay it, so the trace refuses it."""
    mesh = _mesh()
    x = _replicated(torch.ones(4), mesh)
    w = _replicated(torch.ones(4), mesh)

    def on_input(t: dtorch.Tensor) -> dtorch.Tensor:
        t.data = t * 2
        return t + 1

    def on_constant(t: dtorch.Tensor) -> dtorch.Tensor:
        w.data = w * 2
        return t + w

    lines = (on_input.__code__.co_firstlineno + 1, on_constant.__code__.co_firstlineno + 1)
    for fn, line in zip((on_input, on_constant), lines, strict=True):
        where = rf"rebinds a tensor \(t.data = other\) at .*test_trace.py:{line}:"  # the user's
        with pytest.raises(dtorch.TraceError, match=where):
            dtorch.trace(fn, x)
    assert not graph.executor._pins and not graph.executor.rebound


def _replicated(full: torch.Tensor, mesh: dtorch.DeviceMesh) -> dtorch.Tensor:
    return dtorch.from_torch(full, device_mesh=mesh, placements=[dtorch.Replicate()])


def test_a_function_taking_any_keywords_gets_them_in_the_traced_order(
    graph: dtorch.Graph,
) -> None:
    # it may iterate them: another order would change its result, so it is refused
    def fn(**parts: dtorch.Tensor) -> list[dtorch.Tensor]:
        return [t * (i + 1) for i, t in enumerate(parts.values())]

    a, b = dtorch.ones(2), dtorch.zeros(2)
    program = dtorch.trace(fn, a=a, b=b)
    assert [t.tolist() for t in program(a=a, b=b)] == [[1.0, 1.0], [0.0, 0.0]]
    with pytest.raises(dtorch.TraceError, match=r"keyword arguments: traced with keys"):
        program(b=b, a=a)
    swapped = dtorch.trace(lambda d: d["a"] - d["b"], {"a": a, "b": b})
    with pytest.raises(dtorch.TraceError, match="matched in order"):
        swapped({"b": b, "a": a})


def test_call_errors_name_positional_and_keyword_arguments(graph: dtorch.Graph) -> None:
    def fn(x: dtorch.Tensor, scale: float = 2.0) -> dtorch.Tensor:
        return x * scale

    x = dtorch.ones(2)
    program = dtorch.trace(fn, x)
    with pytest.raises(dtorch.TraceError, match="positional arguments: traced with 1 items") as e:
        program(x=x)
    assert "['x'] given by keyword, traced as positional arguments" in str(e.value)
    with pytest.raises(dtorch.TraceError, match="positional arguments: traced with 1 items"):
        program(x, 3.0)


@pytest.mark.parametrize("traced_in_training", [True, False])
def test_a_module_whose_mode_changed_is_refused(
    graph: dtorch.Graph, traced_in_training: bool
) -> None:
    torch.manual_seed(0)
    reference = torch.nn.BatchNorm2d(3).train(traced_in_training)
    layer = dtorch.nn.BatchNorm2d(3).train(traced_in_training)
    x = torch.randn(2, 3, 4, 4)
    for traced in (layer, layer.forward):
        program = dtorch.trace(traced, dtorch.from_torch(x))
        with torch.no_grad():
            expected = reference(x)
        torch.testing.assert_close(program(dtorch.from_torch(x)).to_torch(), expected)
        layer.train(not traced_in_training)
        with pytest.raises(dtorch.TraceError, match="mode changed since it was traced"):
            program(dtorch.from_torch(x))
        layer.train(traced_in_training)  # back to the traced mode: it replays again
        with torch.no_grad():
            expected = reference(x)
        torch.testing.assert_close(program(dtorch.from_torch(x)).to_torch(), expected)


def test_a_module_called_from_a_traced_function_is_checked_too(graph: dtorch.Graph) -> None:
    """A lambda or a helper calling a module (here a BatchNorm inside a Sequential, through
    a helper function) replays the traced mode's operators as well."""
    torch.manual_seed(0)
    reference = torch.nn.Sequential(torch.nn.BatchNorm2d(3), torch.nn.ReLU())
    model = dtorch.nn.Sequential(dtorch.nn.BatchNorm2d(3), dtorch.nn.ReLU())
    x = torch.randn(2, 3, 4, 4)

    def helper(t: dtorch.Tensor) -> dtorch.Tensor:
        return model(t) * 2

    program = dtorch.trace(lambda t: helper(t) + 1, dtorch.from_torch(x))
    with torch.no_grad():
        expected = reference(x) * 2 + 1
    torch.testing.assert_close(program(dtorch.from_torch(x)).to_torch(), expected)
    model[0].eval()  # a submodule's mode: BatchNorm would replay batch statistics
    with pytest.raises(dtorch.TraceError, match="mode changed since it was traced"):
        program(dtorch.from_torch(x))
    model[0].train()
    with torch.no_grad():
        expected = reference(x) * 2 + 1
    torch.testing.assert_close(program(dtorch.from_torch(x)).to_torch(), expected)
    plain = dtorch.trace(lambda t: t * 2, dtorch.from_torch(x))
    assert plain._modes is None  # no module called: nothing to check
    model.eval()
    plain(dtorch.from_torch(x))  # modules of other traces are none of its business


@pytest.mark.parametrize("form", ["forward", "flag"])
def test_a_mode_read_without_calling_the_module_is_checked_too(
    graph: dtorch.Graph, form: str
) -> None:
    """``bn.forward(t)`` (no ``__call__``) and a function that reads ``model.training`` itself
    depend on the mode as much as ``bn(t)``: the program checks it at every call."""
    torch.manual_seed(0)
    reference = torch.nn.BatchNorm2d(3).eval()
    layer = dtorch.nn.BatchNorm2d(3).eval()
    x = torch.randn(2, 3, 4, 4) * 3 + 1
    if form == "forward":
        # a lambda, not the bound method (whose module the program reads from __self__)
        program = dtorch.trace(lambda t: layer.forward(t), dtorch.from_torch(x))  # noqa: PLW0108
    else:
        program = dtorch.trace(lambda t: t * 2 if layer.training else t, dtorch.from_torch(x))
    with torch.no_grad():
        expected = reference(x) if form == "forward" else x
    torch.testing.assert_close(program(dtorch.from_torch(x)).to_torch(), expected)
    layer.train()  # eager now normalizes with batch statistics (or doubles)
    with pytest.raises(dtorch.TraceError, match="mode changed since it was traced"):
        program(dtorch.from_torch(x))


class _ListIn(dtorch.nn.Module):
    def forward(self, xs: list[dtorch.Tensor]) -> dtorch.Tensor:
        return xs[0] * 2 if self.training else xs[0]


class _NoTensorIn(dtorch.nn.Module):
    def forward(self) -> float:
        return 2.0 if self.training else 1.0


@pytest.mark.parametrize("make", [_ListIn, _NoTensorIn], ids=["tensors-in-a-list", "no-tensor"])
def test_every_module_called_while_tracing_is_checked_whatever_its_arguments(
    graph: dtorch.Graph, make: type
) -> None:
    module = make()
    x = dtorch.ones(4)
    if make is _ListIn:
        program = dtorch.trace(lambda t: module([t]), x)
    else:
        program = dtorch.trace(lambda t: t * module(), x)
    assert program(x).tolist() == [2.0] * 4
    module.eval()
    with pytest.raises(dtorch.TraceError, match="mode changed since it was traced"):
        program(x)


def test_a_module_called_in_another_thread_during_a_trace_is_not_the_trace_s(
    graph: dtorch.Graph,
) -> None:
    import threading

    other = _NoTensorIn()
    started, release = threading.Event(), threading.Event()

    def elsewhere() -> None:
        started.wait(5)
        other()  # while the trace below runs
        release.set()

    thread = threading.Thread(target=elsewhere)
    thread.start()

    def fn(t: dtorch.Tensor) -> dtorch.Tensor:
        started.set()
        release.wait(5)
        return t + 1

    program = dtorch.trace(fn, dtorch.ones(2))
    thread.join(5)
    assert program._modes is None


def test_a_rebind_through_one_of_several_handles_is_refused_at_the_next_call(
    graph: dtorch.Graph,
) -> None:
    """Eager code reading the other handle keeps the old value, reading the rebound one gets
    the new: a program, which holds the value, cannot tell which it read (it followed the
    rebind, a silently wrong value where the function read the other handle)."""
    x = dtorch.ones(4)
    for rebind_the_read_one in (False, True):
        w = dtorch.ones(4)
        alias = w.detach()  # shares w's value, as in torch
        read = alias if rebind_the_read_one else w
        program = dtorch.trace(lambda t, read=read: t * read, x)
        (alias if not rebind_the_read_one else w).data = dtorch.full((4,), 5.0)
        with pytest.raises(dtorch.TraceError, match="had several handles"):
            program(x)
        again = dtorch.trace(lambda t, read=read: t * read, x)  # traced anew: the value now read
        assert again(x).tolist() == (x * read).tolist()
    w = dtorch.ones(4)
    program = dtorch.trace(lambda t: t * w, x)
    alias = w.detach()
    del alias  # gone before the rebind: w is the value's only handle, the rebind is followed
    w.data = dtorch.full((4,), 3.0)
    assert program(x).tolist() == [3.0] * 4


def test_a_module_takes_its_keyword_arguments_in_any_order(graph: dtorch.Graph) -> None:
    """A module's __call__ takes **kwargs, its forward named ones: the order is free."""

    class Scaled(dtorch.nn.Module):
        def forward(self, x: dtorch.Tensor, *, shift: dtorch.Tensor, scale: float) -> Any:
            return x * scale + shift

    x, shift = dtorch.ones(3), dtorch.full((3,), 0.5)
    program = dtorch.trace(Scaled(), x, shift=shift, scale=2.0)
    assert program(x, scale=2.0, shift=shift).tolist() == [2.5] * 3


def test_a_handle_rebound_away_no_longer_counts_as_one_of_the_values(
    graph: dtorch.Graph,
) -> None:
    """``a.data = other`` leaves ``b`` the old value's only handle: a rebind of ``b`` is
    followed, as eager code reading ``b`` would (it was refused as ambiguous)."""
    x = dtorch.ones(3)
    a = dtorch.ones(3)
    b = a.detach()
    a.data = dtorch.zeros(3)
    program = dtorch.trace(lambda t: t + b, x)
    b.data = dtorch.full((3,), 2.0)
    assert program(x).tolist() == (x + b).tolist() == [3.0] * 3


def test_a_tensor_returned_twice_is_one_handle_as_in_eager(graph: dtorch.Graph) -> None:
    x = torch.arange(6.0).reshape(3, 2)
    mesh = dtorch.init_device_mesh("cpu", 2)

    def fn(t: dtorch.Tensor) -> tuple[dtorch.Tensor, ...]:
        y = t * 2
        return y, t + 1, y

    program = dtorch.trace(fn, dtorch.from_torch(x, device_mesh=mesh, placements=[dtorch.Shard(0)]))
    got = program(dtorch.from_torch(x, device_mesh=mesh, placements=[dtorch.Shard(0)]))
    assert got[0] is got[2] and got[0] is not got[1]
    got[0].add_(1)  # through the one handle, as eagerly
    torch.testing.assert_close(got[2].to_torch(), x * 2 + 1)
    torch.testing.assert_close(got[1].to_torch(), x + 1)


def _calls_racing_a_rebind(graph: dtorch.Graph) -> None:
    """Two threads call a program 40 times each while a third rebinds its constant 4 times."""
    import threading

    weight = dtorch.full((4,), 1.0, graph=graph)
    program = dtorch.trace(lambda a: a + weight, dtorch.zeros(4, graph=graph))
    program(dtorch.zeros(4, graph=graph)).tolist()  # the body is sent
    start = threading.Barrier(3)
    futures: list[Any] = []

    def call() -> None:
        start.wait(10)
        for _ in range(40):
            futures.append(program(dtorch.zeros(4, graph=graph)).to_torch_async())

    def rebind() -> None:
        start.wait(10)
        for value in (2.0, 3.0, 4.0, 5.0):
            weight.data = dtorch.full((4,), value, graph=graph)

    threads = [threading.Thread(target=f) for f in (call, call, rebind)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    got = {future.get(timeout_s=60)[0].item() for future in futures}
    assert got <= {1.0, 2.0, 3.0, 4.0, 5.0} and len(futures) == 80
    graph.sync()


def test_calls_from_threads_while_a_constant_is_rebound(graph: dtorch.Graph) -> None:
    """Each call reads the constant as it is then (the old or a new value): a rebind renames
    the body, and a call from another thread meanwhile sent a by-name call of a body never
    sent, which broke the graph (or stopped a worker). A race: this caught the old code in
    most runs, on one runner or both."""
    import sys

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch often: the race shows within a few rounds
    try:
        for _ in range(20):
            _calls_racing_a_rebind(graph)
    finally:
        sys.setswitchinterval(interval)


def test_the_function_s_work_recorded_by_another_thread_is_refused(graph: dtorch.Graph) -> None:
    """fn submitting x * 2 to a thread pool: the trace would have kept its trace-time value
    as a constant (a replay on [5, 6, 7] gave [3, 3, 3]); a thread's work on other tensors
    is a constant to the program, as one computed before the trace."""
    w = dtorch.ones(3)
    x = dtorch.tensor([5.0, 6.0, 7.0])
    with ThreadPoolExecutor(1) as pool:

        def inside(t: dtorch.Tensor) -> dtorch.Tensor:
            return pool.submit(lambda: t * 2).result() + 1

        with pytest.raises(dtorch.TraceError, match="recorded by another thread, reads the"):
            dtorch.trace(inside, dtorch.ones(3))
        assert inside(x).tolist() == [11.0, 13.0, 15.0]  # the graph goes on

        def beside(t: dtorch.Tensor) -> dtorch.Tensor:
            return t + pool.submit(lambda: w * 2).result()

        program = dtorch.trace(beside, dtorch.ones(3))
        assert len(program.spec.constants) == 1
        assert program(x).tolist() == [7.0, 8.0, 9.0]


def test_a_rebind_in_another_thread_during_a_trace_is_not_the_function_s(
    graph: dtorch.Graph,
) -> None:
    """The trace refuses a rebind (``t.data = other``) the function makes, not one another
    thread makes on the same graph meanwhile (its other operators are not the trace's either)."""
    import threading

    weight = dtorch.full((4,), 2.0, graph=graph)
    inside, done = threading.Event(), threading.Event()

    def elsewhere() -> None:
        assert inside.wait(10)
        other = dtorch.zeros(4, graph=graph)
        other.data = dtorch.ones(4, graph=graph)
        done.set()

    def fn(x: dtorch.Tensor) -> dtorch.Tensor:
        y = x * weight
        inside.set()
        assert done.wait(10)  # the other thread rebinds while the function runs
        return y + 1

    thread = threading.Thread(target=elsewhere)
    thread.start()
    program = dtorch.trace(fn, dtorch.ones(4, graph=graph))
    thread.join(10)
    assert program(dtorch.full((4,), 3.0, graph=graph)).tolist() == [7.0] * 4


def test_a_function_without_tensor_arguments_traces_on_the_default_graph(
    make_graph: Any,
) -> None:
    """Without tensor arguments ``trace`` records on the thread's default graph: constants on
    another graph are refused with the way out (``with graph.as_default():``), which works."""
    other = make_graph()  # of the runner under test, not the thread's default graph
    mesh = dtorch.init_device_mesh("cpu", 2)
    w = dtorch.ones(3, device_mesh=mesh, graph=other)
    with pytest.raises(TraceError, match=r"trace under `with graph\.as_default\(\):`"):
        dtorch.trace(lambda: w * 2)
    with other.as_default():
        program = dtorch.trace(lambda: w * 2)
    assert torch.equal(program().to_torch(), torch.full((3,), 2.0))

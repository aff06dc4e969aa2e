"""torch's own functions on dtorch tensors (``__torch_function__``): ``torch.add(t, 1)``,
``torch.nn.functional.relu(t)`` and ``torch.linalg.norm(t)`` run dtorch's counterparts, so the
same call on the full torch tensors is the oracle; the result is a dtorch tensor. Calls dtorch
cannot run are refused with a TypeError that says what to do. Thread and process mode."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import dtorch
from dtorch import Replicate, Shard
from dtorch.api.torch_function import counterparts

pytestmark = pytest.mark.timeout(60)

_GEN = torch.Generator().manual_seed(0)
_A, _B = torch.randn(8, 6, generator=_GEN), torch.randn(8, 6, generator=_GEN)

#: name -> a call of torch's functions on two [8, 6] tensors (sharded on rows in dtorch)
CALLS: dict[str, Callable[[Any, Any], Any]] = {
    "torch.add": lambda a, b: torch.add(a, b, alpha=2),
    "torch.mul": lambda a, b: torch.mul(a, 3.0),
    "torch.matmul": lambda a, b: torch.matmul(a, b.transpose(0, 1)),
    "torch.cat": lambda a, b: torch.cat([a, b], 1),
    "torch.stack": lambda a, b: torch.stack((a, b), 2),
    "torch.where": lambda a, b: torch.where(a > 0, a, b),
    "torch.sum": lambda a, b: torch.sum(a, dim=1),
    "torch.mean": lambda a, b: torch.mean(a, 1, keepdim=True),
    "torch.max": lambda a, b: torch.max(a, dim=1).values,
    "torch.maximum": torch.maximum,
    "torch.exp": lambda a, b: torch.exp(a),
    "torch.clamp": lambda a, b: torch.clamp(a, min=-0.5, max=0.5),
    "torch.softmax": lambda a, b: torch.softmax(a, -1),
    "torch.einsum": lambda a, b: torch.einsum("ij,ij->i", a, b),
    "torch.sort": lambda a, b: torch.sort(a, dim=1, descending=True).values,
    "torch.topk": lambda a, b: torch.topk(a, 2, dim=1).indices,
    "torch.cumsum": lambda a, b: torch.cumsum(a, 1),
    "torch.flatten": lambda a, b: torch.flatten(a),
    "torch.transpose": lambda a, b: torch.transpose(a, 0, 1),
    "torch.zeros_like": lambda a, b: torch.zeros_like(a),
    "torch.allclose": lambda a, b: torch.allclose(a, a + 1e-9),
    "F.relu": lambda a, b: F.relu(a),
    "F.gelu": lambda a, b: F.gelu(a, approximate="tanh"),
    "F.silu": lambda a, b: F.silu(a),
    "F.softmax": lambda a, b: F.softmax(a, dim=-1),
    "F.log_softmax": lambda a, b: F.log_softmax(a, 1),
    "F.layer_norm": lambda a, b: F.layer_norm(a, (6,)),
    "F.linear": lambda a, b: F.linear(a, b[:3]),
    "F.dropout": lambda a, b: F.dropout(a, 0.5, training=False),
    "F.pad": lambda a, b: F.pad(a, (1, 2)),
    "F.mse_loss": F.mse_loss,
    "torch.trace": lambda a, b: torch.trace(a),  # the matrix trace, not dtorch.trace
    "torch.lu": lambda a, b: torch.lu(a[:6])[0],  # torch's wrapper passes out=None
    "torch.meshgrid(list)": lambda a, b: torch.meshgrid([a[0], b[1]], indexing="ij")[1],
    "torch.atleast_2d(tuple)": lambda a, b: torch.atleast_2d((a[0, 0], b[1]))[0],
    "torch.unflatten(sizes=)": lambda a, b: torch.unflatten(a, 1, sizes=(2, 3)),
    "torch.t(input=)": lambda a, b: torch.t(input=a),
    "torch.add(out=None)": lambda a, b: torch.add(a, b, out=None),
    "torch.exp_": lambda a, b: torch.exp_(a.clone()),  # in place: the method t.exp_()
    "torch.clamp_": lambda a, b: torch.clamp_(a.clone(), min=-0.5),
    "torch.linalg.norm": lambda a, b: torch.linalg.norm(a, dim=1),
    "torch.linalg.vector_norm": lambda a, b: torch.linalg.vector_norm(a, 3),
    "torch.norm(p='nuc')": lambda a, b: torch.norm(a, p="nuc"),  # dtorch.linalg.older.norm
    # NumPy's spellings, which torch's argument parser takes for its own names
    "torch.sum(axis=)": lambda a, b: torch.sum(a, axis=1, keepdims=True),
    "torch.cat(axis=)": lambda a, b: torch.cat([a, b], axis=0),
    "torch.argmax(axis=)": lambda a, b: torch.argmax(a, axis=1),
    "torch.maximum(x1=, x2=)": lambda a, b: torch.maximum(x1=a, x2=b),
    "torch.add(x=)": lambda a, b: torch.add(x=a, other=b),
    "F.cosine_similarity(x1=, x2=)": lambda a, b: F.cosine_similarity(x1=a, x2=b),
    "torch.swapaxes(axis0=)": lambda a, b: torch.swapaxes(a, axis0=0, axis1=1),
    "torch.true_divide(other=)": lambda a, b: torch.true_divide(a, other=b),
    "torch.linalg.vector_norm(input=)": lambda a, b: torch.linalg.vector_norm(input=a, ord=3),
    # listed by torch.overrides.get_ignored_functions(), yet torch asks for them
    "F.hardswish": lambda a, b: F.hardswish(a),
    "F.hardsigmoid": lambda a, b: F.hardsigmoid(a),
    "torch.rand_like": lambda a, b: (torch.manual_seed(0), torch.rand_like(a))[1],
    "torch.fill": lambda a, b: torch.fill(a, 2.5) + a,  # a itself unchanged by it
    "torch.fill(0-d tensor)": lambda a, b: torch.fill(a, torch.tensor(-1.5)),
    # torch.special: dtorch.special's aliases and same-named functions
    "torch.special.expit": lambda a, b: torch.special.expit(a),
    "torch.special.gammaln": lambda a, b: torch.special.gammaln(a.abs() + 0.5),
    "torch.special.erf(input=)": lambda a, b: torch.special.erf(input=a),
    "torch.special.logsumexp": lambda a, b: torch.special.logsumexp(a, 1),
    "torch.special.xlogy": lambda a, b: torch.special.xlogy(a.abs(), b.abs()),
    # torch.special's own elementwise functions: one torch kernel on each shard
    **{
        f"torch.special.{name}": (lambda a, b, name=name: getattr(torch.special, name)(a))
        for name in ("entr", "ndtr", "log_ndtr", "i0e", "i1", "i1e", "erfcx", "bessel_j0")
    },
    "torch.special.ndtri": lambda a, b: torch.special.ndtri(a.sigmoid()),
    "torch.special.bessel_j1": lambda a, b: torch.special.bessel_j1(a * 4),
}


def _on(t: torch.Tensor, mesh: dtorch.DeviceMesh, placement: Any) -> dtorch.Tensor:
    return dtorch.from_torch(t, device_mesh=mesh, placements=[placement])


@pytest.mark.parametrize("name", list(CALLS))
def test_torch_function_runs_dtorch_counterpart(graph: dtorch.Graph, name: str) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2,))
    call = CALLS[name]
    want = call(_A, _B)
    whole = {"F.linear", "torch.trace", "torch.lu", "torch.meshgrid(list)"}
    whole.update(("torch.atleast_2d(tuple)", "torch.norm(p='nuc')"))
    placement = Replicate() if name in whole else Shard(0)  # they cut rows or read across them
    got = call(_on(_A, mesh, placement), _on(_B, mesh, Replicate()))
    if isinstance(want, bool):
        assert got is want
        return
    assert isinstance(got, dtorch.Tensor), f"{name} returned {type(got).__name__}"
    torch.testing.assert_close(got.to_torch(), want)


def test_placements_follow_dtorchs_rules(graph: dtorch.Graph) -> None:
    """The call is dtorch's: a sharded operand keeps its shards, the implicit Replicate ->
    Shard of a binary operator applies, and a placement dtorch refuses is refused."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    a, b = _on(_A, mesh, Shard(0)), _on(_B, mesh, Replicate())
    assert torch.add(a, b).placements == [Shard(0)]
    assert torch.sum(a).placements == [dtorch.Partial()]
    with pytest.raises(dtorch.PlacementError, match="matmul: got"):
        torch.matmul(a, _on(_B.T.contiguous(), mesh, Shard(0)))


def test_tuple_results_and_in_place(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2,))
    a = _on(_A, mesh, Shard(0))
    values, indices = torch.max(a, dim=1)
    want = torch.max(_A, dim=1)
    torch.testing.assert_close(values.to_torch(), want.values)
    torch.testing.assert_close(indices.to_torch(), want.indices)
    out = F.relu(a, inplace=True)
    assert out is a
    torch.testing.assert_close(a.to_torch(), F.relu(_A))


def test_keyword_torch_passes_on_with_its_default_is_dropped(graph: dtorch.Graph) -> None:
    """torch.norm passes ``out=None`` to its override; dtorch's norm takes no ``out``."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    a = _on(_A, mesh, Shard(0))
    torch.testing.assert_close(torch.norm(a, out=None).to_torch(), torch.norm(_A))
    with pytest.raises(TypeError, match=r"torch.add\(\.\.\., out=.*dtorch.add takes no 'out'"):
        torch.add(a, 1, out=a)


def test_no_counterpart_is_refused_with_the_way_out(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2,))
    a = _on(_A, mesh, Shard(0))
    with pytest.raises(
        TypeError, match=r"torch.functional.stft got a dtorch.Tensor.*torch.fft.*\.to_torch\(\)"
    ):
        torch.stft(a, 2, return_complex=True)


def test_torch_and_dtorch_tensors_do_not_mix(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2,))
    a = _on(_A, mesh, Shard(0))
    with pytest.raises(TypeError, match=r"torch.Tensor.add on a torch.Tensor .*does not mix"):
        _A.add(a)
    with pytest.raises(TypeError, match="does not mix"):
        _A[a > 0]
    with pytest.raises(TypeError, match=r"convert torch tensors with dtorch.tensor"):
        _A + a
    with pytest.raises(TypeError, match=r"convert torch tensors with dtorch.tensor"):
        torch.add(_A, a)
    with pytest.raises(TypeError, match=r"torch.clamp_ on a torch.Tensor .*does not mix"):
        torch.clamp_(_A.clone(), min=a)
    with pytest.raises(TypeError, match=r"layer_norm: input 1 must be a dtorch.Tensor"):
        F.layer_norm(a, (6,), torch.ones(6))  # torch lists torch.Tensor among the types


def test_table_pairs_same_names() -> None:
    """Every entry is dtorch's function of torch's name, in the matching namespace."""
    table = counterparts()
    assert table[torch.add].function is dtorch.add
    assert table[F.relu].function is dtorch.nn.functional.relu
    assert table[torch.linalg.norm].function is dtorch.linalg.norm
    assert table[torch.embedding].function is dtorch.embedding  # torch's top-level form
    namespaces = {
        "dtorch": torch,
        "dtorch.nn.functional": F,
        "dtorch.linalg": torch.linalg,
        "dtorch.nn.init": torch.nn.init,
        "dtorch.special": torch.special,
        "dtorch.fft": torch.fft,
    }
    assert table[torch.special.expit].function is dtorch.sigmoid
    assert table[torch.nn.init.normal_].function is dtorch.nn.init.normal_
    vf = torch._C._VariableFunctions
    list_forms = [getattr(vf, n) for n in ("meshgrid", "atleast_1d", "atleast_2d", "atleast_3d")]
    for func, counterpart in table.items():
        where, name = counterpart.name.rsplit(".", 1)
        if func in (torch.trace, torch.eye) or func in list_forms:  # checked by the calls
            continue
        if where == "dtorch.Tensor":  # a method: torch's function of its name
            assert getattr(torch, name) is func and not hasattr(dtorch, name), name
            continue
        assert getattr(namespaces[where], name) is func, counterpart.name
    assert len(table) > 400
    # torch lists these as never overridden, yet asks for them: they must reach dtorch
    ignored = set(torch.overrides.get_ignored_functions())
    asked = {torch.eye, torch.rand_like, torch.randn_like, torch.randint_like, torch.vander}
    assert asked | {torch.nn.functional.hardswish, torch.nn.functional.hardsigmoid} <= set(table)
    assert asked <= ignored


def test_a_dtorch_tensor_where_torch_takes_a_number_is_refused_saying_so(graph) -> None:
    """torch reads a 0-d tensor's value there; dtorch does not wait for one implicitly."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    t, k = _on(_A, mesh, Shard(0)), _on(torch.tensor(2.0), mesh, Replicate())
    with pytest.raises(TypeError, match=r"got a dtorch tensor .* pass the number \(t.item\(\)\)"):
        torch.add(t, 1, alpha=k)
    torch.testing.assert_close(torch.add(t, 1, alpha=torch.tensor(2.0)).to_torch(), _A + 2)
    for fmt in (torch.channels_last, torch.channels_last_3d):  # dtorch keeps row-major only
        with pytest.raises(RuntimeError, match=r"memory_format=.* is not supported"):
            torch.zeros_like(_on(torch.ones(2, 3, 4, 4), mesh, Shard(0)), memory_format=fmt)
    with pytest.raises(RuntimeError, match="cdouble: memory_format"):
        t.cdouble(memory_format=torch.channels_last)
    assert t.cdouble(memory_format=torch.preserve_format).dtype == torch.complex128

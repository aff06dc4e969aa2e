"""Call forms of API.md's names that DTorch and DTensor programs write: ``Partial("sum")``,
placements from the text errors print, ``MemoryStats.find`` by ``torch.device``, and the
default dtype refused where torch's ``set_default_dtype`` refuses it."""

from __future__ import annotations

import pytest
import torch

import dtorch
from dtorch.errors import GraphError, PlacementError


def test_partial_takes_dtensors_sum_spelling() -> None:
    assert dtorch.Partial("sum") == dtorch.Partial(reduce_op="sum") == dtorch.Partial()
    assert hash(dtorch.Partial("sum")) == hash(dtorch.Partial())
    assert repr(dtorch.Partial("sum")) == "Partial(sum)"
    with pytest.raises(PlacementError, match=r"Partial\('max'\): dtorch's Partial is a sum"):
        dtorch.Partial("max")


def test_placements_read_the_text_errors_print() -> None:
    assert dtorch.Placement("S(0)") == dtorch.Shard(0)
    assert dtorch.Placement("S(-1)") == dtorch.Shard(-1)
    assert dtorch.Placement("S1") == dtorch.Shard(1)
    with pytest.raises(PlacementError, match="not a placement"):
        dtorch.Placement("S(x)")


def test_memory_stats_find_takes_a_device(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    t = dtorch.ones(4, device_mesh=mesh, graph=graph)
    stats = graph.get_memory_stats(mesh)
    assert stats.find(torch.device("cpu", 1)) is stats.find(1)
    assert stats.find(t.device) is stats.find(0)  # cpu device 0 prints as torch.device("cpu")
    with pytest.raises(KeyError, match="no device 5"):
        stats.find(torch.device("cpu", 5))


def test_the_default_dtype_is_a_floating_one(graph: dtorch.Graph) -> None:
    with pytest.raises(TypeError):
        torch.set_default_dtype(torch.int32)
    with (
        pytest.raises(GraphError, match="must be a floating dtype"),
        graph.dtype_guard(torch.int32),
    ):
        pass
    with graph.dtype_guard(torch.float64):
        assert dtorch.randn(2, graph=graph).dtype == torch.float64
    assert graph.default_dtype == torch.float32


def test_wrong_argument_kinds_get_errors_that_say_what_is_accepted(graph: dtorch.Graph) -> None:
    full = torch.arange(4.0)
    for lone in (dtorch.Shard(0), "S0"):
        with pytest.raises(PlacementError, match=r"must be a list .* did you mean \["):
            dtorch.from_torch(full, placements=lone, graph=graph)
    t = dtorch.from_torch(full, graph=graph)
    with pytest.raises(TypeError, match=r"equal: expected a dtorch\.Tensor, got Tensor of torch"):
        t.equal(full)
    with pytest.raises(TypeError, match=r"equal: expected a dtorch\.Tensor"):
        dtorch.equal(t, full)
    with pytest.raises(TypeError, match=r"profile: graph must be a dtorch\.Graph or None"):
        dtorch.profile("trace.json")  # type: ignore[arg-type]


def test_redistribute_by_dict_reads_text_placements(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    full = torch.arange(16.0).reshape(4, 4)
    t = dtorch.from_torch(
        full, device_mesh=mesh, placements=[dtorch.Shard(0), dtorch.Shard(1)], graph=graph
    )
    moved = t.redistribute_by_dict(placements_dict={"dp": "R", "tp": "S0"})
    assert moved.placements == [dtorch.Replicate(), dtorch.Shard(0)]
    assert torch.equal(moved.to_torch(), full)
    with pytest.raises(PlacementError, match=r"Placement\(3\): not a placement"):
        t.redistribute_by_dict(placements_dict={"dp": 3, "tp": "R"})


def test_a_loop_over_a_tensor_sharded_on_dim_0_says_it_is_the_loop(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    full = torch.arange(6.0).reshape(3, 2)
    t = dtorch.from_torch(full, device_mesh=mesh, placements=[dtorch.Shard(0)], graph=graph)
    with pytest.raises(PlacementError, match=r"^iterating over a tensor's dim 0: unbind: got"):
        list(t)
    with pytest.raises(TypeError):  # Python's "not iterable": probes with iter() move on
        iter(t)
    rows = dtorch.from_torch(full, device_mesh=mesh, placements=[dtorch.Shard(1)], graph=graph)
    assert [r.tolist() for r in rows] == full.tolist()


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("exp", {}),
        ("abs", {}),
        ("floor", {}),
        ("lgamma", {}),
        ("clone", {}),
        ("detach", {}),
        ("tril", {"diagonal": 1}),
        ("triu", {}),
        ("equal", {"other": None}),
        ("nonzero", {}),
    ],
)
def test_functions_take_torchs_input_keyword(name: str, kwargs: dict, graph: dtorch.Graph) -> None:  # type: ignore[type-arg]
    """``dtorch.exp(input=t)`` as ``torch.exp(input=t)`` (the functions that are Tensor
    methods named their tensor ``self`` or ``t``)."""
    full = torch.tensor([[0.5, -1.0], [2.0, 0.0]])
    t = dtorch.from_torch(full, device_mesh=dtorch.init_device_mesh("cpu", 2))
    ours = {k: t if v is None else v for k, v in kwargs.items()}
    theirs = {k: full if v is None else v for k, v in kwargs.items()}
    got = getattr(dtorch, name)(input=t, **ours)
    want = getattr(torch, name)(input=full, **theirs)
    if isinstance(want, torch.Tensor):
        assert torch.equal(got.to_torch(), want)
    else:
        assert got == want


_TORCHS_OWN = ["no_grad", "enable_grad", "inference_mode", "set_grad_enabled", "is_grad_enabled"]
_TORCHS_OWN += ["seed", "initial_seed", "get_rng_state", "set_rng_state"]  # manual_seed: a call


def test_torchs_autograd_switches_and_random_state_are_torchs(graph: dtorch.Graph) -> None:
    """dtorch records no gradients and draws from torch's default generator: its
    ``no_grad``, ``manual_seed`` ... are torch's own, so a program's ``dtorch.manual_seed(3)``
    gives ``dtorch.randn`` torch's values."""
    for name in _TORCHS_OWN:
        assert getattr(dtorch, name) is getattr(torch, name)
    dtorch.manual_seed(3)
    drawn = dtorch.randn(
        5, device_mesh=dtorch.init_device_mesh("cpu", 2), placements=[dtorch.Shard(0)]
    )
    torch.manual_seed(3)
    assert torch.equal(drawn.to_torch(), torch.randn(5))
    assert dtorch.is_tensor(drawn) and not dtorch.is_tensor(torch.zeros(1))

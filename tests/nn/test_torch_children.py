"""A torch module without parameters or buffers (an activation, a dropout, HF's ACT2FN
entries) is a child of a dtorch module, as model code builds it: it runs on dtorch tensors
through torch's own functions, appears in ``named_modules``, the repr and state-dict walks,
follows ``train``/``eval``, and loads torch's checkpoints. A torch module that holds
parameters or buffers is refused, naming the dtorch layers to use."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import dtorch
from dtorch import nn

pytestmark = pytest.mark.timeout(60)


class _Block(nn.Module):
    def __init__(self, mesh: dtorch.DeviceMesh | None = None) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 6, device_mesh=mesh)
        self.act = torch.nn.GELU(approximate="tanh")
        self.drop = torch.nn.Dropout(0.25)

    def forward(self, x: Any) -> Any:
        return self.drop(self.act(self.fc(x)))


class _TorchBlock(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 6)
        self.act = torch.nn.GELU(approximate="tanh")
        self.drop = torch.nn.Dropout(0.25)

    def forward(self, x: Any) -> Any:
        return self.drop(self.act(self.fc(x)))


def test_a_torch_activation_and_dropout_are_children(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    theirs, ours = _TorchBlock(), _Block(mesh)
    assert ours.load_state_dict(theirs.state_dict()).missing_keys == []
    assert repr(ours).replace("_Block", "_TorchBlock", 1) == repr(theirs)
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    full = torch.randn(3, 4)
    x = dtorch.from_torch(full, device_mesh=mesh, placements=[dtorch.Shard(0)])
    ours.eval(), theirs.eval()
    assert ours.drop.training is False
    with torch.no_grad():
        want = theirs(full)
    torch.testing.assert_close(ours(x).to_torch(), want)
    ours.train(), theirs.train()
    torch.manual_seed(5)
    got = ours(x).to_torch()
    torch.manual_seed(5)
    with torch.no_grad():
        want = theirs(full)
    torch.testing.assert_close(got, want)  # torch's dropout draws, however sharded


def test_containers_take_them(graph: dtorch.Graph) -> None:
    seq = nn.Sequential(nn.Linear(2, 2), torch.nn.ReLU())
    listed = nn.ModuleList([torch.nn.Tanh(), nn.Linear(2, 2)])
    named = nn.ModuleDict({"act": torch.nn.SiLU()})
    assert isinstance(seq[1], torch.nn.ReLU) and isinstance(listed[0], torch.nn.Tanh)
    assert [type(m).__name__ for m in named.values()] == ["SiLU"]
    x = dtorch.tensor([[-1.0, 2.0]])
    assert (seq(x).to_torch() >= 0).all()
    converted = nn.SyncBatchNorm.convert_sync_batchnorm(seq)
    assert isinstance(converted[1], torch.nn.ReLU)
    program = dtorch.trace(seq, x)
    assert torch.equal(program(x).to_torch(), seq(x).to_torch())


def test_transformers_activations(graph: dtorch.Graph) -> None:
    activations = pytest.importorskip("transformers.activations")
    full = torch.randn(4, 3)
    x = dtorch.from_torch(full, device_mesh=dtorch.init_device_mesh("cpu", 2),
                          placements=[dtorch.Shard(0)])  # fmt: skip
    for name in ("gelu_new", "gelu_pytorch_tanh", "quick_gelu", "silu", "gelu"):
        holder = nn.Module()
        holder.act = activations.ACT2FN[name]
        torch.testing.assert_close(holder.act(x).to_torch(), activations.ACT2FN[name](full))


@pytest.mark.parametrize(
    "module",
    [
        torch.nn.Linear(2, 2),
        torch.nn.BatchNorm1d(2),  # buffers only
        torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(2, 2)),  # a child's parameters
    ],
    ids=["parameters", "buffers", "a child's"],
)
def test_a_torch_module_with_state_is_refused(module: torch.nn.Module, graph) -> None:  # type: ignore[no-untyped-def]
    holder = nn.Module()
    with pytest.raises(TypeError, match=r"holds parameters or buffers.*dtorch.nn layers"):
        holder.layer = module
    with pytest.raises(TypeError, match="holds parameters or buffers"):
        nn.Sequential(module)
    assert list(holder.named_children()) == []


def test_a_torch_child_that_gains_state_later_is_refused_by_the_walks(graph) -> None:  # type: ignore[no-untyped-def]
    holder = nn.Sequential(nn.Linear(2, 2), torch.nn.GELU())
    holder[1].register_buffer("scale", torch.ones(2))
    for walk in (
        holder.state_dict,
        lambda: list(holder.named_parameters()),
        lambda: holder.to(torch.float64),
        lambda: holder.load_state_dict({}, strict=False),
    ):
        with pytest.raises(TypeError, match="now holds parameters or buffers"):
            walk()


def test_insert_takes_a_stateless_torch_module_and_refuses_one_with_state(graph) -> None:  # type: ignore[no-untyped-def]
    for container in (nn.Sequential(nn.Linear(2, 2)), nn.ModuleList([nn.Linear(2, 2)])):
        container.insert(0, torch.nn.ReLU())
        assert isinstance(container[0], torch.nn.ReLU) and len(container) == 2
        with pytest.raises(TypeError, match="holds parameters or buffers"):
            container.insert(1, torch.nn.Linear(2, 2))
        assert len(container) == 2  # left as it was


def test_submodule_paths_reach_torch_children(graph: dtorch.Graph) -> None:
    model = nn.Sequential(nn.Linear(2, 2), torch.nn.GELU())
    assert isinstance(model.get_submodule("1"), torch.nn.GELU)
    model.set_submodule("1", torch.nn.ReLU())
    assert isinstance(model[1], torch.nn.ReLU)

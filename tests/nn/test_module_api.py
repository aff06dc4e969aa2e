"""dtorch.nn's Module API and layers against torch.nn on the same code: reset_parameters and
reset_running_stats, containers taking containers, numpy sizes, Parameter.requires_grad_ and
custom attributes, to/type/set_submodule, the refused calls (backward hooks, share_memory,
channels_last), always_call hooks when forward or a hook raises, None in a Sequential, and a
grad converted by ``to``; thread and process mode."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch

import dtorch
from dtorch import nn
from dtorch.errors import MeshError

pytestmark = pytest.mark.timeout(120)


def _scramble(model: Any) -> None:
    """Every floating state entry of a dtorch model set to 7, every integer one to 5."""
    for value in model.state_dict().values():
        value.fill_(7.0 if value.is_floating_point() else 5)


_RESETTABLE: list[Callable[[ModuleType], Any]] = [
    lambda lib: lib.LayerNorm(3),
    lambda lib: lib.LayerNorm(3, bias=False),
    lambda lib: lib.BatchNorm2d(3),
    lambda lib: lib.BatchNorm2d(3, affine=False),
    lambda lib: lib.GroupNorm(1, 2),
    lambda lib: lib.RMSNorm(4),
    lambda lib: lib.Embedding(6, 3),
    lambda lib: lib.Embedding(6, 3, padding_idx=2),
]


@pytest.mark.parametrize("make", _RESETTABLE)
def test_reset_parameters_matches_torch(make: Callable, graph: dtorch.Graph) -> None:
    ours = make(nn)
    _scramble(ours)
    torch.manual_seed(3)
    ours.reset_parameters()
    torch.manual_seed(3)
    ref = make(torch.nn)  # torch's constructor calls reset_parameters
    for key, value in ref.state_dict().items():
        mine = ours.state_dict()[key].to_torch()
        assert torch.equal(mine, value) and mine.dtype == value.dtype, key
        assert torch.equal(mine.signbit(), value.signbit()), key  # bit for bit: +0.0 rows


def test_reset_running_stats_matches_torch(graph: dtorch.Graph) -> None:
    ref, ours = torch.nn.BatchNorm2d(2), nn.BatchNorm2d(2)
    x = torch.randn(4, 2, 3, 3)
    ref(x), ours(dtorch.from_torch(x))
    ref.weight.data.fill_(3.0)
    ours.weight.fill_(3.0)
    ref.reset_running_stats(), ours.reset_running_stats()
    for key, value in ref.state_dict().items():
        assert torch.equal(ours.state_dict()[key].to_torch(), value), key


def test_containers_take_containers(graph: dtorch.Graph) -> None:
    built = []
    for lib in (torch.nn, nn):
        layers = lib.ModuleList([lib.ReLU()])
        layers.extend(lib.Sequential(lib.Tanh()))
        layers += lib.ModuleList([lib.Sigmoid()])
        table = lib.ModuleDict(lib.ModuleDict({"a": lib.ReLU()}))
        table.update(lib.ModuleDict({"b": lib.Tanh()}))
        built.append((repr(layers), repr(table)))
        for bad in (lib.ReLU(), 5):
            with pytest.raises(TypeError, match=r"ModuleList\.extend should be called with an"):
                layers.extend(bad)
    assert built[0] == built[1]


def test_sequential_with_none_matches_torch(graph: dtorch.Graph) -> None:
    ref = torch.nn.Sequential(torch.nn.ReLU(), None, torch.nn.Tanh())
    ours = nn.Sequential(nn.ReLU(), None, nn.Tanh())
    assert [repr(m) for m in ours] == [repr(m) for m in ref] and len(ours) == len(ref)
    with pytest.raises(TypeError, match="'NoneType' object is not callable"):
        ref(torch.ones(1))
    with pytest.raises(TypeError, match="'NoneType' object is not callable"):
        ours(dtorch.ones(1))


@pytest.mark.parametrize(
    "make",
    [
        lambda lib: lib.Linear(np.prod((2, 3)), np.int32(4)),
        lambda lib: lib.Linear(True, 3),
        lambda lib: lib.Embedding(np.int64(5), np.int64(3)),
        lambda lib: lib.Conv2d(np.int64(2), np.int64(4), np.int64(3), stride=(np.int64(1), 1)),
        lambda lib: lib.BatchNorm2d(np.int64(3)),
        lambda lib: lib.GroupNorm(np.int64(2), np.int64(4)),
        lambda lib: lib.LayerNorm(np.int64(3)),
    ],
)
def test_numpy_and_bool_sizes_match_torch(make: Callable, graph: dtorch.Graph) -> None:
    ref, ours = make(torch.nn), make(nn)
    assert [p.shape for p in ours.parameters()] == [p.shape for p in ref.parameters()]
    values = [v for v in vars(ours).values() if not isinstance(v, dict)]
    flat = [x for v in values for x in (v if isinstance(v, tuple) else (v,))]
    assert not any(isinstance(x, np.integer) for x in flat), vars(ours)  # converted to int


def test_parameter_requires_grad_and_attributes(graph: dtorch.Graph) -> None:
    ref, ours = torch.nn.Parameter(torch.ones(2)), nn.Parameter(dtorch.ones(2))
    for p in (ref, ours):
        assert p.requires_grad_(False) is p and p.requires_grad is False
        assert p.requires_grad_().requires_grad is True
    with pytest.raises(RuntimeError, match="Only Tensors of floating point and complex dtype"):
        torch.nn.Parameter(torch.ones(2, dtype=torch.int64))
    with pytest.raises(RuntimeError, match="Only Tensors of floating point and complex dtype"):
        nn.Parameter(dtorch.ones(2, dtype=torch.int64))
    assert not nn.Parameter(dtorch.ones(2, dtype=torch.int64), requires_grad=False).requires_grad
    model = nn.Linear(2, 2)
    model.weight.no_wd = True
    model.register_buffer("b", nn.Buffer(dtorch.ones(2)))
    model.b.tag = "x"
    twin = copy.deepcopy(model)
    assert twin.weight.no_wd is True and twin.b.tag == "x"
    twin.weight.no_wd = False
    assert model.weight.no_wd is True  # a dict of its own
    shallow = copy.copy(model.weight)
    shallow.no_wd = 3
    assert model.weight.no_wd is True
    model.to(torch.float64)
    assert model.weight.no_wd is True and model.b.tag == "x" and model.weight.dtype == torch.float64
    assert not hasattr(model.weight.detach(), "no_wd")  # torch's detach has none either


def test_to_converts_grad_and_type(graph: dtorch.Graph) -> None:
    ref, ours = torch.nn.Linear(2, 2), nn.Linear(2, 2)
    ref.weight.grad, ours.weight.grad = torch.ones(2, 2), dtorch.ones(2, 2)
    grad = ours.weight.grad
    for model in (ref, ours):
        model.to(torch.float64)
    assert ours.weight.grad.dtype == ref.weight.grad.dtype == torch.float64
    assert ours.weight.grad is grad
    for model in (ref, ours):
        model.half()
    assert ours.weight.grad.dtype == ref.weight.grad.dtype == torch.float16
    for model in (ref, ours):
        assert model.type(torch.float64) is model
    assert ours.bias.dtype == ref.bias.dtype == torch.float64
    assert ours.to(memory_format=torch.contiguous_format) is ours
    assert ours.to(torch.float32, memory_format=torch.preserve_format).weight.dtype == torch.float32
    with pytest.raises(ValueError, match="not supported: dtorch keeps no channels-last"):
        ours.to(memory_format=torch.channels_last)


def test_set_submodule_matches_torch(graph: dtorch.Graph) -> None:
    outcomes = []
    for lib in (torch.nn, nn):
        seq = lib.Sequential(lib.Linear(2, 2))
        seq.set_submodule("0", lib.ReLU())
        seq.set_submodule("1", lib.Tanh())
        seq.set_submodule("0.x", lib.ReLU())
        seq.weight = lib.Parameter(torch.ones(1) if lib is torch.nn else dtorch.ones(1))
        errors = []
        for args in (("", lib.ReLU()), ("0", 3), ("2.x", lib.ReLU()), ("weight", lib.ReLU())):
            with pytest.raises((ValueError, AttributeError)) as error:
                seq.set_submodule(*args)
            errors.append((error.type, str(error.value).replace("torch.nn", "dtorch.nn")))
        with pytest.raises(AttributeError) as error:
            seq.set_submodule("0.y", lib.ReLU(), strict=True)
        errors.append((error.type, str(error.value)))
        outcomes.append((repr(seq), errors))
    assert outcomes[0][0] == outcomes[1][0]
    assert [e[0] for e in outcomes[0][1]] == [e[0] for e in outcomes[1][1]]
    assert [e[1] for e in outcomes[0][1] if "found" not in e[1]] == [
        e[1] for e in outcomes[1][1] if "found" not in e[1]
    ]


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.register_full_backward_hook(lambda *a: None),
        lambda m: m.register_full_backward_pre_hook(lambda *a: None),
        lambda m: m.register_backward_hook(lambda *a: None),
    ],
)
def test_backward_hooks_are_refused(call: Callable, graph: dtorch.Graph) -> None:
    with pytest.raises(NotImplementedError, match="dtorch has no autograd"):
        call(nn.Linear(2, 2))


def test_share_memory_is_refused(graph: dtorch.Graph) -> None:
    with pytest.raises(NotImplementedError, match="share_memory: dtorch values live on the"):
        nn.Linear(2, 2).share_memory()


class _Fails(Exception):
    pass


def _always_call_runs(lib: ModuleType, raising: str) -> tuple[Any, list, list]:
    """Which hooks ran (with the output each got), which warnings, and which error, for a
    failing forward, pre-hook or ordinary hook with always_call hooks around it."""

    class Model(lib.Module):
        def forward(self, x: Any) -> Any:
            if raising == "forward":
                raise _Fails("forward")
            return x

    model, calls = Model(), []
    if raising == "pre-hook":  # the always_call hooks get the arguments the first one left
        model.register_forward_pre_hook(lambda m, args: ("replaced",))
        model.register_forward_pre_hook(lambda m, args: calls.append("pre") or 1 / 0)

    def ordinary(m: Any, args: Any, out: Any) -> None:
        calls.append("ordinary")
        raise KeyError("ordinary hook")

    def always_bad(m: Any, args: Any, out: Any) -> None:
        calls.append("always_bad")
        raise ValueError("always hook")

    model.register_forward_hook(ordinary)
    model.register_forward_hook(always_bad, always_call=True)
    model.register_forward_hook(lambda m, a, o: calls.append(("always", a, o)), always_call=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(Exception) as error:
            model(1)
    return (error.type, str(error.value)), calls, [str(w.message) for w in caught]


@pytest.mark.parametrize("raising", ["forward", "hook", "pre-hook"])
def test_always_call_hooks_match_torch(raising: str, graph: dtorch.Graph) -> None:
    """As torch's: always_call hooks run (given None for an output) after forward, a hook or
    a pre-hook raised (a pre-hook's error skipped them)."""
    assert _always_call_runs(nn, raising) == _always_call_runs(torch.nn, raising)


def test_embedding_repr_matches_torch(graph: dtorch.Graph) -> None:
    for kwargs in (
        {},
        {"norm_type": 3.0, "padding_idx": 1},
        {"scale_grad_by_freq": True, "sparse": True},
    ):
        assert repr(nn.Embedding(5, 3, **kwargs)) == repr(torch.nn.Embedding(5, 3, **kwargs))


def test_modules_without_removing_duplicates_matches_torch(graph: dtorch.Graph) -> None:
    """``modules(remove_duplicate=False)`` lists a shared module once per place, as torch's
    (the keyword was refused)."""
    ours = dtorch.nn.Sequential(dtorch.nn.Linear(2, 2), dtorch.nn.ReLU())
    theirs = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    ours.add_module("again", ours[0])
    theirs.add_module("again", theirs[0])
    for flag in (True, False):
        got = [type(m).__name__ for m in ours.modules(remove_duplicate=flag)]
        assert got == [type(m).__name__ for m in theirs.modules(remove_duplicate=flag)]


def test_cuda_takes_torchs_device_forms(graph: dtorch.Graph) -> None:
    """``Module.cuda`` takes an index, ``"cuda:0"`` or a CUDA ``torch.device`` (a str or a
    device built ``"cuda:cuda:0"``); another device type is refused."""
    layer = dtorch.nn.Linear(2, 2)
    with pytest.raises(MeshError, match="must be a cuda device"):
        layer.cuda("cpu")
    if not torch.cuda.is_available():  # each form names the GPU it cannot reach
        for device in (0, "cuda:0", torch.device("cuda", 0)):
            with pytest.raises(MeshError, match=r"DeviceMesh\('cuda', \[0\]\)"):
                layer.cuda(device)


def test_torch_members_assigned_to_a_module_are_refused(graph: dtorch.Graph) -> None:
    """torch registers a torch.nn Parameter, Buffer or Module assigned as an attribute; a
    dtorch module would have kept it as a plain attribute (missing from parameters() and
    state_dict()), so it is refused, naming the dtorch class to use. A plain torch tensor
    stays a plain attribute, as in torch."""
    model = nn.Module()
    for value, wanted in (
        (torch.nn.Parameter(torch.ones(2)), "dtorch.nn.Parameter"),
        (torch.nn.Buffer(torch.ones(2)), "dtorch.nn.Buffer"),
        (torch.nn.Linear(2, 2), "dtorch.nn layers"),
    ):
        with pytest.raises(TypeError, match=wanted):
            model.w = value
    model.t = torch.ones(2)
    assert type(model.t) is torch.Tensor and not list(model.state_dict())


def _grad_outcomes(lib: ModuleType, make: Callable[..., Any]) -> list[Any]:
    """The error type (or None) of each assignment torch checks on a Parameter."""
    param = lib.Parameter(make(2))
    ints = lib.Parameter(make(2, dtype=torch.int64), requires_grad=False)
    assignments: list[Callable[[], Any]] = [
        lambda: setattr(param, "grad", 5),
        lambda: setattr(param, "grad", make(3)),
        lambda: setattr(param, "grad", make(2, dtype=torch.float64)),
        lambda: setattr(param, "grad", make(2)),
        lambda: setattr(param, "requires_grad", "yes"),
        lambda: setattr(ints, "requires_grad", True),
        lambda: setattr(ints, "requires_grad", False),
        lambda: lib.Module.requires_grad_(_holding(lib, ints)),
    ]
    outcomes: list[Any] = []
    for assign in assignments:
        try:
            assign()
            outcomes.append(None)
        except Exception as error:  # the type is what is compared with torch
            outcomes.append(type(error))
    return [*outcomes, param.requires_grad, ints.requires_grad]


def _holding(lib: ModuleType, param: Any) -> Any:
    module = lib.Module()
    module.p = param
    return module


def test_parameter_grad_and_requires_grad_are_checked_as_torch(graph: dtorch.Graph) -> None:
    """A grad of another type, size or dtype, a requires_grad that is no bool or on an
    integer parameter (also through Module.requires_grad_) are refused as torch refuses them."""
    assert _grad_outcomes(nn, dtorch.ones) == _grad_outcomes(torch.nn, torch.ones)


def test_assigning_an_integer_to_a_parameter_changes_nothing(graph: dtorch.Graph) -> None:
    """load_state_dict(assign=True) of an integer value for a parameter that requires
    gradients is refused with the other checks, before any entry loads (the weight had
    already been replaced when the bias raised)."""
    model = nn.Linear(4, 5)
    before = model.weight
    with pytest.raises(RuntimeError, match=r"While assigning bias: a torch\.int64 value"):
        model.load_state_dict({"weight": torch.ones(5, 4), "bias": torch.arange(5)}, assign=True)
    assert model.weight is before


def test_a_grad_on_another_mesh_or_graph_is_refused(make_graph) -> None:  # type: ignore[no-untyped-def]
    """As torch refuses a grad on another device: it would fail only when an optimiser used
    it. A requires_grad that is no bool is named with its type and value."""
    param = nn.Parameter(dtorch.ones(2))
    other_mesh = dtorch.ones(2, device_mesh=dtorch.init_device_mesh("cpu", 2))
    other_graph = dtorch.ones(2, graph=make_graph())
    for grad, where in ((other_mesh, "mesh"), (other_graph, "graph")):
        with pytest.raises(RuntimeError, match=f"assigned grad is on another {where}"):
            param.grad = grad
    assert param.grad is None
    with pytest.raises(RuntimeError, match=r"must be a bool, got numpy\.bool"):
        param.requires_grad = np.True_


def test_to_empty_keeps_shapes_dtypes_and_placements(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2, mesh_dim_names=("tp",))
    model = nn.Sequential(
        nn.ColumnParallelLinear(4, 6, device_mesh=mesh), nn.BatchNorm1d(3, device_mesh=mesh)
    )
    before = {
        k: (v.shape, v.dtype, v.device_mesh, v.placements) for k, v in model.state_dict().items()
    }
    weight = model[0].weight
    assert model.to_empty(device=mesh) is model and model[0].weight is weight  # rebound in place
    after = {
        k: (v.shape, v.dtype, v.device_mesh, v.placements) for k, v in model.state_dict().items()
    }
    assert after == before
    torch_model = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.BatchNorm1d(3))
    model.load_state_dict(torch_model.state_dict())  # the usual next step
    x = torch.randn(2, 4)
    torch.testing.assert_close(
        model[0](dtorch.tensor(x, device_mesh=mesh)).to_torch(), torch_model[0](x)
    )


def test_to_empty_onto_another_mesh_and_without_recursion(graph: dtorch.Graph) -> None:
    mesh, other = dtorch.DeviceMesh("cpu", [0, 1]), dtorch.DeviceMesh("cpu", [2, 3])
    outer = nn.Linear(2, 3, device_mesh=mesh)
    outer.inner = nn.Linear(3, 1, device_mesh=mesh)
    outer.to_empty(device=other, recurse=False)
    assert outer.weight.device_mesh == other and outer.weight.shape == (3, 2)
    assert outer.inner.weight.device_mesh == mesh

"""dtorch.nn.Module's conventions against torch.nn.Module's behaviour: the same model
written with both gives the same names in the same order (named_parameters, named_buffers,
named_modules, named_children, state_dict keys), the same repr, the same hook order and
effects, the same registration errors; Parameter and Buffer are dtorch tensors usable in
every operator; to/eval/train/apply; the placement hooks around forward."""

from __future__ import annotations

import collections
from collections.abc import Callable
from types import MappingProxyType, ModuleType
from typing import Any

import pytest
import torch

import dtorch
from dtorch import Replicate, Shard, nn
from dtorch.nn.parameter import Buffer, Parameter

pytestmark = pytest.mark.timeout(120)


def _model(lib: ModuleType, make: Callable[..., Any]) -> Any:
    """One architecture for torch.nn (``make`` = torch.ones) and dtorch.nn (dtorch.ones):
    own parameters and buffers (one non-persistent, one None), a shared submodule, a shared
    parameter, containers of every kind."""

    class Block(lib.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = lib.Linear(4, 3)
            self.register_buffer("scale", make(3))
            self.register_buffer("cache", make(1), persistent=False)
            self.register_buffer("empty", None)
            self.gain = lib.Parameter(make(3))
            self.act = lib.GELU()
            self.again = self.proj  # the same module under two names

        def forward(self, x: Any) -> Any:
            return self.act(self.proj(x)) * self.scale * self.gain

    model = lib.Sequential(
        Block(),
        lib.ModuleList([lib.Linear(3, 3), lib.ReLU(), lib.Linear(3, 3)]),
        lib.ModuleDict({"head": lib.Linear(3, 2, bias=False), "flat": lib.Flatten(0)}),
    )
    model[1][2].weight = model[1][0].weight  # a shared parameter
    return model


def _names(pairs: Any) -> list[str]:
    return [name for name, _ in pairs]


def test_names_and_order_match_torch(graph: dtorch.Graph) -> None:
    ours, ref = _model(nn, dtorch.ones), _model(torch.nn, torch.ones)
    for method in ("named_parameters", "named_buffers", "named_modules", "named_children"):
        assert _names(getattr(ours, method)()) == _names(getattr(ref, method)()), method
    for kwargs in ({"remove_duplicate": False}, {"prefix": "m"}, {"recurse": False}):
        assert _names(ours.named_parameters(**kwargs)) == _names(ref.named_parameters(**kwargs))
    assert _names(ours.named_modules(remove_duplicate=False)) == _names(
        ref.named_modules(remove_duplicate=False)
    )
    assert list(ours.state_dict()) == list(ref.state_dict())
    assert list(ours.state_dict(prefix="p.")) == list(ref.state_dict(prefix="p."))
    assert len(list(ours.parameters())) == len(list(ref.parameters()))
    assert len(list(ours.buffers())) == len(list(ref.buffers()))
    assert [type(m).__name__ for m in ours.modules()] == [type(m).__name__ for m in ref.modules()]
    assert [type(m).__name__ for m in ours.children()] == [type(m).__name__ for m in ref.children()]
    assert repr(ours) == repr(ref)


def test_state_dict_values_share_the_parameters(graph: dtorch.Graph) -> None:
    model = _model(nn, dtorch.ones)
    sd = model.state_dict()
    assert type(sd["0.gain"]) is dtorch.Tensor and sd["0.gain"].id == model[0].gain.id
    assert model.state_dict(keep_vars=True)["0.gain"] is model[0].gain
    model[0].gain.copy_(dtorch.full((3,), 5.0))
    assert sd["0.gain"].tolist() == [5.0, 5.0, 5.0]


def _hooked(module: Any, log: list[str]) -> Any:
    """The same hooks on a torch or dtorch module: order (prepend), argument and output
    replacement, kwargs, removal."""
    module.register_forward_pre_hook(lambda m, args: log.append("pre1"))
    module.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    module.register_forward_pre_hook(lambda m, args: log.append("pre0"), prepend=True)

    def with_kwargs(m: Any, args: Any, kwargs: Any) -> Any:
        log.append(f"prekw:{sorted(kwargs)}")
        return args, kwargs

    module.register_forward_pre_hook(with_kwargs, with_kwargs=True)
    module.register_forward_hook(lambda m, args, out: log.append("post1"))
    module.register_forward_hook(lambda m, args, out: out + 1)
    module.register_forward_hook(lambda m, args, out: log.append("post0"), prepend=True)
    removed = module.register_forward_hook(lambda m, args, out: log.append("removed"))
    removed.remove()
    module.register_forward_hook(lambda m, a, k, out: log.append("postkw"), with_kwargs=True)
    return module


def test_hooks_match_torch(graph: dtorch.Graph) -> None:
    ours_log: list[str] = []
    ref_log: list[str] = []
    ref = _hooked(torch.nn.Linear(3, 2), ref_log)
    ours = _hooked(nn.Linear(3, 2), ours_log)
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(4, 3)
    assert torch.allclose(ours(dtorch.from_torch(x)).to_torch(), ref(x), atol=1e-6)
    assert ours_log == ref_log


def test_always_call_hook_and_bad_pre_hook(graph: dtorch.Graph) -> None:
    for lib in (torch.nn, nn):
        seen: list[Any] = []
        m = lib.Identity()
        m.forward = lambda x: 1 / 0  # type: ignore[method-assign]
        m.register_forward_hook(
            lambda mod, args, out, seen=seen: seen.append(out), always_call=True
        )
        with pytest.raises(ZeroDivisionError):
            m(1)
        assert seen == [None]
        bad = lib.Identity()
        bad.register_forward_pre_hook(lambda mod, a, k: 3, with_kwargs=True)
        with pytest.raises(RuntimeError, match=r"must return None or a tuple of \(new_args"):
            bad(1)


_REGISTRATION: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("buffer name with a dot", lambda m, lib: m.register_buffer("a.b", None)),
    ("empty buffer name", lambda m, lib: m.register_buffer("", None)),
    ("buffer name not a str", lambda m, lib: m.register_buffer(1, None)),
    ("existing attribute", lambda m, lib: m.register_buffer("training", None)),
    ("parameter not a Parameter", lambda m, lib: m.register_parameter("p", [1.0])),
    ("module name with a dot", lambda m, lib: m.add_module("a.b", lib.ReLU())),
    ("not a module", lambda m, lib: m.add_module("x", 3)),
    ("assign over a parameter", lambda m, lib: setattr(m, "weight", 3)),
    ("assign over a module", lambda m, lib: setattr(m, "child", 3)),
]


@pytest.mark.parametrize(("case", "act"), _REGISTRATION, ids=[c for c, _ in _REGISTRATION])
def test_registration_errors_match_torch(case: str, act: Callable, graph: dtorch.Graph) -> None:
    raised = []
    for lib in (torch.nn, nn):
        m = lib.Linear(2, 2)
        m.child = lib.ReLU()
        with pytest.raises((TypeError, KeyError, AttributeError)) as info:
            act(m, lib)
        raised.append(info.type)
    assert raised[0] is raised[1], case


def test_assign_before_init_and_attribute_moves(graph: dtorch.Graph) -> None:
    class Early(nn.Module):
        def __init__(self) -> None:
            self.w = Parameter(dtorch.ones(1))

    with pytest.raises(AttributeError, match=r"before Module.__init__\(\) call"):
        Early()
    m = nn.Module()
    m.x = Parameter(dtorch.ones(1))
    with pytest.raises(TypeError, match="cannot assign 'Buffer' as parameter 'x'"):
        m.x = Buffer(dtorch.zeros(1))  # as torch: a parameter is replaced by one or None
    del m.x
    m.x = Buffer(dtorch.zeros(1), persistent=False)
    assert _names(m.named_parameters()) == [] and _names(m.named_buffers()) == ["x"]
    assert list(m.state_dict()) == []
    m.x = dtorch.ones(2)  # assigning a tensor to a buffer name keeps it a (non-persistent) buffer
    assert m.x.shape == (2,) and list(m.state_dict()) == []
    del m.x
    assert not hasattr(m, "x") and _names(m.named_buffers()) == []
    with pytest.raises(AttributeError, match="'Module' object has no attribute 'nope'"):
        _ = m.nope
    with pytest.raises(NotImplementedError, match='missing the required "forward"'):
        m(1)


def test_parameter_is_a_tensor_in_every_op(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    t = dtorch.arange(6.0, device_mesh=mesh, placements=[Shard(0)])
    p = Parameter(t)
    assert isinstance(p, dtorch.Tensor) and p.id == t.id and p.placements == [Shard(0)]
    assert (p + p).tolist() == (t * 2).tolist()
    assert dtorch.sum(p).item() == 15.0 and p.reshape(2, 3).shape == (2, 3)
    assert type(p * 1) is dtorch.Tensor and p.requires_grad
    full = torch.arange(6.0)
    assert torch.equal(dtorch.cat([p, t]).to_torch(), torch.cat([full, full]))
    assert p[1:4].tolist() == [1.0, 2.0, 3.0] and (p @ p).item() == float(full @ full)
    assert p.redistribute(mesh, [Replicate()]).placements == [Replicate()]
    assert type(p.detach()) is dtorch.Tensor and type(p.data) is dtorch.Tensor
    p[0] = 10.0  # in place on the shared value
    assert t.tolist()[0] == 10.0 and p.tolist()[0] == 10.0
    assert {p: 1}[p] == 1 and hash(p) == object.__hash__(p) != hash(t)
    q = Parameter(torch.arange(4.0), requires_grad=False, device_mesh=mesh, placements=[Shard(0)])
    assert q.placements == [Shard(0)] and q.tolist() == [0, 1, 2, 3] and not q.requires_grad
    b = Buffer(torch.zeros(2), persistent=False)
    assert isinstance(b, dtorch.Tensor) and not b.persistent and repr(b).startswith("Buffer")
    with pytest.raises(TypeError, match=r"Parameter: data must be a dtorch\.Tensor or a torch"):
        Parameter([1.0])


def test_train_eval_apply_to(graph: dtorch.Graph) -> None:
    model = _model(nn, dtorch.ones)
    assert model.eval() is model and not any(m.training for m in model.modules())
    assert all(m.training for m in model.train().modules())
    with pytest.raises(ValueError, match="training mode is expected to be boolean"):
        model.train("no")  # type: ignore[arg-type]
    visited: list[str] = []
    model.apply(lambda m: visited.append(type(m).__name__))
    ref: list[str] = []
    _model(torch.nn, torch.ones).apply(lambda m: ref.append(type(m).__name__))
    assert visited == ref
    weight = model[0].proj.weight
    assert model.to(torch.float64) is model and model[0].proj.weight is weight
    assert {p.dtype for p in model.parameters()} == {torch.float64}
    assert model.float()[0].scale.dtype == torch.float32
    mesh = dtorch.init_device_mesh("cpu", 1)
    assert model.to(mesh).first_param_device_mesh() == mesh and model[0].proj.weight is weight
    with pytest.raises(TypeError, match="only accepts floating point"):
        model.to(torch.int64)


def test_first_param_device_mesh(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    assert nn.ReLU().first_param_device_mesh() is None
    assert (
        nn.Sequential(nn.ReLU(), nn.Linear(2, 2, device_mesh=mesh)).first_param_device_mesh()
        == mesh
    )
    m = nn.Module()
    m.register_buffer("b", dtorch.zeros(1, device_mesh=mesh))
    assert m.first_param_device_mesh() == mesh


class _Placed(nn.Module):
    """Declares input and output placements by mesh dim name."""

    input_placements = MappingProxyType({"tp": Replicate()})
    output_placements = MappingProxyType({"tp": Shard(0)})

    def forward(self, x: Any, *, y: Any = None) -> Any:
        self.seen = (x.placements, None if y is None else y.placements)
        return x if y is None else (x, y)


def test_redistribute_hooks_around_forward(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    full = torch.arange(16.0).reshape(4, 4)
    x = dtorch.from_torch(full, device_mesh=mesh, placements=[Shard(0), Shard(1)])
    m = _Placed()
    log: list[Any] = []
    m.register_forward_pre_hook(lambda mod, args: log.append(args[0].placements))
    m.register_forward_hook(lambda mod, args, out: log.append(args[0].placements))
    out = m(x)
    assert log[0] == [Shard(0), Shard(1)]  # the pre-hook sees the caller's tensor
    assert m.seen[0] == [Shard(0), Replicate()] == log[1]  # forward (and hooks) the moved one
    assert out.placements == [Shard(0), Shard(0)] and torch.equal(out.to_torch(), full)
    pair = m(x, y=x)
    assert m.seen == ([Shard(0), Replicate()],) * 2
    assert [t.placements for t in pair] == [[Shard(0), Shard(0)]] * 2
    plain = nn.Identity()
    assert plain(x) is x  # no declared placements: nothing moves
    other = dtorch.zeros(2, device_mesh=dtorch.init_device_mesh("cpu", 2))  # no "tp" dim
    assert m(other).placements == [Replicate()]


_Pair = collections.namedtuple("_Pair", "first second")


def test_redistribute_output_keeps_a_namedtuple(graph: dtorch.Graph) -> None:
    """Each tensor of a namedtuple output is moved and the namedtuple kept (its constructor
    takes the fields one by one: it raised a TypeError)."""

    class Pairs(nn.Module):
        output_placements = MappingProxyType({"tp": Replicate()})

        def forward(self, x: Any) -> Any:
            return _Pair(x, x * 2)

    mesh = dtorch.init_device_mesh("cpu", 2, mesh_dim_names=("tp",))
    full = torch.arange(4.0)
    out = Pairs()(dtorch.from_torch(full, device_mesh=mesh, placements=[Shard(0)]))
    assert type(out) is _Pair and [t.placements for t in out] == [[Replicate()]] * 2
    assert torch.equal(out.first.to_torch(), full) and torch.equal(out.second.to_torch(), full * 2)


_LOOKUPS = [
    ("get_submodule", ""),
    ("get_submodule", "0.proj"),
    ("get_submodule", "2.head"),
    ("get_parameter", "0.gain"),
    ("get_parameter", "1.2.weight"),
    ("get_parameter", "2.head.weight"),
    ("get_buffer", "0.scale"),
    ("get_buffer", "0.cache"),
    # torch's errors: a missing step, a step of the wrong kind, a None buffer
    ("get_submodule", "0.nope"),
    ("get_submodule", "0.gain"),
    ("get_submodule", "0.proj.weight.x"),
    ("get_parameter", "0.scale"),
    ("get_parameter", "0.nope"),
    ("get_parameter", "9.weight"),
    ("get_buffer", "0.gain"),
    ("get_buffer", "0.training"),
    ("get_buffer", "nope.scale"),
]


@pytest.mark.parametrize(("method", "target"), _LOOKUPS)
def test_lookups_by_path_match_torch(method: str, target: str, graph: dtorch.Graph) -> None:
    """get_submodule/get_parameter/get_buffer: the same member (by name and shape), or the
    same error type and message."""
    found = []
    for model in (_model(torch.nn, torch.ones), _model(nn, dtorch.ones)):
        try:
            value = getattr(model, method)(target)
        except AttributeError as error:
            found.append(("AttributeError", str(error)))
            continue
        if isinstance(value, (torch.nn.Module, nn.Module)):
            found.append((type(value).__name__, repr(value)))
        else:
            found.append((type(value).__name__, tuple(value.shape)))
    assert found[0] == found[1], (method, target)


def test_zero_grad_matches_torch(graph: dtorch.Graph) -> None:
    """No autograd: every grad starts None (torch's); a grad a program set is cleared, or
    zeroed in place with ``set_to_none=False``, as torch does."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    ref = torch.nn.Linear(3, 2)
    ours = nn.Linear(3, 2, device_mesh=mesh)
    assert [p.grad for p in ours.parameters()] == [p.grad for p in ref.parameters()] == [None] * 2
    ref.zero_grad(), ours.zero_grad()  # nothing to clear
    for set_to_none in (True, False):
        ref.weight.grad = torch.ones(2, 3)
        grad = dtorch.from_torch(torch.ones(2, 3), device_mesh=mesh, placements=[Shard(0)])
        ours.weight.grad = grad
        ref.zero_grad(set_to_none=set_to_none)
        ours.zero_grad(set_to_none=set_to_none)
        if set_to_none:
            assert ours.weight.grad is None and ref.weight.grad is None
        else:
            assert ours.weight.grad is grad and grad.placements == [Shard(0)]
            assert torch.equal(grad.to_torch(), ref.weight.grad)
        assert ours.bias.grad is None and ref.bias.grad is None

"""Sequential, ModuleList and ModuleDict against torch.nn's: indexing (negative, slices),
len, iteration, append/extend/insert/pop/del (renumbering), ``+ += * *=`` (the modules shared,
as torch shares them), registration, repr and errors
compared operation by operation on the same containers built in both libraries (structure
only: on the default graph); Sequential's forward equal to torch's on 1-D, 2-D and 3-D meshes,
thread and process mode."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
import torch

import dtorch
from dtorch import Shard, nn

pytestmark = pytest.mark.timeout(120)


def _layers(lib: ModuleType) -> list[Any]:
    return [lib.Linear(2, 3), lib.ReLU(), lib.Linear(3, 3, bias=False), lib.Tanh(), lib.Identity()]


def _view(value: Any) -> Any:
    """What both libraries must agree on: reprs of modules, structure of containers."""
    if isinstance(value, (torch.nn.Module, nn.Module)):
        return (repr(value), [n for n, _ in value.named_parameters()])
    if isinstance(value, (list, tuple)):
        return [_view(v) for v in value]
    return value


_SEQUENTIAL: list[tuple[str, Callable[[Any, ModuleType], Any]]] = [
    ("index", lambda s, lib: [s[0], s[-1], s[2]]),
    ("slice", lambda s, lib: s[1:4:2]),
    ("len iter", lambda s, lib: (len(s), list(s))),
    ("append", lambda s, lib: s.append(lib.Sigmoid())),
    ("extend", lambda s, lib: s.extend([lib.ReLU(), lib.Tanh()])),
    ("insert", lambda s, lib: s.insert(1, lib.Sigmoid())),
    ("insert negative", lambda s, lib: s.insert(-2, lib.Sigmoid())),
    ("pop", lambda s, lib: (s.pop(1), s)),
    ("del renumbers", lambda s, lib: (s.__delitem__(0), s)),
    ("del slice", lambda s, lib: (s.__delitem__(slice(1, 3)), s)),
    ("setitem", lambda s, lib: (s.__setitem__(-1, lib.ReLU()), s)),
    ("add", lambda s, lib: s + s[1:2]),
    ("ordered dict", lambda s, lib: lib.Sequential(OrderedDict(a=lib.ReLU(), b=lib.Tanh()))),
    ("iadd in place", lambda s, lib: (s.__iadd__(s[1:3]) is s, s)),
    ("mul", lambda s, lib: (s[:2] * 3, s)),
    ("rmul", lambda s, lib: 2 * s[1:]),
    ("imul in place", lambda s, lib: (s.__imul__(2) is s, s)),
    ("mul by True", lambda s, lib: s * True),
    ("mul shares", lambda s, lib: [m is s[0] for m in s * 2]),
    ("imul shares", lambda s, lib: [m is s[0] for m in s.__imul__(2)]),
]


@pytest.mark.parametrize(("case", "act"), _SEQUENTIAL, ids=[c for c, _ in _SEQUENTIAL])
def test_sequential_matches_torch(case: str, act: Callable) -> None:
    ref = act(torch.nn.Sequential(*_layers(torch.nn)), torch.nn)
    ours = act(nn.Sequential(*_layers(nn)), nn)
    assert _view(ours) == _view(ref), case


_LIST: list[tuple[str, Callable[[Any, ModuleType], Any]]] = [
    ("index slice", lambda m, lib: [m[-2], m[1:3]]),
    ("append repeats", lambda m, lib: m.append(lib.Linear(3, 3, bias=False))),
    ("extend iadd", lambda m, lib: m.__iadd__([lib.ReLU(), lib.ReLU()])),
    ("insert", lambda m, lib: (m.insert(0, lib.Tanh()), m)),
    ("pop del", lambda m, lib: (m.pop(0), m.__delitem__(-1), m)),
    ("add", lambda m, lib: m + lib.ModuleList([lib.ReLU()])),
    ("empty", lambda m, lib: lib.ModuleList()),
]


@pytest.mark.parametrize(("case", "act"), _LIST, ids=[c for c, _ in _LIST])
def test_module_list_matches_torch(case: str, act: Callable) -> None:
    ref = act(torch.nn.ModuleList(_layers(torch.nn)), torch.nn)
    ours = act(nn.ModuleList(_layers(nn)), nn)
    assert _view(ours) == _view(ref), case


def test_module_dict_matches_torch() -> None:
    views = []
    for lib in (torch.nn, nn):
        d = lib.ModuleDict({"a": lib.Linear(2, 2), "b": lib.ReLU()})
        d["c"] = lib.Tanh()
        d.update([("d", lib.Sigmoid())])
        popped = d.pop("b")
        views.append(
            (_view(d), list(d), list(d.keys()), "a" in d, len(d), _view(popped),
             [k for k, _ in d.items()], _view(list(d.values())))
        )  # fmt: skip
        d.clear()
        views.append(len(d))
    assert views[:2] == views[2:]


def test_errors_match_torch() -> None:
    for act in (
        lambda lib: lib.Sequential(lib.ReLU())[1],
        lambda lib: lib.ModuleList([lib.ReLU()])[-2],
        lambda lib: lib.Sequential(lib.ReLU()) + lib.ReLU(),
        lambda lib: lib.ModuleList().extend(lib.ReLU()),
        lambda lib: lib.ModuleDict({"a": 1}),
        lambda lib: lib.Sequential(3),
        lambda lib: lib.Sequential(lib.ReLU()) * 0,
        lambda lib: lib.Sequential(lib.ReLU()) * 1.5,
        lambda lib: lib.Sequential(lib.ReLU()).__imul__(-1),
        lambda lib: lib.Sequential(lib.ReLU()).__iadd__(lib.ReLU()),
    ):
        errors = []
        for lib in (torch.nn, nn):
            with pytest.raises(Exception) as info:
                act(lib)
            errors.append((info.type, str(info.value).replace("torch.nn", "dtorch.nn")))
        assert errors[0][0] is errors[1][0], errors


@pytest.mark.parametrize("mesh_shape", [(2,), (2, 2), (2, 1, 2)])
def test_sequential_forward_matches_torch(mesh_shape: tuple, graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    ref = torch.nn.Sequential(*_layers(torch.nn))
    ours = nn.Sequential(*_on_mesh(mesh))
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(6, 2)
    placements = [Shard(0)] + [dtorch.Replicate()] * (len(mesh_shape) - 1)
    y = ours(dtorch.from_torch(x, device_mesh=mesh, placements=placements))
    assert torch.allclose(y.to_torch(), ref(x), atol=1e-6) and y.placements == placements


def _on_mesh(mesh: dtorch.DeviceMesh) -> list[nn.Module]:
    return [
        nn.Linear(2, 3, device_mesh=mesh),
        nn.ReLU(),
        nn.Linear(3, 3, bias=False, device_mesh=mesh),
        nn.Tanh(),
        nn.Identity(),
    ]

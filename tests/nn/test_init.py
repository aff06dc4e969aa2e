"""``dtorch.nn.init`` against ``torch.nn.init``: after the same seed (or from the same
``torch.Generator``) every initialiser gives the tensor torch's gives a full torch tensor of
the same shape and dtype, on 1-D, 2-D and 3-D meshes, Shard, Replicate and Partial, even and
uneven shards, float32 and float64, Parameters and their ``.data``; the generator advances as
torch's; torch's fans, gains, warnings and errors; thread and process mode."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.init as TI

import dtorch
from dtorch import Partial, Placement, Replicate, Shard
from dtorch.nn import init

pytestmark = pytest.mark.timeout(120)

R, P, S0, S1, S2 = Replicate(), Partial(), Shard(0), Shard(1), Shard(2)
LAYOUTS: list[tuple[tuple[int, ...], list[Placement]]] = [
    ((4,), [S0]),
    ((3,), [S1]),
    ((2,), [R]),
    ((2, 3), [S0, S1]),
    ((2, 3), [P, S1]),
    ((2, 2, 2), [S1, R, S0]),
]
SHAPES = [(8, 6, 3), (7, 5, 3)]  # a conv1d weight (fans with a receptive field): even, uneven

#: (name, keywords) of each random initialiser, called as init.<name>(t, **keywords).
RANDOM: list[tuple[str, dict[str, Any]]] = [
    ("uniform_", {"a": -0.5, "b": 2.0}),
    ("normal_", {"mean": 1.0, "std": 0.02}),
    ("trunc_normal_", {}),  # p > 0.3: torch's normal rejection branch
    ("trunc_normal_", {"mean": 0.5, "std": 1.0, "a": 1.5, "b": 3.0}),  # its uniform branch
    ("xavier_uniform_", {"gain": 2.0}),
    ("xavier_normal_", {}),
    ("kaiming_uniform_", {"a": 5**0.5}),
    ("kaiming_normal_", {"mode": "fan_out", "nonlinearity": "relu"}),
    ("orthogonal_", {"gain": 2.0}),  # torch's own on the client: any placements
]


def _on(mesh_shape: tuple[int, ...], placements: list[Placement], shape: tuple[int, ...],
        dtype: torch.dtype = torch.float32) -> dtorch.Tensor:  # fmt: skip
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    return dtorch.zeros(shape, dtype=dtype, device_mesh=mesh, placements=placements)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize(("mesh_shape", "placements"), LAYOUTS, ids=str)
def test_random_initialisers_match_torch(
    mesh_shape: tuple[int, ...],
    placements: list[Placement],
    shape: tuple[int, ...],
    graph: dtorch.Graph,
) -> None:
    for dtype in (torch.float32, torch.float64):
        targets = [_on(mesh_shape, placements, shape, dtype) for _ in RANDOM]
        torch.manual_seed(21)
        for t, (name, kw) in zip(targets, RANDOM, strict=True):
            assert getattr(init, name)(t, **kw) is t
        after = torch.rand(4)
        torch.manual_seed(21)
        wants = [getattr(TI, name)(torch.zeros(shape, dtype=dtype), **kw) for name, kw in RANDOM]
        assert torch.equal(after, torch.rand(4)), "the default generator advances as torch's"
        for t, want, (name, kw) in zip(targets, wants, RANDOM, strict=True):
            assert t.placements == placements
            assert torch.equal(t.to_torch(), want), f"{name}{kw} {dtype} {placements}"


@pytest.mark.parametrize("view", [lambda t: t, lambda t: t.t()], ids=["whole", "transpose"])
@pytest.mark.parametrize(("mesh_shape", "placements"), [((2,), [S0]), ((2, 2), [P, S1])])
def test_sparse_matches_torch(mesh_shape, placements, view, graph: dtorch.Graph) -> None:
    """torch draws into the tensor in its memory order, then zeroes rows per column (those
    drawn from the default generator, whatever ``generator`` is)."""
    t = _on(mesh_shape, placements, (6, 5))
    torch.manual_seed(3)
    assert init.sparse_(view(t), 0.4, std=0.5) is not None
    after = torch.rand(4)
    torch.manual_seed(3)
    want = TI.sparse_(view(torch.zeros(6, 5)), 0.4, std=0.5)
    assert torch.equal(after, torch.rand(4))
    assert torch.equal(view(t).to_torch(), want) and t.placements == placements
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions"):
        init.sparse_(_on((2,), [S0], (4,)), 0.5)


@pytest.mark.parametrize(("name", "kw"), RANDOM, ids=[f"{n}{k}" for n, k in RANDOM])
def test_generator_on_a_parameter_and_its_data(
    name: str, kw: dict[str, Any], graph: dtorch.Graph
) -> None:
    p = dtorch.nn.Parameter(_on((2, 2), [S1, S0], (9, 4)))
    g, ref = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    fn, torch_fn = getattr(init, name), getattr(TI, name)
    assert fn(p, **kw, generator=g) is p
    assert torch.equal(p.to_torch(), torch_fn(torch.empty(9, 4), **kw, generator=ref))
    fn(p.data, **kw, generator=g)
    assert torch.equal(p.to_torch(), torch_fn(torch.empty(9, 4), **kw, generator=ref))
    assert torch.equal(torch.rand(3, generator=g), torch.rand(3, generator=ref))


@pytest.mark.parametrize(("mesh_shape", "placements"), LAYOUTS, ids=str)
def test_deterministic_initialisers(
    mesh_shape: tuple[int, ...], placements: list[Placement], graph: dtorch.Graph
) -> None:
    fills: list[tuple[Callable[..., Any], Callable[..., Any], tuple[int, ...]]] = [
        (lambda t: init.constant_(t, 0.25), lambda t: TI.constant_(t, 0.25), (7, 5)),
        (init.ones_, TI.ones_, (7, 5)),
        (init.zeros_, TI.zeros_, (7, 5)),
        (init.eye_, TI.eye_, (7, 5)),
        (init.eye_, TI.eye_, (4, 9)),
        (init.dirac_, TI.dirac_, (5, 3, 3)),
        (lambda t: init.dirac_(t, 2), lambda t: TI.dirac_(t, 2), (6, 2, 5)),
    ]
    for fn, torch_fn, shape in fills:
        t = _on(mesh_shape, placements, shape, torch.float64)
        t.fill_(9.0)
        assert fn(t) is t and t.placements == placements
        assert torch.equal(t.to_torch(), torch_fn(torch.full(shape, 9.0, dtype=torch.float64)))


def test_gain_and_fans_are_torch_s() -> None:
    for nonlinearity in ("linear", "conv2d", "sigmoid", "tanh", "relu", "leaky_relu", "selu"):
        assert init.calculate_gain(nonlinearity) == TI.calculate_gain(nonlinearity)  # type: ignore[arg-type]
    assert init.calculate_gain("leaky_relu", 0.2) == TI.calculate_gain("leaky_relu", 0.2)
    for shape in [(3, 4), (8, 4, 3, 3), (2, 5, 1, 2, 3)]:
        want = TI._calculate_fan_in_and_fan_out(torch.empty(shape))
        assert init._calculate_fan_in_and_fan_out(dtorch.empty(shape)) == want


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda t: init.calculate_gain("swish"), ValueError, "Unsupported nonlinearity swish"),
        (lambda t: init.calculate_gain("leaky_relu", "x"), ValueError, "negative_slope x"),
        (lambda t: init.xavier_uniform_(t[:, 0]), ValueError, "fewer than 2 dimensions"),
        (lambda t: init.kaiming_normal_(t, mode="in"), ValueError, "Mode in not supported"),
        (lambda t: init.kaiming_uniform_(t, nonlinearity="x"), ValueError, "Unsupported"),
        (lambda t: init.normal_(t, 0.0, -1.0), RuntimeError, "normal expects std >= 0.0"),
        (lambda t: init.uniform_(t, 1.0, 0.0), RuntimeError, r"\[from, to\) range"),
        (lambda t: init.normal_(t.long()), NotImplementedError, "'Long'"),
        (lambda t: init.eye_(t[:, 0]), ValueError, "Only tensors with 2 dimensions"),
        (init.dirac_, ValueError, "Only tensors with 3, 4, or 5 dimensions"),
        (lambda t: init.dirac_(t.reshape(4, 2, 1), 3), ValueError, "divisible by groups"),
        (lambda t: init.trunc_normal_(torch.empty(2)), TypeError, "dtorch"),
    ],
)
def test_bad_input_gets_torch_errors(
    call: Any, error: type[Exception], match: str, graph: dtorch.Graph
) -> None:
    t = _on((2,), [S0], (4, 2))
    torch.manual_seed(1)
    with pytest.raises(error, match=match):
        call(t)
    after = torch.rand(3)
    torch.manual_seed(1)
    assert torch.equal(after, torch.rand(3)), "a refused initialiser draws nothing"
    assert torch.equal(t.to_torch(), torch.zeros(4, 2))


def test_torch_s_warnings(graph: dtorch.Graph) -> None:
    empty = _on((2,), [S0], (0, 3))
    with pytest.warns(UserWarning, match="zero-element tensors is a no-op"):
        assert init.kaiming_uniform_(empty) is empty
    with pytest.warns(UserWarning, match="zero-element tensors is a no-op"):
        init.kaiming_normal_(empty)
    t = _on((2,), [S1], (3, 4))
    g, ref = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    with pytest.warns(UserWarning, match="mean is more than 2 std"):
        init.trunc_normal_(t, mean=5.0, std=0.5, generator=g)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = TI.trunc_normal_(torch.empty(3, 4), mean=5.0, std=0.5, generator=ref)
    assert torch.equal(t.to_torch(), want)


#: torch.nn.init's own functions, as model code calls them on dtorch parameters: those that
#: hand a dtorch tensor to ``__torch_function__`` run dtorch.nn.init's (``normal_``,
#: ``uniform_``, ``constant_``, ``kaiming_uniform_``), the others run torch's Python on dtorch's
#: methods (``trunc_normal_``, ``eye_`` through ``torch.eye(out=)``, ``orthogonal_`` through
#: ``linalg.qr``).
THROUGH_TORCH: list[tuple[str, dict[str, Any], tuple[int, ...]]] = [
    *((name, kw, (7, 5)) for name, kw in RANDOM),
    ("constant_", {"val": 0.5}, (7, 5)),
    ("ones_", {}, (7, 5)),
    ("eye_", {}, (4, 6)),
    ("dirac_", {}, (5, 3, 3)),
    ("orthogonal_", {"gain": 2.0}, (6, 4)),
    ("sparse_", {"sparsity": 0.5}, (6, 4)),
]


@pytest.mark.parametrize(
    ("name", "kw", "shape"), THROUGH_TORCH, ids=[f"{n}{k}" for n, k, _ in THROUGH_TORCH]
)
@pytest.mark.parametrize("placements", [[R], [S0], [S1]], ids=str)
def test_torch_nn_init_on_a_dtorch_parameter_matches_torch(
    name: str,
    kw: dict[str, Any],
    shape: tuple[int, ...],
    placements: list[Placement],
    graph: dtorch.Graph,
) -> None:
    p = dtorch.nn.Parameter(_on((2,), placements, shape))
    torch.manual_seed(5)
    assert getattr(TI, name)(p, **kw) is p
    torch.manual_seed(5)
    want = getattr(TI, name)(torch.zeros(shape), **kw)
    assert p.placements == placements
    torch.testing.assert_close(p.to_torch(), want, rtol=1e-6, atol=1e-6)


def test_torch_eye_into_a_dtorch_tensor_checks_the_shape(graph: dtorch.Graph) -> None:
    t = dtorch.zeros(2, 3)
    assert torch.eye(2, 3, out=t) is t and t.tolist() == [[1, 0, 0], [0, 1, 0]]
    with pytest.raises(TypeError, match=r"accepted is out= a dtorch tensor of shape \[3, 3\]"):
        torch.eye(3, out=t)


@pytest.mark.parametrize(
    "name",
    [
        "uniform", "normal", "constant", "eye", "dirac", "xavier_uniform", "xavier_normal",
        "kaiming_uniform", "kaiming_normal", "orthogonal", "sparse",
    ],
)  # fmt: skip
def test_torchs_deprecated_names_warn_and_fill_alike(name: str, graph: dtorch.Graph) -> None:
    shape = (3, 4, 3) if name == "dirac" else (4, 6)
    args = {"constant": (0.5,), "sparse": (0.5,)}.get(name, ())
    full = torch.empty(shape)
    ours = dtorch.empty(*shape)
    torch.manual_seed(2)
    with pytest.warns(FutureWarning, match=rf"`nn.init.{name}` is now deprecated") as theirs:
        getattr(torch.nn.init, name)(full, *args)
    torch.manual_seed(2)
    with pytest.warns(FutureWarning, match=rf"`nn.init.{name}` is now deprecated") as warned:
        getattr(dtorch.nn.init, name)(ours, *args)
    assert str(warned[0].message) == str(theirs[0].message)
    assert torch.equal(ours.to_torch(), full)

"""``Tensor.normal_`` and ``Tensor.uniform_`` against torch: after the same seed (or from the
same ``torch.Generator``) the gathered tensor equals torch's fill of a full tensor of the same
shape and dtype, on 1-D, 2-D and 3-D meshes, Shard, Replicate and Partial, even and uneven
shards (and shards smaller than the mesh), float32 and float64; the generator advances as
torch's; views and aliases see the fill; bad input gets torch's errors and records nothing;
thread and process mode."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import dtorch
from dtorch import Partial, Placement, Replicate, Shard

pytestmark = pytest.mark.timeout(120)

R, P, S0, S1 = Replicate(), Partial(), Shard(0), Shard(1)
LAYOUTS: list[tuple[tuple[int, ...], list[Placement]]] = [
    ((4,), [S0]),
    ((4,), [R]),
    ((4,), [P]),
    ((3,), [S1]),
    ((2, 3), [S0, S1]),
    ((2, 3), [P, S0]),
    ((2, 3), [S1, S1]),
    ((2, 2, 2), [S0, R, S1]),
]
SHAPES = [(8, 6), (7, 5), (3, 2)]  # even, uneven, fewer rows than devices (and < 16 values)

#: (method, its positional arguments) of each fill, as torch's Tensor methods take them.
FILLS: list[tuple[str, tuple[Any, ...]]] = [
    ("normal_", ()),
    ("normal_", (1.5, 0.25)),
    ("uniform_", ()),
    ("uniform_", (-3, 2.5)),
]


def _on(mesh_shape: tuple[int, ...], placements: list[Placement], shape: tuple[int, ...],
        dtype: torch.dtype) -> dtorch.Tensor:  # fmt: skip
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    return dtorch.zeros(shape, dtype=dtype, device_mesh=mesh, placements=placements)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize(("mesh_shape", "placements"), LAYOUTS, ids=str)
def test_fills_match_torch_with_the_default_generator(
    mesh_shape: tuple[int, ...],
    placements: list[Placement],
    shape: tuple[int, ...],
    graph: dtorch.Graph,
) -> None:
    for dtype in (torch.float32, torch.float64):
        targets = [_on(mesh_shape, placements, shape, dtype) for _ in FILLS]
        torch.manual_seed(11)
        for t, (name, args) in zip(targets, FILLS, strict=True):
            assert getattr(t, name)(*args) is t
        after = torch.rand(4)
        torch.manual_seed(11)
        wants = [getattr(torch.zeros(shape, dtype=dtype), n)(*a) for n, a in FILLS]
        assert torch.equal(after, torch.rand(4)), "the default generator advances as torch's"
        for t, want, fill in zip(targets, wants, FILLS, strict=True):
            assert t.placements == placements and t.dtype == dtype
            assert torch.equal(t.to_torch(), want), f"{fill} {dtype} on {mesh_shape}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_a_generator_draws_and_advances_as_torch(dtype: torch.dtype, graph: dtorch.Graph) -> None:
    t = _on((2, 3), [S1, S0], (9, 7), dtype)
    g, ref = torch.Generator().manual_seed(4), torch.Generator().manual_seed(4)
    first = t.normal_(0.0, 2.0, generator=g).to_torch()
    second = t.uniform_(to=4.0, generator=g).to_torch()
    assert torch.equal(first, torch.zeros(9, 7, dtype=dtype).normal_(0.0, 2.0, generator=ref))
    assert torch.equal(second, torch.zeros(9, 7, dtype=dtype).uniform_(to=4.0, generator=ref))
    assert torch.equal(torch.rand(5, generator=g), torch.rand(5, generator=ref))


def test_uniform_takes_torch_from_keyword(graph: dtorch.Graph) -> None:
    t = _on((3,), [S0], (10,), torch.float32)
    g, ref = torch.Generator().manual_seed(2), torch.Generator().manual_seed(2)
    got = t.uniform_(**{"from": -1.0, "to": 1.0}, generator=g).to_torch()
    assert torch.equal(got, torch.zeros(10).uniform_(**{"from": -1.0, "to": 1.0}, generator=ref))
    got = t.uniform_(from_=0.5, generator=g).to_torch()
    assert torch.equal(got, torch.zeros(10).uniform_(0.5, generator=ref))


def test_views_and_aliases_see_the_fill(graph: dtorch.Graph) -> None:
    t = _on((2,), [S1], (4, 6), torch.float64)
    alias, row = t.detach(), t[2]
    g, ref = torch.Generator().manual_seed(8), torch.Generator().manual_seed(8)
    row.normal_(generator=g)
    want = torch.zeros(4, 6, dtype=torch.float64)
    want[2] = torch.zeros(6, dtype=torch.float64).normal_(generator=ref)
    assert torch.equal(t.to_torch(), want) and torch.equal(alias.to_torch(), want)


def test_parameter_and_its_data(graph: dtorch.Graph) -> None:
    p = dtorch.nn.Parameter(_on((2, 2), [S0, P], (6, 5), torch.float32))
    g, ref = torch.Generator().manual_seed(6), torch.Generator().manual_seed(6)
    p.data.uniform_(-0.1, 0.1, generator=g)
    assert torch.equal(p.to_torch(), torch.zeros(6, 5).uniform_(-0.1, 0.1, generator=ref))
    assert p.normal_(generator=g) is p
    assert torch.equal(p.to_torch(), torch.zeros(6, 5).normal_(generator=ref))
    assert p.placements == [S0, P]


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda t: t.normal_(0.0, -1.0), RuntimeError, "normal expects std >= 0.0"),
        (lambda t: t.uniform_(2.0, 1.0), RuntimeError, r"\[from, to\) range"),
        (lambda t: t.long().normal_(), NotImplementedError, "not implemented for 'Long'"),
        (lambda t: t.int().uniform_(), NotImplementedError, "not implemented for 'Int'"),
        (lambda t: t.bool().uniform_(), NotImplementedError, "not implemented for 'Bool'"),
        (lambda t: t.normal_(generator=3), TypeError, "CPU torch.Generator"),
        (lambda t: t.uniform_(frm=1), TypeError, "unexpected keyword argument 'frm'"),
        (lambda t: t.uniform_(1, **{"from": 1}), TypeError, "multiple values for argument"),
        (lambda t: t.normal_("a"), TypeError, "argument 'mean' .* must be float"),
    ],
)
def test_bad_input_gets_torch_errors_and_draws_nothing(
    call: Any, error: type[Exception], match: str, graph: dtorch.Graph
) -> None:
    t = _on((2,), [S0], (5, 4), torch.float32)
    torch.manual_seed(1)
    with pytest.raises(error, match=match):
        call(t)
    after = torch.rand(3)
    torch.manual_seed(1)
    assert torch.equal(after, torch.rand(3)), "a refused fill leaves the generator as it was"
    assert torch.equal(t.to_torch(), torch.zeros(5, 4))


def test_torch_refuses_the_same(graph: dtorch.Graph) -> None:
    """The messages above are torch's own: torch raises them for the same calls."""
    with pytest.raises(RuntimeError, match=r"normal expects std >= 0\.0"):
        torch.zeros(2).normal_(0.0, -1.0)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        torch.zeros(2, dtype=torch.int64).normal_()


@pytest.mark.parametrize("view", ["columns", "every-other", "transposed", "transposed-rows"])
def test_fills_of_strided_views_draw_as_torch_does(graph: dtorch.Graph, view: str) -> None:
    """A fill of a view torch holds strided draws as torch's fill of it does (its memory
    order; ``normal_`` of a tensor that is not contiguous by another kernel): the values, and
    the generator after, however the base is sharded (they were drawn as if contiguous)."""
    pick = {
        "columns": lambda b: b[:, 1:3],
        "every-other": lambda b: b[:, ::2],
        "transposed": lambda b: b.t(),
        "transposed-rows": lambda b: b.t()[1:4],
    }[view]
    mesh = dtorch.init_device_mesh("cpu", 2)
    fills = (lambda v: v.normal_(0.5, 2.0), lambda v: v.uniform_(-1, 1),
             lambda v: v.exponential_(), lambda v: v.bernoulli_(0.3))  # fmt: skip
    for fill in fills:
        torch.manual_seed(3)
        want = torch.zeros(8, 5)
        fill(pick(want))
        after = torch.rand(2)
        torch.manual_seed(3)
        base = dtorch.from_torch(torch.zeros(8, 5), device_mesh=mesh,
                                 placements=[dtorch.Shard(0)], graph=graph)  # fmt: skip
        fill(pick(base))
        assert torch.equal(torch.rand(2), after)
        assert torch.equal(base.to_torch(), want)

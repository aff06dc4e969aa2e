"""torch's other random functions (``dtorch.api.ops.random_more``) against torch: after the
same seed (or from the same ``torch.Generator``) the gathered result equals torch's on the full
tensor, on 1-D, 2-D and 3-D meshes, Shard, Replicate and Partial, even and uneven shards, in
several dtypes, and the generator advances as torch's; the functions that wait
(``poisson``, ``binomial``, ``multinomial``) return torch's own draw; bad input gets torch's
errors; thread and process mode (the ``graph`` fixture)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import torch

import dtorch
from dtorch import Partial, Placement, Replicate, Shard
from dtorch.errors import (
    DTorchError,
    DtypeError,
    ParamError,
    PlacementError,
    ShapeError,
    UnsupportedDtypeError,
)

pytestmark = pytest.mark.timeout(120)

R, P, S0, S1 = Replicate(), Partial(), Shard(0), Shard(1)
LAYOUTS: list[tuple[tuple[int, ...], list[Placement]]] = [
    ((4,), [S0]),
    ((3,), [S1]),
    ((2,), [P]),
    ((2, 3), [S0, S1]),
    ((2, 3), [R, S0]),
    ((2, 2, 2), [S0, R, S1]),
]
SHAPES = [(8, 6), (7, 5), (3, 2)]  # even, uneven, fewer rows than devices (and < 16 values)

#: (method, positional arguments, the dtypes torch fills with it).
FILLS: list[tuple[str, tuple[Any, ...], tuple[torch.dtype, ...]]] = [
    ("exponential_", (), (torch.float32, torch.float64)),
    ("exponential_", (2.5,), (torch.bfloat16,)),
    ("geometric_", (0.3,), (torch.float32, torch.int32)),
    ("log_normal_", (), (torch.float64,)),
    ("log_normal_", (0.5, 0.25), (torch.float32,)),
    ("cauchy_", (), (torch.float32,)),
    ("cauchy_", (1.0, 3.0), (torch.float64,)),
    ("random_", (), (torch.float32, torch.int64, torch.uint8)),
    ("random_", (50,), (torch.int32,)),
    ("random_", (-5, 7), (torch.int64, torch.float64)),
    ("bernoulli_", (), (torch.float32,)),
    ("bernoulli_", (0.25,), (torch.float64, torch.int64, torch.bool)),
]


def _on(mesh_shape: tuple[int, ...], placements: list[Placement], shape: tuple[int, ...],
        dtype: torch.dtype = torch.float32) -> dtorch.Tensor:  # fmt: skip
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    return dtorch.zeros(shape, dtype=dtype, device_mesh=mesh, placements=placements)


def _same_draws(got: Callable[[], Any], want: Callable[[], Any]) -> tuple[Any, Any]:
    """``got()`` and ``want()`` each after seed 7, and the default generator left alike."""
    torch.manual_seed(7)
    out = got()
    value = out.to_torch() if isinstance(out, dtorch.Tensor) else out
    after = torch.rand(3)
    torch.manual_seed(7)
    expected = want()
    assert torch.equal(after, torch.rand(3)), "the default generator advances as torch's"
    return value, expected


@pytest.mark.parametrize(("mesh_shape", "placements"), LAYOUTS, ids=str)
def test_fills_match_torch(
    mesh_shape: tuple[int, ...], placements: list[Placement], graph: dtorch.Graph
) -> None:
    cases = [(n, a, d, s) for i, (n, a, ds) in enumerate(FILLS) for d in ds
             for s in SHAPES[i % 3:i % 3 + 1]]  # fmt: skip
    for name, args, dtype, shape in cases:
        t = _on(mesh_shape, placements, shape, dtype)
        got, want = _same_draws(lambda: getattr(t, name)(*args),  # noqa: B023
                                lambda: getattr(torch.zeros(shape, dtype=dtype), name)(*args))  # noqa: B023 # fmt: skip
        assert torch.equal(got, want), f"{name}{args} {dtype} {shape} on {mesh_shape}"
        assert t.placements == placements


def test_fills_with_a_generator_keywords_and_views(graph: dtorch.Graph) -> None:
    t = _on((2, 3), [S1, S0], (9, 7), torch.float64)
    g, ref = torch.Generator().manual_seed(4), torch.Generator().manual_seed(4)
    want = torch.zeros(9, 7, dtype=torch.float64)
    t[2:4].exponential_(lambd=3.0, generator=g)
    want[2:4].exponential_(lambd=3.0, generator=ref)
    t.random_(**{"from": 2, "to": 9}, generator=g)
    want.random_(**{"from": 2, "to": 9}, generator=ref)
    assert torch.equal(t.to_torch(), want)
    t.random_(3, generator=g).geometric_(p=0.7, generator=g).cauchy_(sigma=0.5, generator=g)
    want.random_(3, generator=ref).geometric_(p=0.7, generator=ref).cauchy_(
        sigma=0.5, generator=ref
    )
    assert torch.equal(t.to_torch(), want)
    i = _on((2,), [S0], (5,), torch.int64).random_(2**40, generator=g)  # an int beyond float32
    assert torch.equal(
        i.to_torch(), torch.zeros(5, dtype=torch.int64).random_(2**40, generator=ref)
    )
    i.random_(**{"from": 2**62}, generator=g)  # to=None: up to int64's largest
    want_i = torch.zeros(5, dtype=torch.int64).random_(2**62, None, generator=ref)
    assert torch.equal(i.to_torch(), want_i)
    assert torch.equal(torch.rand(4, generator=g), torch.rand(4, generator=ref))


@pytest.mark.parametrize(("mesh_shape", "placements"), LAYOUTS[:2] + LAYOUTS[3:], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_normal_and_bernoulli_of_tensors(
    mesh_shape: tuple[int, ...], placements: list[Placement], dtype: torch.dtype,
    graph: dtorch.Graph,
) -> None:  # fmt: skip
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    shape = SHAPES[len(mesh_shape) - 1]
    torch.manual_seed(5)
    mean, std = torch.randn(shape, dtype=dtype), torch.rand(shape, dtype=dtype)
    dm, ds = (dtorch.from_torch(v, device_mesh=mesh, placements=placements) for v in (mean, std))
    calls: list[tuple[Callable[[], Any], Callable[[], Any]]] = [
        (lambda: dtorch.normal(dm, ds), lambda: torch.normal(mean, std)),
        (lambda: dtorch.normal(dm, 0.5), lambda: torch.normal(mean, 0.5)),
        (lambda: dtorch.normal(-1.0, std=ds), lambda: torch.normal(-1.0, std=std)),
        (lambda: dtorch.bernoulli(ds), lambda: torch.bernoulli(std)),
        (lambda: ds.bernoulli(0.75), lambda: std.bernoulli(0.75)),
        (lambda: dm.clone().bernoulli_(ds), lambda: mean.clone().bernoulli_(std)),
    ]
    for got_call, want_call in calls:
        got, want = _same_draws(got_call, want_call)
        assert torch.equal(got, want) and got.dtype == want.dtype, f"{dtype} on {mesh_shape}"
    assert dtorch.normal(dm, ds).placements == placements


def test_normal_broadcasts_mixed_dtypes_and_sizes(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    mean, std = torch.randn(7, 1), torch.rand(5, dtype=torch.float64)
    dm = dtorch.from_torch(mean, device_mesh=mesh, placements=[S0, R])
    ds = dtorch.from_torch(std, device_mesh=mesh)
    got, want = _same_draws(lambda: dtorch.normal(dm, ds), lambda: torch.normal(mean, std))
    assert got.dtype == torch.float32 and torch.equal(got, want)
    got, want = _same_draws(
        lambda: dtorch.normal(2.0, 0.5, (7, 3), device_mesh=mesh, placements=[S1, S0]),
        lambda: torch.normal(2.0, 0.5, (7, 3)),
    )
    assert torch.equal(got, want)
    g, ref = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    got = dtorch.normal(mean=0.0, std=3.0, size=[4], generator=g, dtype=torch.float64)
    assert torch.equal(
        got.to_torch(), torch.normal(0.0, 3.0, [4], generator=ref, dtype=torch.float64)
    )
    probs = torch.rand(4, 6, dtype=torch.float64)
    t = _on((2,), [S1], (3, 4, 6), torch.int32)  # p broadcasts to t
    got = t.bernoulli_(dtorch.from_torch(probs, device_mesh=t.device_mesh), generator=g)
    want = torch.zeros(3, 4, 6, dtype=torch.int32).bernoulli_(probs, generator=ref)
    assert torch.equal(got.to_torch(), want)


@pytest.mark.parametrize(("mesh_shape", "placements"), [((3,), [S0]), ((2, 2), [S0, R])], ids=str)
def test_randperm_and_randint_like(
    mesh_shape: tuple[int, ...], placements: list[Placement], graph: dtorch.Graph
) -> None:
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    for n, dtype in [(10, torch.int64), (7, torch.int32), (2, torch.float32), (0, torch.int64)]:
        got, want = _same_draws(
            lambda: dtorch.randperm(n, dtype=dtype, device_mesh=mesh, placements=placements),  # noqa: B023
            lambda: torch.randperm(n, dtype=dtype),  # noqa: B023
        )
        assert torch.equal(got, want) and got.dtype == dtype
    like = dtorch.zeros(7, 5, device_mesh=mesh, placements=placements)
    got, want = _same_draws(
        lambda: dtorch.randint_like(like, 9), lambda: torch.randint_like(torch.zeros(7, 5), 9)
    )
    assert torch.equal(got, want) and got.dtype == torch.float32
    got, want = _same_draws(
        lambda: dtorch.randint_like(like, -3, high=4, dtype=torch.int16),
        lambda: torch.randint_like(torch.zeros(7, 5), -3, high=4, dtype=torch.int16),
    )
    assert torch.equal(got, want)
    assert dtorch.randint_like(like, 3).placements == placements


@pytest.mark.parametrize(("mesh_shape", "placements"), [((2,), [S0]), ((2, 2), [P, S1])], ids=str)
def test_the_waiting_draws_are_torch_own(
    mesh_shape: tuple[int, ...], placements: list[Placement], graph: dtorch.Graph
) -> None:
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    rates = torch.rand(5, 6, dtype=torch.float64) * 8
    counts = torch.randint(0, 30, (5, 6)).float()
    d_rates, d_counts, d_probs = (
        dtorch.from_torch(v, device_mesh=mesh, placements=placements)
        for v in (rates, counts, (rates / 8).float())
    )
    keep = [p if isinstance(p, Shard) else R for p in placements]
    got, want = _same_draws(lambda: dtorch.poisson(d_rates), lambda: torch.poisson(rates))
    assert torch.equal(got, want) and dtorch.poisson(d_rates).placements == keep
    got, want = _same_draws(lambda: dtorch.binomial(d_counts, d_probs),
                            lambda: torch.binomial(counts, (rates / 8).float()))  # fmt: skip
    assert torch.equal(got, want)
    for args in [(3,), (8, True)]:
        got, want = _same_draws(lambda: d_rates.multinomial(*args),  # noqa: B023
                                lambda: torch.multinomial(rates, *args))  # noqa: B023 # fmt: skip
        assert torch.equal(got, want)
    g, ref = torch.Generator().manual_seed(2), torch.Generator().manual_seed(2)
    row = dtorch.from_torch(rates[0], device_mesh=mesh)
    got = dtorch.multinomial(row, 6, generator=g).to_torch()
    assert torch.equal(got, torch.multinomial(rates[0], 6, generator=ref))
    assert dtorch.multinomial(d_rates, 2).placements == [R] * len(mesh_shape)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda t: t.exponential_(-1.0), RuntimeError, "lambda > 0"),
        (lambda t: t.geometric_(1.5), RuntimeError, "geometric_ expects p to be in"),
        (lambda t: t.log_normal_(0.0, -1.0), RuntimeError, "log_normal_ expects std > 0"),
        (lambda t: t.cauchy_(0.0, -1.0), RuntimeError, "cauchy_ expects sigma > 0"),
        (lambda t: t.random_(5, 2), RuntimeError, "random_ expects 'from' to be less than 'to'"),
        (lambda t: t.random_(1.5), TypeError, "argument 'to' must be an int"),
        (lambda t: t.random_(1, 2, 3), TypeError, "at most 2 arguments"),
        (lambda t: t.random_(frm=1), TypeError, "unexpected keyword argument 'frm'"),
        (lambda t: t.bernoulli_(1.5), RuntimeError, "expects p to be in"),
        (lambda t: t.bernoulli_(t.long()), UnsupportedDtypeError, "floating tensor"),
        (lambda t: t.bernoulli_(dtorch.ones(3, 5, 4)), ShapeError, "does not broadcast"),
        (lambda t: t.exponential_("a"), TypeError, "lambd must be a number"),
        (lambda t: t.cauchy_(generator=3), TypeError, "CPU torch.Generator"),
        (lambda t: dtorch.normal(t, -1.0), RuntimeError, "normal expects std >= 0.0"),
        (lambda t: dtorch.normal(t.long(), 1.0), NotImplementedError, "not implemented for"),
        (
            lambda t: dtorch.normal(t, dtorch.ones(3, device_mesh=t.device_mesh)),
            ShapeError,
            "do not broadcast",
        ),
        (lambda t: dtorch.normal(1.0, 2.0), TypeError, "size is required"),
        (lambda t: dtorch.normal(t, t, (2,)), TypeError, "only with a number mean and std"),
        (lambda t: dtorch.randperm(-1), RuntimeError, "n must be non-negative"),
        (lambda t: t.multinomial(2.5), TypeError, "num_samples must be an int"),
    ],
)
def test_bad_input_gets_torch_errors_and_draws_nothing(
    call: Any, error: type[Exception], match: str, graph: dtorch.Graph
) -> None:
    t = _on((2,), [S0], (5, 4))
    torch.manual_seed(1)
    with pytest.raises(error, match=match):
        call(t)
    after = torch.rand(3)
    torch.manual_seed(1)
    assert torch.equal(after, torch.rand(3)), "a refused call leaves the generator as it was"
    assert torch.equal(t.to_torch(), torch.zeros(5, 4))


def _fill(method: str, dtype: torch.dtype, *args: Any) -> Callable[[Any], Any]:
    # ``method`` of a (5, 4) tensor of ``dtype`` (torch's, or dtorch's sharded one)
    def call(lib: Any) -> Any:
        if lib is torch:
            return getattr(torch.zeros(5, 4, dtype=dtype), method)(*args)
        return getattr(_on((2,), [S0], (5, 4), dtype), method)(*args)

    return call


def _with(name: str, *args: Any, dtype: torch.dtype = torch.float32, **kw: Any) -> Any:
    # ``lib.name`` of a (5, 4)/(5,) tensor of ``dtype`` first, then ``args``
    def call(lib: Any) -> Any:
        t = torch.ones(5, 4, dtype=dtype) if lib is torch else _on((2,), [S0], (5, 4), dtype) + 1
        return getattr(lib, name)(t, *args, **kw)

    return call


#: (label, a call of torch's or dtorch's random functions, the dtorch class it raises)
_TORCH_REFUSALS: list[tuple[str, Callable[[Any], Any], type[DTorchError]]] = [
    ("normal_ std", _fill("normal_", torch.float32, 0.0, -1.0), ParamError),
    ("uniform_ bounds", _fill("uniform_", torch.float32, 2.0, 1.0), ParamError),
    ("uniform_ long", _fill("uniform_", torch.int64), UnsupportedDtypeError),
    ("exponential_ lambda", _fill("exponential_", torch.float32, -1.0), ParamError),
    ("exponential_ long", _fill("exponential_", torch.int64), DtypeError),
    ("geometric_ p", _fill("geometric_", torch.float32, 1.5), ParamError),
    ("cauchy_ long", _fill("cauchy_", torch.int64), DtypeError),
    ("random_ bounds", _fill("random_", torch.float32, 5, 2), ParamError),
    ("random_ uint8", _fill("random_", torch.uint8, 0, 1000), ParamError),
    ("bernoulli_ p", _fill("bernoulli_", torch.float32, 1.5), ParamError),
    ("normal std", _with("normal", -1.0), ParamError),
    ("normal sized", lambda lib: lib.normal(0.0, -1.0, size=(3,)), ParamError),
    ("randperm bool", lambda lib: lib.randperm(3, dtype=torch.bool), UnsupportedDtypeError),
    ("randperm half", lambda lib: lib.randperm(3000, dtype=torch.float16), ParamError),
    ("randint_like half", _with("randint_like", 0, 100000, dtype=torch.float16), ParamError),
    ("poisson rate", lambda lib: lib.poisson(lib.full((3,), -1.0)), ParamError),
    ("poisson long", _with("poisson", dtype=torch.int64), UnsupportedDtypeError),
    ("multinomial long", _with("multinomial", 1, dtype=torch.int64), DtypeError),
    ("multinomial samples", _with("multinomial", 5), ParamError),
    ("multinomial dims", lambda lib: lib.multinomial(lib.ones(2, 2, 2), 1), ShapeError),
    ("rand long", lambda lib: lib.rand(2, dtype=torch.int64), UnsupportedDtypeError),
    ("randn long", lambda lib: lib.randn(2, dtype=torch.int64), UnsupportedDtypeError),
    ("rand_like long", lambda lib: lib.rand_like(lib.zeros(2, dtype=torch.int64)),
     UnsupportedDtypeError),
    ("randint bool", lambda lib: lib.randint(0, 5, (3,), dtype=torch.bool), ParamError),
    ("randint uint8", lambda lib: lib.randint(0, 300, (3,), dtype=torch.uint8), ParamError),
]  # fmt: skip


@pytest.mark.parametrize(
    ("label", "call", "kind"), _TORCH_REFUSALS, ids=[c[0] for c in _TORCH_REFUSALS]
)
def test_torch_refusals_raise_dtorch_classes(
    label: str, call: Callable[[Any], Any], kind: type[DTorchError], graph: dtorch.Graph
) -> None:
    """torch's refusal of a random function's argument is raised as the dtorch class that
    describes it, a subclass of torch's class (``except RuntimeError`` still catches it),
    with torch's words; the generator is left as it was."""
    with pytest.raises(Exception) as theirs:
        call(torch)
    torch.manual_seed(1)
    with pytest.raises(kind) as ours:
        call(dtorch)
    after = torch.rand(3)
    torch.manual_seed(1)
    assert torch.equal(after, torch.rand(3)), "a refused call leaves the generator as it was"
    assert isinstance(ours.value, type(theirs.value))
    assert str(theirs.value).split("\n", 1)[0] in str(ours.value)


@pytest.mark.parametrize("bad", [1.5, -0.5, float("nan")])
def test_probabilities_and_stds_out_of_range_are_refused(bad: float, graph: dtorch.Graph) -> None:
    """torch refuses a probability tensor with an entry outside [0, 1] and a std tensor with
    a negative or NaN entry, at the call: dtorch too (waiting for one bool), before anything
    is drawn; an entry in range is drawn as torch draws it."""
    good = torch.full((5, 4), 0.5)
    entries = good.clone()
    entries[3, 1] = bad

    def both(x: torch.Tensor) -> tuple[torch.Tensor, dtorch.Tensor]:
        mesh = dtorch.init_device_mesh("cpu", 2)
        return x, dtorch.from_torch(x, device_mesh=mesh, placements=[S0])  # dtorch's, sharded

    (probs, d_probs), (stds, d_stds) = both(entries), both(entries - 0.5 if bad > 0 else entries)
    calls = [
        ("bernoulli", lambda lib, p: lib.bernoulli(p), probs, d_probs, "p_in >= 0 && p_in <= 1"),
        ("bernoulli_", lambda lib, p: (torch.zeros(5, 4) if lib is torch else
                                       _on((2,), [S0], (5, 4))).bernoulli_(p),
         probs, d_probs, "p_in >= 0 && p_in <= 1"),
        ("normal", lambda lib, s: lib.normal(0.0, s), stds, d_stds, "all elements of std >= 0.0"),
        ("normal", lambda lib, s: lib.normal(s * 0, s), stds, d_stds,
         "all elements of std >= 0.0"),
    ]  # fmt: skip
    for name, call, theirs, ours, words in calls:
        refused = (
            bool((~((theirs >= 0) & (theirs <= 1))).any())
            if "p_in" in words
            else bool((~(theirs >= 0)).any())
        )
        if not refused:  # 1.5 - 0.5 is a fine std
            continue
        with pytest.raises(RuntimeError, match=re.escape(words)):
            call(torch, theirs)
        torch.manual_seed(1)
        with pytest.raises(ParamError, match=rf"^{name}: .*{re.escape(words)}"):
            call(dtorch, ours)
        after = torch.rand(3)
        torch.manual_seed(1)
        assert torch.equal(after, torch.rand(3)), "a refused call leaves the generator as it was"
    g, ref = torch.Generator().manual_seed(4), torch.Generator().manual_seed(4)
    got = dtorch.bernoulli(both(good)[1], generator=g).to_torch()
    assert torch.equal(got, torch.bernoulli(good, generator=ref))


def test_normal_refuses_unmatched_placements(graph: dtorch.Graph) -> None:
    """The tensors' shardings must agree as for ``mean * std`` (the draw is made first)."""
    t = _on((2,), [S0], (6, 4))
    with pytest.raises(PlacementError, match=r"normal: mul: got \(S\(0\),\) x \(S\(1\),\)"):
        dtorch.normal(t, t.redistribute(placements=[S1]))


@pytest.mark.parametrize(
    "call",
    [
        lambda p: dtorch.normal(p, 0.5),
        lambda p: dtorch.normal(0.0, p),
        lambda p: dtorch.normal(p.redistribute(placements=[R]), p),
        dtorch.bernoulli,
        lambda p: dtorch.zeros(4, device_mesh=p.device_mesh).bernoulli_(p),
    ],
)
def test_partial_tensor_arguments_are_refused_before_drawing(
    call: Any, graph: dtorch.Graph
) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    p = dtorch.from_torch(torch.rand(4), device_mesh=mesh, placements=[P])
    torch.manual_seed(1)
    with pytest.raises(PlacementError, match=r"got a tensor with placements \[Partial"):
        call(p)
    after = torch.rand(3)
    torch.manual_seed(1)
    assert torch.equal(after, torch.rand(3))

"""torch's call forms of the creation functions against torch: ``randint``'s positional and
keyword forms (the same values as torch's for the same generator, however sharded), ``size=``
of ``zeros ones empty rand randn``, ``arange``'s keyword bounds, ``input=`` of the ``*_like``
functions, and ``dtorch.tensor`` of a dtorch tensor (a copy, as ``torch.tensor`` of a torch
tensor). Where torch refuses a form, dtorch refuses it too, with a clear error."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import dtorch
from dtorch import Partial, Replicate, Shard
from dtorch.errors import ParamError, PlacementError

# (mesh shape, placements) for a 2-D tensor: replicated, sharded, uneven, Partial, 2-D mesh.
LAYOUTS = [
    ((1,), [Replicate()]),
    ((3,), [Shard(0)]),
    ((4,), [Shard(1)]),
    ((2,), [Partial()]),
    ((2, 2), [Shard(1), Shard(0)]),
]


def _on(mesh_shape: tuple[int, ...], placements: list[Any], graph: dtorch.Graph) -> dict:
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    return {"device_mesh": mesh, "placements": placements, "graph": graph}


def _same(got: dtorch.Tensor, want: torch.Tensor) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    assert torch.equal(got.to_torch(), want)


# --- randint -------------------------------------------------------------------------------

# (positional, keywords) of every form torch.randint takes: (high, size), (low, high, size).
RANDINT_FORMS = [
    ((0, 5), {"size": (3, 4)}),
    ((5,), {"size": (3, 4)}),
    ((), {"low": 2, "high": 5, "size": (3, 4)}),
    ((), {"high": 5, "size": (3, 4)}),
    ((), {"size": (3, 4), "high": 7}),
    ((2,), {"high": 9, "size": (3, 4)}),
    ((2, 9), {"size": [3, 4]}),
    ((9, (3, 4)), {}),
    ((-4, 9, (3, 4)), {}),
    ((2, 9, torch.Size([3, 4])), {}),
    ((torch.tensor(6), (3, 4)), {}),
    ((5, (3, 4)), {"dtype": torch.int32}),
    ((5, (3, 4)), {"dtype": torch.float64}),
]


@pytest.mark.parametrize(("mesh_shape", "placements"), LAYOUTS)
@pytest.mark.parametrize(("args", "kwargs"), RANDINT_FORMS)
def test_randint_forms_draw_torch_values_however_sharded(  # type: ignore[no-untyped-def]
    args, kwargs, mesh_shape, placements, graph
) -> None:
    g, ref = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    kw = _on(mesh_shape, placements, graph)
    got = dtorch.randint(*args, generator=g, **kwargs, **kw)
    _same(got, torch.randint(*args, generator=ref, **kwargs))
    assert torch.equal(g.get_state(), ref.get_state())  # advanced as torch's
    assert got.placements == placements


def test_randint_default_generator_and_device(graph: dtorch.Graph) -> None:
    torch.manual_seed(3)
    want = torch.randint(low=1, high=4, size=(5,))
    torch.manual_seed(3)
    got = dtorch.randint(low=1, high=4, size=(5,), device="cpu:1", graph=graph)
    _same(got, want)
    assert got.device == torch.device("cpu", 1)


# (positional, keywords) torch.randint refuses with a TypeError, and so does dtorch.
RANDINT_TYPE_ERRORS = [
    ((), {"low": 2, "size": (3,)}),  # no high
    ((), {"size": (3,)}),
    ((2, 5), {"high": 7}),  # high twice
    ((5,), {"low": 1, "high": 3, "size": (2,)}),  # low twice
    ((5.5, (3,)), {}),
    ((1, 5.0, (3,)), {}),
    ((True, (3,)), {}),
    ((1, 2, (3,), 4), {}),
    ((5,), {"size": 3}),
]


@pytest.mark.parametrize(("args", "kwargs"), RANDINT_TYPE_ERRORS)
def test_randint_refuses_what_torch_refuses(args, kwargs, graph) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError):
        torch.randint(*args, **kwargs)
    with pytest.raises(TypeError, match=r"randint\(\)|unexpected keyword"):
        dtorch.randint(*args, **kwargs, graph=graph)


def test_randint_empty_range_is_refused(graph: dtorch.Graph) -> None:
    with pytest.raises(RuntimeError):
        torch.randint(5, 5, (3,))
    with pytest.raises(ParamError, match="low must be less than high, got low=5, high=5"):
        dtorch.randint(5, 5, size=(3,), graph=graph)
    with pytest.raises(ParamError, match="got low=0, high=-1"):
        dtorch.randint(high=-1, size=(3,), graph=graph)


# --- size= ---------------------------------------------------------------------------------

SIZED: list[tuple[str, Callable[..., Any], Callable[..., Any]]] = [
    ("zeros", dtorch.zeros, torch.zeros),
    ("ones", dtorch.ones, torch.ones),
]


@pytest.mark.parametrize(("name", "ours", "theirs"), SIZED)
@pytest.mark.parametrize(("mesh_shape", "placements"), LAYOUTS)
@pytest.mark.parametrize("size", [(3, 4), [3, 4], torch.Size([3, 4])])
def test_size_keyword_of_zeros_and_ones(  # type: ignore[no-untyped-def]
    name, ours, theirs, mesh_shape, placements, size, graph
) -> None:
    got = ours(size=size, **_on(mesh_shape, placements, graph))
    _same(got, theirs(size=size))
    _same(ours(size=size, dtype=torch.int32, graph=graph), theirs(size=size, dtype=torch.int32))


def test_size_keyword_of_empty_rand_randn(graph: dtorch.Graph) -> None:
    kw = _on((3,), [Shard(0)], graph)
    assert dtorch.empty(size=(3, 4), **kw).shape == torch.empty(size=(3, 4)).shape
    assert dtorch.empty(size=[2], dtype=torch.int16, graph=graph).dtype == torch.int16
    for ours, theirs in [(dtorch.rand, torch.rand), (dtorch.randn, torch.randn)]:
        g, ref = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
        _same(ours(size=(3, 4), generator=g, **kw), theirs(size=(3, 4), generator=ref))
        _same(
            ours(size=[5], generator=g, dtype=torch.float64, graph=graph),
            theirs(size=[5], generator=ref, dtype=torch.float64),
        )
        torch.manual_seed(4)
        want = theirs(size=(2, 3))
        torch.manual_seed(4)
        _same(ours(size=(2, 3), graph=graph), want)


@pytest.mark.parametrize("name", ["zeros", "ones", "empty", "rand", "randn"])
def test_size_keyword_refusals_follow_torch(name: str, graph: dtorch.Graph) -> None:
    ours, theirs = getattr(dtorch, name), getattr(torch, name)
    with pytest.raises(TypeError):
        theirs(2, size=(2,))
    with pytest.raises(TypeError, match=rf"^{name}\(\) got multiple values for argument 'size'"):
        ours(2, size=(2,), graph=graph)
    with pytest.raises(TypeError):
        theirs(size=2)
    with pytest.raises(TypeError, match=rf"^{name}\(\): argument 'size' must be a tuple of ints"):
        ours(size=2, graph=graph)


# --- arange --------------------------------------------------------------------------------

ARANGE_FORMS = [
    ((3,), {}),
    ((), {"end": 3}),
    ((), {"end": 3.0}),
    ((), {"start": 1, "end": 5, "step": 2}),
    ((), {"end": 5, "start": 1}),
    ((1,), {"end": 5}),
    ((1, 5), {"step": 2}),
    ((1,), {"step": 2, "end": 6}),
    ((1, 5, 2), {}),
    ((), {"start": 0.5, "end": 2}),
    ((), {"end": 4, "dtype": torch.float64}),
    ((torch.tensor(3),), {}),
]


@pytest.mark.parametrize(("args", "kwargs"), ARANGE_FORMS)
def test_arange_forms_equal_torch(args, kwargs, graph) -> None:  # type: ignore[no-untyped-def]
    want = torch.arange(*args, **kwargs)
    _same(dtorch.arange(*args, **kwargs, graph=graph), want)
    kw = _on((2,), [Shard(0)], graph)
    _same(dtorch.arange(*args, **kwargs, **kw), want)


ARANGE_TYPE_ERRORS = [
    ((), {}),
    ((), {"start": 1}),
    ((5,), {"step": 2}),  # step selects (start, end, step): no end
    ((), {"end": 5, "step": 2}),  # no start
    ((3,), {"start": 1}),
    ((1, 5), {"end": 6}),
    ((1, 5, 2, 7), {}),
]


@pytest.mark.parametrize(("args", "kwargs"), ARANGE_TYPE_ERRORS)
def test_arange_refuses_what_torch_refuses(args, kwargs, graph) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError):
        torch.arange(*args, **kwargs)
    with pytest.raises(TypeError, match=r"^arange\(\)"):
        dtorch.arange(*args, **kwargs, graph=graph)


# --- *_like --------------------------------------------------------------------------------

LIKE = [
    ("zeros_like", {}),
    ("ones_like", {}),
    ("full_like", {"fill_value": 7}),
    ("full_like", {"fill_value": 2.5}),
]


@pytest.mark.parametrize(("mesh_shape", "placements"), LAYOUTS)
@pytest.mark.parametrize(("name", "kwargs"), LIKE)
def test_like_functions_take_input_by_keyword(  # type: ignore[no-untyped-def]
    name, kwargs, mesh_shape, placements, graph
) -> None:
    full = torch.arange(12, dtype=torch.float64).view(3, 4)
    t = dtorch.from_torch(full, **_on(mesh_shape, placements, graph))
    ours, theirs = getattr(dtorch, name), getattr(torch, name)
    for got in (ours(t, **kwargs), ours(input=t, **kwargs)):
        _same(got, theirs(full, **kwargs))
        assert got.placements == placements and got.device_mesh == t.device_mesh
    got = ours(input=t, dtype=torch.int32, **kwargs)
    _same(got, theirs(input=full, dtype=torch.int32, **kwargs))


def test_random_and_empty_like_take_input_by_keyword(graph: dtorch.Graph) -> None:
    t = dtorch.zeros(3, 4, dtype=torch.float64, **_on((3,), [Shard(0)], graph))
    full = torch.zeros(3, 4, dtype=torch.float64)
    for name in ("rand_like", "randn_like"):
        ours, theirs = getattr(dtorch, name), getattr(torch, name)
        torch.manual_seed(8)
        want = theirs(input=full)
        torch.manual_seed(8)
        got = ours(input=t)
        _same(got, want)
        assert got.placements == [Shard(0)]
    made = dtorch.empty_like(input=t, memory_format=torch.preserve_format)
    assert made.shape == (3, 4) and made.dtype == torch.float64 and made.placements == [Shard(0)]


@pytest.mark.parametrize(
    "call",
    [
        dtorch.zeros_like,
        lambda x: dtorch.ones_like(input=x),
        dtorch.empty_like,
        lambda x: dtorch.full_like(x, 1),
        dtorch.rand_like,
        lambda x: dtorch.randn_like(input=x),
    ],
)
def test_like_functions_refuse_torch_tensors_clearly(call, graph) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(
        TypeError, match=r"_like: input must be a dtorch\.Tensor, got torch\.Tensor;"
    ):
        call(torch.zeros(3))
    with pytest.raises(TypeError, match=r"must be a dtorch\.Tensor, got builtins\.list"):
        call([1.0, 2.0])


# --- tensor(dtorch tensor) ---------------------------------------------------------------


@pytest.mark.parametrize(("mesh_shape", "placements"), LAYOUTS)
def test_tensor_of_a_dtorch_tensor_is_a_copy(mesh_shape, placements, graph) -> None:  # type: ignore[no-untyped-def]
    full = torch.arange(12.0).view(3, 4)
    t = dtorch.from_torch(full, **_on(mesh_shape, placements, graph))
    with pytest.warns(UserWarning, match="To copy construct from a tensor") as caught:
        copy = dtorch.tensor(t)
    assert caught[0].filename == __file__  # the warning names the user's line
    _same(copy, full.clone())
    assert copy.placements == placements and copy.device_mesh == t.device_mesh
    copy.mul_(2)  # the copy has values of its own
    _same(t, full)
    _same(copy, full * 2)


def test_tensor_of_a_dtorch_tensor_follows_the_keywords(graph: dtorch.Graph) -> None:
    full = torch.arange(8.0).view(2, 4)
    t = dtorch.from_torch(full, **_on((2,), [Shard(1)], graph))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        as_int = dtorch.tensor(t, dtype=torch.int64)
        replicated = dtorch.tensor(t, placements=[Replicate()])
        moved = dtorch.tensor(data=t, device_mesh=dtorch.init_device_mesh("cpu", 4))
        module_form = dtorch.tensor.tensor(t)
    _same(as_int, full.to(torch.int64))
    assert as_int.placements == [Shard(1)]
    _same(replicated, full)
    assert replicated.placements == [Replicate()]
    _same(moved, full)  # another mesh, the placements kept (as redistribute keeps them)
    assert moved.placements == [Shard(1)] and moved.device_mesh.shape == (4,)
    _same(module_form, full)
    with pytest.raises(TypeError, match="unexpected keyword"):
        dtorch.tensor(t, mesh=None)


def test_tensor_of_a_partial_tensor_moves_before_it_casts(graph: dtorch.Graph) -> None:
    """A Partial float source moved to one device (``device=``) or to Replicate is summed
    before a cast to an integer dtype (the cast of its parts would truncate each part);
    kept Partial, the cast is refused as ``to`` refuses it."""
    full = torch.tensor([[2.75, -3.5, 9.25], [0.5, -0.75, 4.0]])
    t = dtorch.from_torch(full, **_on((2,), [Partial()], graph))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one = dtorch.tensor(t, dtype=torch.int64, device="cpu")
        everywhere = dtorch.tensor(t, dtype=torch.int32, placements=[Replicate()])
        moved = dtorch.as_tensor(t, dtype=torch.int64, device="cpu:1")
        with pytest.raises(PlacementError, match="redistribute to Replicate first"):
            dtorch.tensor(t, dtype=torch.int64)
    _same(one, full.to(torch.int64))
    _same(everywhere, full.to(torch.int32))
    _same(moved, full.to(torch.int64))
    assert one.placements == everywhere.placements == [Replicate()]


@pytest.mark.parametrize(
    "data",
    [
        np.array([0.1 + 2**-40, 2.5]),  # float64: torch keeps it
        np.array([1.5, -2.0], dtype=np.float16),
        np.float64(0.1 + 2**-40),  # a NumPy scalar carries its dtype too
        np.array([[1, 2], [3, 4]], dtype=np.int16),
        [np.float64(1.5), np.float64(2.5)],  # torch infers float64 from the items
        [1.5, 2],  # Python numbers: the default dtype
    ],
    ids=["f64-array", "f16-array", "f64-scalar", "i16-array", "f64-items", "python"],
)
def test_tensor_of_numpy_data_keeps_its_dtype(data: Any, graph: dtorch.Graph) -> None:
    """``dtorch.tensor`` of NumPy data has torch.tensor's dtype (float64 arrays became
    float32, losing precision silently)."""
    want = torch.tensor(data)
    got = dtorch.tensor(data, device_mesh=dtorch.init_device_mesh("cpu", 2), graph=graph)
    assert got.dtype == want.dtype
    assert torch.equal(got.to_torch(), want)


def test_tensor_of_python_floats_follows_the_dtype_guard_and_numpy_does_not(
    graph: dtorch.Graph,
) -> None:
    """Under ``dtype_guard`` Python floats take the guarded dtype; a NumPy float32 array stays
    float32, as torch.tensor keeps it whatever the default dtype."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    with graph.dtype_guard(torch.float64):
        assert dtorch.tensor([1.5], device_mesh=mesh, graph=graph).dtype == torch.float64
        typed = dtorch.tensor(np.array([1.5], dtype=np.float32), device_mesh=mesh, graph=graph)
    assert typed.dtype == torch.float32


def test_tensor_of_lists_holding_dtorch_tensors_takes_their_values(graph: dtorch.Graph) -> None:
    """``torch.tensor([t0, t1])`` of one-element tensors (collecting per-step losses) is a
    tensor of their values; dtorch raised 'len() of a 0-d tensor'."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    cases = [
        [torch.tensor(1.5), torch.tensor(2.5)],
        [[torch.tensor(1), 2], [3, torch.tensor([4.0])]],
        (torch.tensor(True), torch.tensor(7)),
    ]
    for data in cases:
        want = torch.tensor(data)
        mixed = [
            [
                dtorch.from_torch(v, device_mesh=mesh) if isinstance(v, torch.Tensor) else v
                for v in x
            ]
            if isinstance(x, list)
            else dtorch.from_torch(x, device_mesh=mesh)
            for x in data
        ]
        got = dtorch.tensor(mixed, device_mesh=mesh)
        assert got.dtype == want.dtype and torch.equal(got.to_torch(), want), data
    with pytest.raises(ValueError, match="only one element tensors"):  # torch's
        dtorch.tensor([dtorch.ones(2), dtorch.ones(2)])


@pytest.mark.parametrize("name", ["zeros", "ones", "empty", "rand", "randn"])
def test_storage_keywords_dtorch_cannot_honour_are_refused(name: str, graph: dtorch.Graph) -> None:
    """``layout=`` other than strided and ``pin_memory=True`` are refused (they were
    ignored: ``zeros(3, layout=torch.sparse_coo)`` gave a dense tensor); the defaults pass."""
    make = getattr(dtorch, name)
    with pytest.raises(ParamError, match=r"layout=torch\.sparse_coo is not supported"):
        make(3, layout=torch.sparse_coo)
    with pytest.raises(ParamError, match="pin_memory=True is not supported"):
        make(3, pin_memory=True)
    with pytest.raises(TypeError, match=r"layout must be a torch\.layout"):
        make(3, layout="sparse")
    assert make(3, layout=torch.strided, pin_memory=False).shape == (3,)

"""The last of torch's Tensor methods a model or a port reaches for: ``index_reduce`` (and
``_``), ``H``, ``unsafe_chunk``/``unsafe_split``/``unsafe_split_with_sizes``,
``nonzero_static``, ``prelu``, ``igamma``/``igammac`` (and ``_``), as methods and as
``torch.*`` calls on dtorch tensors, against torch on the full tensors."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

import dtorch
from dtorch.errors import DtypeError, ParamError, ShapeError
from tests.api.ops_harness import S0, S1, R, compare, place

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.filterwarnings("ignore:index_reduce\\(\\) is in beta:UserWarning"),
]

_G = torch.Generator().manual_seed(5)


def _mesh(n: int = 2) -> dtorch.DeviceMesh:
    return dtorch.init_device_mesh("cpu", n)


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize(
    ("dtype", "dim", "placements"),
    [
        (torch.float32, 0, [S1]),
        (torch.float64, 1, [S0]),
        (torch.int64, 0, [R]),
        (torch.int32, -1, [S0]),
    ],
)
def test_index_reduce(reduce, include_self, dtype, dim, placements, graph) -> None:  # type: ignore[no-untyped-def]
    x = (torch.randn(5, 4, generator=_G) * 5).to(dtype)
    index = torch.tensor([3, 0, 3, 1])
    src_shape = [5, 4]
    src_shape[dim] = 4
    src = (torch.randn(src_shape, generator=_G) * 5).to(dtype)
    want = x.index_reduce(dim, index, src, reduce, include_self=include_self)
    mesh = _mesh()
    t = place(x, mesh, placements, graph)
    s = place(src, mesh, [R], graph)
    for idx in (index, place(index, mesh, [R], graph), index.int()):
        got = torch.index_reduce(t, dim, idx, s, reduce, include_self=include_self)
        assert got.placements == placements
        compare(got.to_torch(), want, True, f"index_reduce {reduce} {idx!r}")
    same = t.clone()
    assert same.index_reduce_(dim, index, s, reduce, include_self=include_self) is same
    compare(same.to_torch(), want, True, "index_reduce_")


_IX = torch.tensor([0, 2])

_INDEX_REDUCE_REFUSALS: list[tuple[str, Callable[[Any, Any], Any], type[Exception], str]] = [
    ("sum", lambda x, s: x.index_reduce(0, _IX, s, "sum"), ParamError, "prod, mean, amax"),
    ("dtype", lambda x, s: x.index_reduce(0, _IX, s.double(), "prod"), DtypeError, "same dtype"),
    ("slices", lambda x, s: x.index_reduce(0, _IX, s[:, :2], "prod"), ShapeError, "slice shape"),
    ("count", lambda x, s: x.index_reduce(0, _IX[:1], s, "prod"), RuntimeError, "Number of"),
    ("float index", lambda x, s: x.index_reduce(0, _IX.float(), s, "prod"), DtypeError,
     "int32/int64"),
    ("2-d index", lambda x, s: x.index_reduce(0, _IX[None], s, "prod"), IndexError, "dimension"),
    ("out of range", lambda x, s: x.index_reduce(0, torch.tensor([0, 9]), s, "prod"),
     IndexError, "out of"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "call", "error", "text"),
    _INDEX_REDUCE_REFUSALS,
    ids=[r[0] for r in _INDEX_REDUCE_REFUSALS],
)
def test_index_reduce_refusals(case, call, error, text, graph) -> None:  # type: ignore[no-untyped-def]
    x, src = torch.randn(4, 3), torch.randn(2, 3)
    with pytest.raises((RuntimeError, IndexError)):
        call(x, src)  # torch refuses it too
    mesh = _mesh()
    with pytest.raises(error, match=text):
        call(place(x, mesh, [R], graph), place(src, mesh, [R], graph))


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
def test_h_is_the_conjugate_transpose_of_a_matrix(dtype: torch.dtype, graph) -> None:  # type: ignore[no-untyped-def]
    full = torch.randn(4, 6, generator=_G, dtype=dtype)
    got = place(full, _mesh(), [S0], graph).H
    assert got.placements == [S1]
    compare(got.to_torch(), full.H.resolve_conj(), True, "H")


def test_h_of_0d_and_of_other_dims_as_torch(graph: dtorch.Graph) -> None:
    with pytest.warns(UserWarning, match=r"^Tensor\.H is deprecated on 0-D tensors\. Consider"):
        got = dtorch.tensor(1 + 2j).H  # torch's own warns once per process: its text
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert got.item() == torch.tensor(1 + 2j).H.item()
    for shape in ((3,), (2, 2, 2)):
        with pytest.raises(RuntimeError) as theirs:
            _ = torch.ones(shape).H
        with pytest.raises(ShapeError) as ours:
            _ = dtorch.ones(shape).H
        assert str(ours.value) == str(theirs.value).split("\n")[0]


@pytest.mark.parametrize(
    "call",
    [
        lambda t: t.unsafe_chunk(3, 1),
        lambda t: torch.unsafe_chunk(t, 2),
        lambda t: t.unsafe_split(2),
        lambda t: torch.unsafe_split(t, 3, dim=1),
        lambda t: t.unsafe_split_with_sizes([1, 3], 0),
        lambda t: torch.unsafe_split_with_sizes(t, [4, 2], dim=1),
    ],
)
def test_unsafe_splits_are_splits(call: Callable[[Any], Any], graph: dtorch.Graph) -> None:
    full = torch.arange(24.0).reshape(4, 6)
    got = call(place(full, _mesh(), [R], graph))
    want = call(full)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        compare(g.to_torch(), w, True, "split")


@pytest.mark.parametrize(("size", "fill"), [(0, -1), (2, -1), (5, -1), (7, 42)])
def test_nonzero_static(size: int, fill: int, graph: dtorch.Graph) -> None:
    full = torch.tensor([[0, 3, 0], [4, 0, 0], [1, 1, 0]])
    t = place(full, _mesh(), [S0], graph)
    for got in (
        t.nonzero_static(size=size, fill_value=fill),
        torch.nonzero_static(t, size=size, fill_value=fill),
    ):
        assert got.placements == [R]
        compare(got.to_torch(), torch.nonzero_static(full, size=size, fill_value=fill), True, "")


def test_prelu_and_igamma_methods(graph: dtorch.Graph) -> None:
    x = torch.randn(4, 3, generator=_G)
    mesh = _mesh()
    t = place(x, mesh, [S0], graph)
    weight = torch.tensor([0.25, 0.5, 2.0])
    compare(t.prelu(place(weight, mesh, [R], graph)).to_torch(), x.prelu(weight), True, "prelu")
    a, b = x.abs() + 0.1, x.abs().T.contiguous()[:, :1].T + 0.5
    ta, tb = place(a, mesh, [S0], graph), place(b, mesh, [R], graph)
    for name in ("igamma", "igammac"):
        compare(getattr(ta, name)(tb).to_torch(), getattr(a, name)(b), True, name)
        inplace = ta.clone()
        assert getattr(inplace, f"{name}_")(tb) is inplace
        compare(inplace.to_torch(), getattr(a.clone(), f"{name}_")(b), True, f"{name}_")


@pytest.mark.parametrize("dtype", [torch.complex64, torch.bool])
def test_index_reduce_of_dtypes_torch_has_no_kernel_for(dtype: torch.dtype, graph) -> None:  # type: ignore[no-untyped-def]
    x, src = torch.zeros(3, dtype=dtype), torch.ones(1, dtype=dtype)
    with pytest.raises(NotImplementedError):
        x.index_reduce(0, torch.tensor([1]), src, "mean")
    with pytest.raises(NotImplementedError, match="index_reduce"):
        dtorch.tensor(x).index_reduce(0, torch.tensor([1]), dtorch.tensor(src), "mean")


def test_index_reduce_refusals_have_torchs_classes(graph: dtorch.Graph) -> None:
    x, src = torch.zeros(3), torch.ones(1)
    for call, error in (
        (lambda a, s: a.index_reduce(0, torch.tensor([1]), s, 3), TypeError),
        (lambda a, s: a.index_reduce(0, torch.tensor([1, 2]), s, "prod"), RuntimeError),
    ):
        with pytest.raises(error):
            call(x, src)
        with pytest.raises(error):
            call(dtorch.tensor(x), dtorch.tensor(src))
    with pytest.raises(IndexError, match="Number of indices"):  # index_copy's is an IndexError
        dtorch.tensor(torch.zeros(3, 2)).index_copy(0, torch.tensor([1, 2]), dtorch.ones(1, 2))


def test_unsafe_split_takes_an_int_only_and_splits_need_a_dim(graph: dtorch.Graph) -> None:
    with pytest.raises(TypeError, match="must be int"):
        torch.unsafe_split(torch.arange(4), [1, 3])
    with pytest.raises(TypeError, match="must be int"):
        dtorch.arange(4).unsafe_split([1, 3])
    for t in (torch.tensor(1), dtorch.tensor(1)):
        with pytest.raises(RuntimeError, match="at least a 1-dimensional tensor"):
            t.unsafe_split_with_sizes([1])


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("mT", "This function is the identity"),
        ("mH", "Consider using x.conj"),
        ("adjoint", "Consider using x.conj"),
    ],
)
def test_matrix_transposes_of_0d_as_torch(name: str, text: str, graph: dtorch.Graph) -> None:
    full = torch.tensor(1 + 2j)
    with pytest.warns(UserWarning, match=text):
        got = getattr(dtorch.tensor(full), name)
        got = got() if name == "adjoint" else got
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = getattr(full, name)
        want = (want() if name == "adjoint" else want).resolve_conj()
    assert got.item() == want.item()


def test_full_tensor_is_dtensors_name_of_to_torch(graph: dtorch.Graph) -> None:
    full = torch.randn(5, 3, generator=_G)
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    t = place(full, mesh, [S0, dtorch.Partial()], graph)
    assert torch.equal(t.full_tensor(), t.to_torch())
    torch.testing.assert_close(t.full_tensor(grad_placements=None), full)
    with pytest.raises(ParamError, match="grad_placements=None"):
        t.full_tensor(grad_placements=[R, R])

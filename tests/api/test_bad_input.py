"""Bad arguments get a clear dtorch error naming what was wrong and what is accepted."""

from __future__ import annotations

import fractions
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import dtorch
import dtorch.nn.functional as DF
from dtorch.errors import (
    DtypeError,
    MeshError,
    ParamError,
    PlacementError,
    ScalarError,
    ShapeError,
)


def _nested() -> torch.Tensor:
    import warnings

    with warnings.catch_warnings():  # torch calls its strided nested tensors a prototype
        warnings.simplefilter("ignore", UserWarning)
        return torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda g: g.satisfy("x"), MeshError, "'x' is not a mesh or a device; accepted"),
        (lambda g: dtorch.init_device_mesh("cpu", 2).unbind(None), MeshError, "unbind: dims"),
        (lambda g: dtorch.zeros("a", graph=g), TypeError, "non-negative ints"),
        (lambda g: dtorch.zeros(2.5, graph=g), TypeError, "non-negative ints"),
        (lambda g: dtorch.ones(2, dtype="float32", graph=g), TypeError, "torch.dtype"),
        (lambda g: dtorch.randn(2, generator="x", graph=g), TypeError, "torch.Generator"),
        (lambda g: dtorch.full((2,), "x", graph=g), TypeError, "fill_value must be a number"),
        (lambda g: dtorch.ones(2, graph=g).to("tpu"), MeshError, "accepted"),
        (lambda g: dtorch.zeros(3, device="gpu", graph=g), MeshError, "accepted"),
        (lambda g: dtorch.ones(2, device_mesh="cpu", graph=g), MeshError, "DeviceMesh"),
        (
            lambda g: dtorch.ones(2, placements=[dtorch.Shard(0)] * 2, graph=g),
            PlacementError,
            "1-D mesh",
        ),
        (lambda g: dtorch.ones(3, graph=g).view(2, 2), ShapeError, "invalid for input of size 3"),
        (lambda g: dtorch.ones(3, graph=g)[5], IndexError, "out of bounds"),
        (lambda g: dtorch.ones(2, graph=g) + "a", TypeError, "dtorch.Tensor or a number"),
        (lambda g: dtorch.ones(2, graph=g).sum(dim=5), IndexError, r"sum: dimension 5 .* -1 to 0"),
        (lambda g: dtorch.ones(2, 3, graph=g).transpose(0, -3), IndexError, "transpose: dimension"),
        (lambda g: dtorch.cat([dtorch.ones(2, graph=g)], dim=1), IndexError, "cat: dimension 1"),
        (lambda g: dtorch.ones(2, 2, graph=g).softmax(2), IndexError, "softmax: dimension 2"),
        (lambda g: dtorch.randint(5, 2, (3,), graph=g), ValueError, "randint: low must be less"),
        (
            lambda g: dtorch.from_torch(torch.eye(2).to_sparse(), graph=g),
            ValueError,
            r"from_torch: .*sparse_coo.*to_dense\(\)",
        ),
        (
            lambda g: dtorch.from_torch(torch.empty(2, device="meta"), graph=g),
            ValueError,
            "from_torch: .*meta",
        ),
        (
            lambda g: dtorch.from_torch(_nested(), graph=g),
            ValueError,
            r"from_torch: a nested .*to_padded_tensor",
        ),
    ],
)
def test_bad_arguments_raise_clearly(
    call: Callable[[dtorch.Graph], Any], error: type[Exception], message: str, graph: dtorch.Graph
) -> None:
    with pytest.raises(error, match=message):
        call(graph)
    assert dtorch.ones(2, graph=graph).tolist() == [1.0, 1.0]  # the graph is unharmed


_T = torch.ones(2, 2)


@pytest.mark.parametrize(
    ("name", "call"),
    [
        ("conv2d", lambda x: dtorch.nn.functional.conv2d(x.view(1, 1, 2, 2), _T.view(1, 1, 2, 2))),
        ("embedding", lambda x: dtorch.nn.functional.embedding(x.long(), _T)),
        ("layer_norm", lambda x: dtorch.nn.functional.layer_norm(x, [2], torch.ones(2))),
        ("linear", lambda x: dtorch.nn.functional.linear(x, _T)),
        ("matmul", lambda x: dtorch.matmul(x, _T)),
        (
            "scaled_dot_product_attention",
            lambda x: dtorch.nn.functional.scaled_dot_product_attention(x, _T, x),
        ),
        ("batch_norm", lambda x: dtorch.nn.functional.batch_norm(x, torch.zeros(2), x[0])),
    ],
)
def test_torch_tensor_operands_refused_by_name(
    name: str, call: Callable[[dtorch.Tensor], Any], graph: dtorch.Graph
) -> None:
    """A torch tensor where an operator takes a dtorch tensor: a TypeError naming the operator,
    what it got and how to convert it (not an AttributeError from inside dtorch)."""
    x = dtorch.ones(2, 2, graph=graph)
    with pytest.raises(
        TypeError, match=rf"{name}: .*dtorch\.Tensor.* got torch\.Tensor.*from_torch"
    ):
        call(x)
    assert dtorch.ones(2, graph=graph).tolist() == [1.0, 1.0]


_BIG = 2**64


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda g: dtorch.ones(3, graph=g)[::_BIG], ParamError, f"getitem: index holds {_BIG}"),
        (lambda g: dtorch.ones(1, graph=g).expand(_BIG), ParamError, f"expand: shape holds {_BIG}"),
        (lambda g: dtorch.ones(1, graph=g).repeat(_BIG), ParamError, "repeat: repeats holds"),
        (
            lambda g: dtorch.ones(3, graph=g).repeat_interleave(2**63),
            ParamError,
            f"repeat_interleave: repeats holds {2**63}, beyond the int64s",
        ),
        (
            lambda g: dtorch.ones(0, graph=g).repeat_interleave(_BIG),
            ParamError,
            f"repeat_interleave: repeats holds {_BIG}",
        ),
        (lambda g: dtorch.ones(3, graph=g).chunk(_BIG), ParamError, f"chunk: chunks holds {_BIG}"),
        (
            lambda g: dtorch.ones(3, graph=g).repeat(2**62),
            ShapeError,
            rf"repeat: output shape \[{3 * 2**62}\] has a size beyond 2\*\*63-1",
        ),
        (lambda g: dtorch.zeros(2**63, graph=g), ShapeError, r"zeros: shape .* beyond 2\*\*63-1"),
        (lambda g: dtorch.full((3,), _BIG, graph=g), ScalarError, f"full: {_BIG} is beyond"),
        (lambda g: dtorch.full((3,), -(2**63) - 1, graph=g), ScalarError, f"full: {-(2**63) - 1}"),
        (
            lambda g: dtorch.arange(_BIG - 3, _BIG, dtype=torch.float64, graph=g),
            ScalarError,
            f"arange: {_BIG} is beyond",
        ),
    ],
)
def test_ints_beyond_64_bits_raise_at_the_call(
    call: Callable[[dtorch.Graph], Any], error: type[Exception], message: str, graph: dtorch.Graph
) -> None:
    """torch takes sizes, steps and counts as int64s, and numbers as int64s or uint64s; it
    refuses others at once, and so does dtorch (they could not reach worker processes)."""
    with pytest.raises(error, match=message):
        call(graph)
    assert dtorch.ones(2, graph=graph).tolist() == [1.0, 1.0]  # the graph is unharmed
    assert dtorch.full((1,), _BIG - 1, dtype=torch.uint64, graph=graph).tolist() == [_BIG - 1]


_F = dtorch.nn.functional
_NOT_A_TENSOR = r"must be a dtorch\.Tensor, got .*from_torch"


@pytest.mark.parametrize(
    ("name", "call"),
    [
        ("nanmean", lambda x: dtorch.nanmean("a")),
        ("std", lambda x: dtorch.std("a")),
        ("var", lambda x: dtorch.var(None)),
        ("norm", lambda x: dtorch.norm("a")),
        ("std_mean", lambda x: dtorch.std_mean("a")),
        ("var_mean", lambda x: dtorch.var_mean("a")),
        ("count_nonzero", lambda x: dtorch.count_nonzero(_T)),
        ("all", lambda x: dtorch.all("a", x)),
        ("amax", lambda x: dtorch.amax("a")),
        ("max", lambda x: dtorch.max("a", 0)),
        ("cumsum", lambda x: dtorch.cumsum("a", 0)),
        ("softmax", lambda x: dtorch.softmax("a")),
        ("softmax", lambda x: dtorch.softmax(None, 0)),
        ("log_softmax", lambda x: dtorch.log_softmax("a", 0)),
        ("log_softmax", lambda x: _F.log_softmax("a")),
        ("flatten", lambda x: dtorch.flatten("a")),
        ("permute", lambda x: dtorch.permute("a", 0)),
        ("squeeze", lambda x: dtorch.squeeze("a")),
        ("unsqueeze", lambda x: dtorch.unsqueeze("a", 0)),
        ("unbind", lambda x: dtorch.unbind("a")),
        ("split", lambda x: dtorch.split("a", 1)),
        ("chunk", lambda x: dtorch.chunk("a", 1)),
        ("tile", lambda x: dtorch.tile("a", 2)),
        ("reshape", lambda x: dtorch.reshape(_T, (4,))),
        ("tril", lambda x: dtorch.tril("a")),
        ("triu", lambda x: dtorch.triu(_T)),
        ("argsort", lambda x: dtorch.argsort("a")),
        ("flip", lambda x: dtorch.flip("a", 0)),
        ("fliplr", lambda x: dtorch.fliplr("a")),
        ("flipud", lambda x: dtorch.flipud(_T)),
        ("interpolate", lambda x: _F.interpolate("a", scale_factor=2)),
        ("adaptive_avg_pool2d", lambda x: _F.adaptive_avg_pool2d("a", 1)),
        ("embedding", lambda x: _F.embedding(x.long(), "a")),
        ("nonzero", lambda x: dtorch.nonzero(_T)),
        ("detach", lambda x: dtorch.detach(_T)),
        ("bitwise_not", lambda x: dtorch.bitwise_not(_T.long())),
        ("dropout", lambda x: _F.dropout(_T)),
        ("conv2d", lambda x: dtorch.conv2d(x.view(1, 1, 2, 2), "a")),
        ("linear", lambda x: _F.linear(x, "a", x)),
        ("redistribute_like", lambda x: x.redistribute_like("a")),
        ("scaled_dot_product_attention", lambda x: _F.scaled_dot_product_attention(x, x, "a")),
        (
            "tensors_redistribute_by_dict",
            lambda x: dtorch.tensors_redistribute_by_dict([x, "a"], {}),
        ),
        ("cat", lambda x: dtorch.cat([x, torch.ones(2, 2)])),
        ("stack", lambda x: dtorch.stack([x, "a"])),
    ],
)
def test_non_tensors_refused_by_the_function_called(
    name: str, call: Callable[[dtorch.Tensor], Any], graph: dtorch.Graph
) -> None:
    """A str, None or a torch tensor where a function takes a dtorch tensor: record's
    TypeError naming the function (not an AttributeError from reading its ndim first)."""
    x = dtorch.ones(2, 2, graph=graph)
    with pytest.raises(TypeError, match=rf"^{name}: .*{_NOT_A_TENSOR}"):
        call(x)
    assert dtorch.ones(2, graph=graph).tolist() == [1.0, 1.0]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda x: x.sum(dim=1.5), TypeError, r"sum: dim must be an int or a tuple/list of ints"),
        (lambda x: x.mean("a"), TypeError, r"mean: dim must be an int or a tuple/list of ints"),
        (lambda x: x.sum(dim=[0, "a"]), TypeError, r"sum: dim must be an int, got 'a'"),
        (lambda x: x.sum(dim=dtorch.tensor(1)), TypeError, r"sum: dim .* got a dtorch\.Tensor"),
        (lambda x: x.size("a"), TypeError, r"size\(\): argument 'dim' must be int, not str"),
        (lambda x: x.size({}), TypeError, r"size\(\): argument 'dim' must be int, not dict"),
        (lambda x: x.softmax({}), TypeError, r"softmax: dim must be an int, got \{\}"),
        (lambda x: x.unsqueeze({}), TypeError, r"unsqueeze: dim must be an int"),
        (lambda x: x.unbind({}), TypeError, r"unbind: dim must be an int"),
        (lambda x: x.transpose("a", 0), TypeError, r"transpose: dim must be an int"),
        (lambda x: x.softmax((0, 1)), TypeError, r"softmax: dim must be an int, got \(0, 1\)"),
        (
            lambda x: dtorch.tensor(1.0, graph=x.graph).size(0),
            IndexError,
            "size: Dimension specified as 0 but tensor has no dimensions",
        ),
        (
            lambda x: dtorch.tensor(1.0, graph=x.graph).unbind(),
            IndexError,
            "unbind: Dimension specified as 0 but tensor has no dimensions",
        ),
        (
            lambda x: dtorch.tensor(1.0, graph=x.graph).split(1),
            ShapeError,
            "split expects at least a 1-dimensional tensor",
        ),
        (
            lambda x: dtorch.tensor(1.0, graph=x.graph).chunk(1),
            ShapeError,
            "chunk expects at least a 1-dimensional tensor",
        ),
        (
            lambda x: dtorch.tensor(1.0, graph=x.graph).narrow(0, 0, 1),
            ShapeError,
            r"narrow\(\) cannot be applied to a 0-dim tensor",
        ),
        (lambda x: dtorch.flip(x, float("inf")), TypeError, r"flip: dims must be ints, got inf"),
        (lambda x: dtorch.flip(x, float("nan")), TypeError, r"flip: dims must be ints, got nan"),
        (lambda x: dtorch.flip(x, "abc"), TypeError, r"flip: dims must be ints, got 'abc'"),
        (lambda x: dtorch.flip(x, None), TypeError, r"flip: dims must be ints, got None"),
        (lambda x: x.permute(float("inf"), 0), TypeError, r"permute: dims must be ints"),
        (lambda x: x.reshape(float("inf")), TypeError, r"reshape: sizes must be ints"),
        (lambda x: x.tile(float("inf")), TypeError, r"tile: dims must be ints"),
        (lambda x: x.expand(float("inf"), 2), TypeError, r"expand: sizes must be ints"),
        (
            lambda x: dtorch.arange(float("inf"), graph=x.graph),
            ValueError,
            "arange: unsupported range: 0 -> inf",
        ),
        (dtorch.einsum, ValueError, r"einsum\(\): must specify the equation string"),
        (lambda x: dtorch.einsum(5, x), TypeError, "einsum: the first argument must be"),
        (lambda x: dtorch.einsum(x, [0, 60]), ValueError, r"not within the valid range \[0, 52\)"),
        (lambda x: dtorch.einsum(x, 5), TypeError, r"einsum\(\): a subscripts list must be"),
        (lambda x: dtorch.zeros(2, graph="g"), TypeError, r"graph must be a dtorch\.Graph"),
        (dtorch.cat, TypeError, "cat: expected a non-empty tuple or list"),
        (lambda x: dtorch.cat([]), RuntimeError, "cat: expected a non-empty tuple or list"),
        (
            lambda x: x.redistribute_by_dict(placements_dict=[dtorch.Shard(0)]),
            TypeError,
            "redistribute_by_dict: placements_dict must be a dict",
        ),
        (
            lambda x: x.redistribute_by_dict({0: dtorch.Shard(0)}),
            MeshError,
            "redistribute_by_dict: device_mesh must be a DeviceMesh.*placements_dict=",
        ),
        (
            lambda x: x.redistribute(placements=dtorch.Shard(0)),
            PlacementError,
            r"redistribute: .*did you mean \[Shard\(dim=0\)\]",
        ),
        (
            lambda x: x.redistribute(placements="S0"),
            PlacementError,
            r"redistribute: .*did you mean \['S0'\]",
        ),
        (lambda x: x.redistribute(placements=5), PlacementError, "redistribute: placements must"),
    ],
)
def test_bad_dims_sizes_and_arguments_raise_clearly(
    call: Callable[[dtorch.Tensor], Any], error: type[Exception], message: str, graph: dtorch.Graph
) -> None:
    x = dtorch.ones(2, 2, graph=graph)
    with pytest.raises(error, match=message):
        call(x)
    assert dtorch.ones(2, graph=graph).tolist() == [1.0, 1.0]  # the graph is unharmed


def test_int_like_dims_still_accepted(graph: dtorch.Graph) -> None:
    """numpy integers and 0-d integer torch tensors are dims, as in torch; whole floats
    remain sizes, as dtorch took them before."""
    import numpy as np

    x = dtorch.arange(6.0, graph=graph).reshape(2, 3)
    assert x.sum(dim=np.int64(1)).tolist() == [3.0, 12.0]
    assert x.sum(dim=torch.tensor(0)).tolist() == [3.0, 5.0, 7.0]
    assert x.softmax(np.int64(-1)).shape == (2, 3)
    assert x.reshape(3.0, 2).shape == (3, 2)
    assert x.flip(np.int64(0)).tolist() == [[3.0, 4.0, 5.0], [0.0, 1.0, 2.0]]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: dtorch.DeviceMesh("cpu", range(0)), r"the mesh is empty"),
        (lambda: dtorch.DeviceMesh("cpu", []), r"empty|at least one"),
        (lambda: dtorch.init_device_mesh("cpu", 2**70), r"init_device_mesh: .* at most"),
    ],
)
def test_bad_meshes_raise_mesh_errors(call: Callable[[], Any], message: str) -> None:
    with pytest.raises(MeshError, match=message):
        call()


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda x: dtorch.numel(torch.ones(2)), "numel: input 0"),
        (lambda x: dtorch.is_floating_point("a"), "is_floating_point: input 0"),
        (lambda x: x.view_as("a"), "view_as: other"),
        (lambda x: x.reshape_as(torch.ones(4)), "reshape_as: other"),
        (lambda x: x.expand_as(None), "expand_as: other"),
        (lambda x: dtorch.t("a"), "t: input 0"),
    ],
)
def test_methods_used_as_functions_refuse_non_tensors(
    call: Any, name: str, graph: dtorch.Graph
) -> None:
    x = dtorch.ones(2, 2, graph=graph)
    with pytest.raises(TypeError, match=f"^{name} must be a dtorch.Tensor"):
        call(x)
    assert (x + 1).tolist() == [[2.0, 2.0], [2.0, 2.0]]


def test_round_with_far_decimals_follows_torch(graph: dtorch.Graph) -> None:
    """``decimals`` past float range gives torch's nan (10.0 ** 400 overflowed in Python);
    past int64, a ParamError as torch refuses it."""
    x = dtorch.tensor([1.5, -2.25], graph=graph)
    for decimals in (400, -400):
        got = x.round(decimals=decimals).to_torch()
        assert torch.equal(got.isnan(), torch.tensor([1.5, -2.25]).round(decimals=decimals).isnan())
    with pytest.raises(ParamError, match="does not fit in int64"):
        x.round(decimals=2**70)


@pytest.mark.parametrize(
    "index",
    [
        np.int64(1),
        np.array([0, 2]),
        np.array([True, False, True]),
        (np.int64(1), np.int32(0)),
        slice(np.int64(1), np.int64(3)),
    ],
    ids=["np-int", "np-int-array", "np-bool-array", "np-tuple", "np-slice"],
)
def test_numpy_indices_index_as_in_torch(index: Any, graph: dtorch.Graph) -> None:
    """NumPy integers and arrays index a tensor as torch's do (refused: "unsupported
    index int64")."""
    full = torch.arange(6).view(3, 2)
    mesh = dtorch.init_device_mesh("cpu", 2)
    t = dtorch.from_torch(full, device_mesh=mesh, graph=graph)
    assert torch.equal(t[index].to_torch(), full[index])
    written, want = t.clone(), full.clone()
    written[index] = 7
    want[index] = 7
    assert torch.equal(written.to_torch(), want)


@pytest.mark.parametrize(
    "call",
    [lambda x: x.sum(True), lambda x: dtorch.sum(x, dim=(0, False)), lambda x: x.unsqueeze(True)],
    ids=["sum", "sum-tuple", "unsqueeze"],
)
def test_bool_dims_are_refused_as_torch_refuses_them(call: Any, graph: dtorch.Graph) -> None:
    """A bool is an int to Python but not to torch (``sum(x, True)`` was summed over dim 1)."""
    x = dtorch.ones(2, 3, graph=graph)
    with pytest.raises(TypeError, match=r"dim must be an int, got (True|False) \(bool\)"):
        call(x)
    assert x.sum(0, True).shape == (1, 3)  # keepdim stays a bool


@pytest.mark.parametrize("name", ["var", "std", "var_mean", "std_mean"])
def test_a_bool_dim_keyword_of_var_is_refused_as_torch_refuses_it(
    name: str, graph: dtorch.Graph
) -> None:
    """``x.var(True)`` is the legacy unbiased flag (as in torch); ``dim=True`` is refused."""
    full = torch.arange(6.0).reshape(2, 3)
    x = dtorch.from_torch(full, graph=graph)
    ours, theirs = getattr(dtorch, name), getattr(torch, name)
    with pytest.raises(TypeError):
        theirs(full, dim=True)
    with pytest.raises(TypeError, match=rf"^{name}: dim must be an int .* \(bool\)"):
        ours(x, dim=True)
    got, want = ours(x, False), theirs(full, False)
    if name.endswith("_mean"):
        got, want = got[0], want[0]
    torch.testing.assert_close(got.to_torch(), want)


_IDX = torch.zeros(2, 3, dtype=torch.long)


@pytest.mark.parametrize(
    "call",
    [
        lambda m, x: x.permute((True, 0)),
        lambda m, x: m.permute(x, [True, 0]),
        lambda m, x: x.flip((True,)),
        lambda m, x: x.reshape((True, 6)),
        lambda m, x: x.unflatten(1, (True, 3)),
        lambda m, x: x.chunk(True),
        lambda m, x: m.gather(x, True, _IDX if m is torch else dtorch.from_torch(_IDX)),
        lambda m, x: m.index_select(x, True, torch.tensor([0]) if m is torch else [0]),
        lambda m, x: x.split(True),
        lambda m, x: x.split([True, 1]),
        lambda m, x: x.narrow(1, True, 1),
        lambda m, x: x.narrow(1, 0, True),
    ],
    ids=[
        "permute", "permute-list", "flip", "reshape", "unflatten", "chunk", "gather", "index",
        "split", "split-sizes", "narrow-start", "narrow-length",
    ],
)  # fmt: skip
def test_bool_dims_and_sizes_are_refused_at_the_call(call: Any, graph: dtorch.Graph) -> None:
    """torch refuses a bool as a dim, a size or a count; dtorch took it as 0 or 1 (or failed
    only on the devices, as chunk(True) did)."""
    with pytest.raises(TypeError):
        call(torch, torch.arange(6.0).reshape(2, 3))
    x = dtorch.arange(6.0, graph=graph).reshape(2, 3)
    with pytest.raises(TypeError, match=r"must be (an int|ints), got (True|False) \(bool\)"):
        call(dtorch, x)


def test_functional_softmax_without_dim_warns_as_torch(graph: dtorch.Graph) -> None:
    """F.softmax(x) and F.log_softmax(x): torch's implicit dim with its deprecation warning
    naming the function; dtorch.softmax(x) keeps dtorch's silent implicit dim."""
    import warnings

    full = torch.arange(6.0).reshape(2, 3)
    x = dtorch.from_torch(full, graph=graph)
    for name in ("softmax", "log_softmax"):
        with pytest.warns(UserWarning, match=f"Implicit dimension choice for {name} "):
            want = getattr(torch.nn.functional, name)(full)
        with pytest.warns(UserWarning, match=f"Implicit dimension choice for {name} ") as rec:
            got = getattr(dtorch.nn.functional, name)(x)
        assert rec[0].filename == __file__  # _stacklevel: the caller's line, as torch's
        torch.testing.assert_close(got.to_torch(), want)
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax") as rec:
        dtorch.nn.Softmax()(x)
    assert rec[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.testing.assert_close(dtorch.softmax(x).to_torch(), full.softmax(1))


@pytest.mark.parametrize("dtype", [float, int, bool, complex])
def test_python_types_are_dtypes_as_in_torch(dtype: type, graph: dtorch.Graph) -> None:
    full = torch.arange(4).reshape(2, 2)
    x = dtorch.from_torch(full, graph=graph)
    pairs = [
        (dtorch.zeros(2, dtype=dtype), torch.zeros(2, dtype=dtype)),
        (dtorch.ones(2, dtype=dtype), torch.ones(2, dtype=dtype)),
        (dtorch.full((2,), 1, dtype=dtype), torch.full((2,), 1, dtype=dtype)),
        (dtorch.zeros_like(x, dtype=dtype), torch.zeros_like(full, dtype=dtype)),
        (x.new_ones(3, dtype=dtype), full.new_ones(3, dtype=dtype)),
        (x.to(dtype), full.to(dtype)),
        (x.to(dtype=dtype), full.to(dtype=dtype)),
        (x.to("cpu", dtype), full.to("cpu", dtype)),
        (x.sum(dtype=dtype), full.sum(dtype=dtype)),
    ]
    if dtype in (float, int):  # torch has no bool cumsum and no complex arange
        pairs.append((x.cumsum(1, dtype=dtype), full.cumsum(1, dtype=dtype)))
        pairs.append((dtorch.arange(3, dtype=dtype), torch.arange(3, dtype=dtype)))
    if dtype is float:
        pairs.append((x.softmax(1, dtype=dtype), full.softmax(1, dtype=dtype)))
    for got, want in pairs:
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        torch.testing.assert_close(got.to_torch(), want)


def test_python_type_dtypes_in_layers_and_views(graph: dtorch.Graph) -> None:
    assert dtorch.nn.Linear(2, 2, dtype=float).weight.dtype == torch.float64
    full = torch.arange(4.0, dtype=torch.float64)
    assert torch.equal(dtorch.from_torch(full, graph=graph).view(int).to_torch(), full.view(int))
    with pytest.raises(TypeError, match=r"zeros: dtype must be a torch\.dtype .* float, int"):
        dtorch.zeros(2, dtype=np.float32, graph=graph)


@pytest.mark.parametrize(
    ("call", "where"),
    [
        (lambda x: x + 1j, ""),
        (lambda x: 1j * x, ""),
        (lambda x: x.masked_fill(x > 0, 1j), ""),
        (lambda x: dtorch.full((2,), 1j, graph=x.graph), "full: fill_value: "),
        (lambda x: x.clone().fill_(1j), "fill_: value: "),
        (lambda x: x.clamp(1j), "clamp: bounds: "),
        (lambda x: x.__setitem__(0, 1j), "setitem: value: "),
        (lambda x: x + np.complex128(1j), ""),
    ],
)
def test_complex_scalars_are_refused_saying_why(call: Any, where: str, graph: dtorch.Graph) -> None:
    """dtorch's scalars are real; complex values go in complex tensors, which work."""
    x = dtorch.ones(2, graph=graph)
    with pytest.raises(TypeError, match=rf"^{where}1j is not a real number; .*complex tensor"):
        call(x)
    want = torch.ones(2) + 1j
    torch.testing.assert_close((x + dtorch.tensor(1j, graph=graph)).to_torch(), want)


def test_arange_of_a_dtorch_tensor_is_refused_at_the_call(graph: dtorch.Graph) -> None:
    """torch.arange(torch.tensor(5)) works; a dtorch bound's value is on the devices and the
    shape depends on it, so it is refused at the call (it failed at the fetch)."""
    with pytest.raises(TypeError, match=r"arange: .*got a dtorch\.Tensor.*t\.item\(\)"):
        dtorch.arange(dtorch.tensor(5, graph=graph), graph=graph)
    assert dtorch.arange(torch.tensor(3), graph=graph).tolist() == torch.arange(3).tolist()


@pytest.mark.parametrize("training", [False, True])
def test_batch_norm_negative_eps_is_refused_at_the_call(
    training: bool, graph: dtorch.Graph
) -> None:
    full = torch.randn(4, 2, 3, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="eps must be"):
        torch.nn.functional.batch_norm(
            full, torch.zeros(2), torch.ones(2), training=training, eps=-1.0
        )
    x = dtorch.from_torch(full, graph=graph)
    mean, var = dtorch.zeros(2, graph=graph), dtorch.ones(2, graph=graph)
    with pytest.raises(ParamError, match=r"^batch_norm: eps must be non-negative, but got -1\.0"):
        _F.batch_norm(x, mean, var, training=training, eps=-1.0)
    assert mean.tolist() == [0.0, 0.0]  # nothing recorded: the running mean is unchanged


def test_masked_fill_of_a_partial_by_a_tensor_value(graph: dtorch.Graph) -> None:
    """A Partial input filled with a 0-d value: linear when the value is Partial too (the
    parts sum to the filled sum), refused with the reason when it is Replicate."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    full, mask_full = torch.arange(4.0), torch.tensor([True, False, True, False])
    x = dtorch.from_torch(full, device_mesh=mesh, placements=[dtorch.Partial()], graph=graph)
    mask = dtorch.from_torch(mask_full, device_mesh=mesh, graph=graph)
    part = dtorch.from_torch(
        torch.tensor(5.0), device_mesh=mesh, placements=[dtorch.Partial()], graph=graph
    )
    got = x.masked_fill(mask, part)
    assert got.placements == [dtorch.Partial()]
    assert torch.equal(got.to_torch(), full.masked_fill(mask_full, 5.0))
    replicated = dtorch.tensor(5.0, device_mesh=mesh, graph=graph)
    with pytest.raises(PlacementError, match=r"^masked_fill: the input is Partial .* 2 times"):
        x.masked_fill(mask, replicated)
    want = full.masked_fill(mask_full, 5.0)
    assert torch.equal(
        x.redistribute(placements=[dtorch.Replicate()]).masked_fill(mask, replicated).to_torch(),
        want,
    )


def test_bool_clamp_and_negative_integer_powers_are_refused_at_the_call(
    graph: dtorch.Graph,
) -> None:
    """torch refuses both; dtorch gave a bool clamp by bool tensors (as maximum/minimum) and
    refused an integer to a negative power only when the value was fetched."""
    full = torch.tensor([True, False])
    b = dtorch.from_torch(full, graph=graph)
    with pytest.raises(NotImplementedError):
        torch.clamp(full, min=full, max=full)
    with pytest.raises(NotImplementedError, match="clamp_cpu"):  # an UnsupportedDtypeError
        b.clamp(min=b, max=b)
    for bounds in ({"min": b}, {"max": b}):  # one bool tensor bound: torch's clamp_min/max
        assert torch.equal(b.clamp(**bounds).to_torch(), full.clamp(**dict.fromkeys(bounds, full)))
    with pytest.raises(RuntimeError, match="negative integer powers"):
        torch.tensor([2, 3]) ** -1
    with pytest.raises(DtypeError, match="negative integer powers"):
        dtorch.from_torch(torch.tensor([2, 3]), graph=graph) ** -1
    assert torch.equal(b.clamp(min=1).to_torch(), full.clamp(min=1))  # an int bound is fine
    ints = dtorch.from_torch(torch.tensor([2, 3]), graph=graph)
    assert torch.equal((ints**-1.0).to_torch(), torch.tensor([2, 3]) ** -1.0)


# (dtorch call on x [5, 6] float / i [4] int64 / b [4] bool, the same call in torch)
_TORCH_CLASS_CASES: list[tuple[str, Callable[..., Any], Callable[..., Any]]] = [
    ("int mean", lambda x, i, b: i.mean(), lambda x, i, b: i.mean()),
    ("bool - bool", lambda x, i, b: b - b, lambda x, i, b: b - b),
    ("-bool", lambda x, i, b: -b, lambda x, i, b: -b),
    ("float mask", lambda x, i, b: x.masked_fill(x, 0.0), lambda x, i, b: x.masked_fill(x, 0.0)),
    ("int ** -3", lambda x, i, b: i**-3, lambda x, i, b: i**-3),
    ("reshape", lambda x, i, b: x.reshape(7, -1), lambda x, i, b: x.reshape(7, -1)),
    ("expand", lambda x, i, b: x.expand(3, 6), lambda x, i, b: x.expand(3, 6)),
    ("permute", lambda x, i, b: x.permute(0, 0), lambda x, i, b: x.permute(0, 0)),
    ("chunk(0)", lambda x, i, b: x.chunk(0), lambda x, i, b: x.chunk(0)),
    ("matmul", lambda x, i, b: x @ x, lambda x, i, b: x @ x),
    ("broadcast", lambda x, i, b: x + x[:4], lambda x, i, b: x + x[:4]),
    ("item", lambda x, i, b: x.item(), lambda x, i, b: x.item()),
    ("clamp()", lambda x, i, b: x.clamp(), lambda x, i, b: x.clamp()),
    ("cat([])", lambda x, i, b: dtorch.cat([]), lambda x, i, b: torch.cat([])),
    ("sum(dim=5)", lambda x, i, b: x.sum(5), lambda x, i, b: x.sum(5)),
    ("Linear(-1)", lambda x, i, b: dtorch.nn.Linear(-1, 2), lambda x, i, b: torch.nn.Linear(-1, 2)),
    ("int // 0", lambda x, i, b: i // 0, lambda x, i, b: i // 0),
    ("int % 0", lambda x, i, b: i % 0, lambda x, i, b: i % 0),
    ("trunc 0", lambda x, i, b: i.div(0, rounding_mode="trunc"),
     lambda x, i, b: i.div(0, rounding_mode="trunc")),
    ("int //= 0", lambda x, i, b: i.__ifloordiv__(0), lambda x, i, b: i.__ifloordiv__(0)),
    ("full nan int", lambda x, i, b: dtorch.full((2,), float("nan"), dtype=torch.int64),
     lambda x, i, b: torch.full((2,), float("nan"), dtype=torch.int64)),
    ("full 300 uint8", lambda x, i, b: dtorch.full((3,), 300, dtype=torch.uint8),
     lambda x, i, b: torch.full((3,), 300, dtype=torch.uint8)),
    ("full 2**63", lambda x, i, b: dtorch.full((2,), 2**63, dtype=torch.int64),
     lambda x, i, b: torch.full((2,), 2**63, dtype=torch.int64)),
    ("full_like 7e4", lambda x, i, b: dtorch.full_like(x.half(), 7e4),
     lambda x, i, b: torch.full_like(x.half(), 7e4)),
    ("zeros 2**62", lambda x, i, b: dtorch.zeros(2**62), lambda x, i, b: torch.zeros(2**62)),
    ("zeros(-1)", lambda x, i, b: dtorch.zeros(-1), lambda x, i, b: torch.zeros(-1)),
    ("new_full 300", lambda x, i, b: i.byte().new_full((2,), 300),
     lambda x, i, b: i.byte().new_full((2,), 300)),
    ("fill_ 300", lambda x, i, b: i.byte().fill_(300), lambda x, i, b: i.byte().fill_(300)),
    ("arange step 0", lambda x, i, b: dtorch.arange(0, 10, 0),
     lambda x, i, b: torch.arange(0, 10, 0)),
    ("arange sign", lambda x, i, b: dtorch.arange(10, 0, 1),
     lambda x, i, b: torch.arange(10, 0, 1)),
    ("arange nan", lambda x, i, b: dtorch.arange(float("nan")),
     lambda x, i, b: torch.arange(float("nan"))),
    ("layer_norm f64 weight", lambda x, i, b: DF.layer_norm(x, (6,), _f64(x, 6)),
     lambda x, i, b: F.layer_norm(x, (6,), torch.ones(6, dtype=torch.float64))),
    ("group_norm f64 bias", lambda x, i, b: DF.group_norm(x, 3, None, _f64(x, 6)),
     lambda x, i, b: F.group_norm(x, 3, None, torch.ones(6, dtype=torch.float64))),
    ("batch_norm f64 stats", lambda x, i, b: DF.batch_norm(x, _f64(x, 6), _f64(x, 6)),
     lambda x, i, b: F.batch_norm(x, *[torch.ones(6, dtype=torch.float64)] * 2)),
    ("batch_norm mixed", lambda x, i, b: DF.batch_norm(x.half(), *[_f64(x, 6).float()] * 2,
                                                      _f64(x, 6).half()),
     lambda x, i, b: F.batch_norm(x.half(), *[torch.ones(6)] * 2, torch.ones(6).half())),
]  # fmt: skip


def _f64(x: dtorch.Tensor, n: int) -> dtorch.Tensor:
    """A float64 vector of ones beside ``x`` (a norm's parameter of another dtype)."""
    return dtorch.ones(n, dtype=torch.float64, device_mesh=x.device_mesh, graph=x.graph)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_norms_take_float32_parameters_beside_a_half_input(
    dtype: torch.dtype, graph: dtorch.Graph
) -> None:
    """torch's mixed form, which the dtype check keeps: a 16-bit input, float32 parameters."""
    full = torch.randn(4, 6, 3).to(dtype)
    ones, zeros = torch.ones(6), torch.zeros(6)
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = dtorch.from_torch(full, device_mesh=mesh, placements=[dtorch.Shard(0)], graph=graph)
    v = [dtorch.from_torch(t, device_mesh=mesh, graph=graph) for t in (ones, zeros)]
    got = DF.batch_norm(x, v[1], v[0], v[0], v[1]).to_torch()
    torch.testing.assert_close(got, F.batch_norm(full, zeros, ones, ones, zeros))
    got = DF.group_norm(x, 3, v[0], v[1]).to_torch()
    torch.testing.assert_close(got, F.group_norm(full, 3, ones, zeros))
    # training: the batch statistics in float32, as the kernel takes them beside float32
    # parameters (they were of the input's dtype, and the kernel refused them at the fetch)
    reference = torch.nn.BatchNorm2d(6).train()
    with graph.as_default():
        norm = dtorch.nn.BatchNorm2d(6, device_mesh=mesh).train()
    for _ in range(2):
        got = norm(x.unsqueeze(-1)).to_torch()
        torch.testing.assert_close(got, reference(full.unsqueeze(-1)))
    torch.testing.assert_close(norm.running_var.to_torch(), reference.running_var)
    with pytest.raises(DtypeError, match="one dtype for all"):  # as torch: all, or none
        DF.batch_norm(x, v[1], v[0], v[0].to(dtype), training=True)


def test_a_batch_norm_of_another_mesh_is_refused_before_its_statistics_change(
    graph: dtorch.Graph,
) -> None:
    """A bare zip() ValueError (eval), or a MeshError naming an add (training) after the
    running statistics were read; now the MeshError of any operator, before anything."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x = dtorch.randn(2, 4, 3, 3, device_mesh=mesh, graph=graph)
    with graph.as_default():
        norm = dtorch.nn.BatchNorm2d(4)
    for mode in (norm.eval, norm.train):
        mode()
        with pytest.raises(dtorch.errors.MeshError, match="batch_norm: inputs lie on different"):
            norm(x)
    assert norm.running_mean.tolist() == [0.0] * 4


def test_a_fill_refused_leaves_the_tensor_as_it_was(graph: dtorch.Graph) -> None:
    """x.fill_(300) of a uint8 x failed at the fetch and left x failed for good."""
    x = dtorch.zeros(3, dtype=torch.uint8, graph=graph)
    with pytest.raises(RuntimeError, match="value cannot be converted"):
        x.fill_(300)
    assert x.tolist() == [0, 0, 0] and x.fill_(-1).tolist() == [255] * 3


def test_fills_torch_holds_are_kept(graph: dtorch.Graph) -> None:
    """The fill check is torch's: what it converts (wrapping, truncating), dtorch does."""
    for fill, dtype in (
        (-1, torch.uint8),
        (2.5, torch.int64),
        (5, torch.bool),
        (1e39, torch.float64),
    ):
        got = dtorch.full((3,), fill, dtype=dtype, graph=graph).to_torch()
        assert torch.equal(got, torch.full((3,), fill, dtype=dtype)), (fill, dtype)


def test_an_integer_division_by_zero_is_refused_at_the_call(graph: dtorch.Graph) -> None:
    """torch refuses it at the call and the tensor keeps its value; dtorch raised at the
    fetch, and an in-place one (``i //= 0``) left ``i`` failed for good."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    i = dtorch.arange(6, device_mesh=mesh, placements=[dtorch.Shard(0)], graph=graph)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        i //= 0
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        i.remainder_(0)
    assert i.tolist() == list(range(6))
    assert ((i + 0.0) // 0).isinf().sum().item() == 5  # a float quotient by 0 is inf (or nan)
    assert (i // 4).tolist() == [0, 0, 0, 0, 1, 1]


@pytest.mark.parametrize(
    ("name", "ours", "theirs"), _TORCH_CLASS_CASES, ids=[case[0] for case in _TORCH_CLASS_CASES]
)
def test_refusals_are_of_the_class_torch_raises(
    name: str, ours: Callable[..., Any], theirs: Callable[..., Any], graph: dtorch.Graph
) -> None:
    """Code written for torch catches dtorch's refusals: each is an instance of the exception
    class torch raises for the same call on the full tensors (mostly RuntimeError), and a
    DTorchError."""
    full = (torch.arange(30.0).reshape(5, 6), torch.arange(4), torch.tensor([True, False] * 2))
    mesh = dtorch.init_device_mesh("cpu", 2)
    placed = [dtorch.from_torch(t, device_mesh=mesh, graph=graph) for t in full]
    with pytest.raises(Exception) as expected:
        theirs(*full)
    with pytest.raises(expected.type) as got:
        ours(*placed)
    assert isinstance(got.value, dtorch.errors.DTorchError), got.value


# (name, call(x, w, F) on x (2, 4, 9, 9) and w (6, 4, 3, 3) with F dtorch's or torch's
# functional): numpy scalars where torch takes them. They reached operator params, which the
# codec sends as ints and strs only: the fetch failed in process mode.
_NUMPY_ARGUMENTS: list[tuple[str, Callable[..., Any]]] = [
    ("gelu", lambda x, w, F: F.gelu(x, approximate=np.str_("tanh"))),
    ("interpolate mode", lambda x, w, F: F.interpolate(x, scale_factor=2, mode=np.str_("area"))),
    ("interpolate size", lambda x, w, F: F.interpolate(x, size=(np.int64(5), 7), mode="bilinear")),
    ("interpolate scale", lambda x, w, F: F.interpolate(x, scale_factor=np.float32(2.0))),
    ("conv2d", lambda x, w, F: F.conv2d(x, w, stride=np.int64(2), dilation=(np.int32(1), 1))),
    ("max_pool2d", lambda x, w, F: F.max_pool2d(x, np.int64(2))),
    ("embedding", lambda x, w, F: F.embedding(torch.tensor([[0, 1], [3, 1]]), w.reshape(6, 36),
                                              padding_idx=np.int64(1))),
]  # fmt: skip


@pytest.mark.parametrize(("name", "call"), _NUMPY_ARGUMENTS, ids=[c[0] for c in _NUMPY_ARGUMENTS])
def test_numpy_scalars_as_arguments_run_on_both_runners(
    name: str, call: Callable[..., Any], graph: dtorch.Graph
) -> None:
    torch.manual_seed(0)
    x, w = torch.randn(2, 4, 9, 9) * 3, torch.randn(6, 4, 3, 3)
    mesh = dtorch.init_device_mesh("cpu", 2)
    ours = [dtorch.from_torch(t, device_mesh=mesh, graph=graph) for t in (x, w)]
    want = call(x, w, torch.nn.functional)
    got = call(*ours, dtorch.nn.functional).to_torch()
    torch.testing.assert_close(got, want)


#: (name, call(t, F) on a (4, 6) tensor t with F dtorch's or torch's functional): numpy
#: numbers where torch takes them (dtorch refused them: "k must be an int, got int64").
_NUMPY_NUMBERS: list[tuple[str, Callable[..., Any]]] = [
    ("topk", lambda t, F: t.topk(np.int64(2)).values),
    ("round", lambda t, F: t.round(decimals=np.int64(1))),
    ("cumsum", lambda t, F: t.cumsum(np.int64(1))),
    ("std", lambda t, F: t.std(correction=np.int64(0))),
    ("repeat_interleave", lambda t, F: t.repeat_interleave(np.int64(2))),
    ("sort", lambda t, F: t.sort(np.int64(0)).values),
    ("normalize", lambda t, F: F.normalize(t, p=np.float32(1.0))),
    ("avg_pool2d", lambda t, F: F.avg_pool2d(t[None], 2, divisor_override=np.int64(3))),
]  # fmt: skip


@pytest.mark.parametrize(("name", "call"), _NUMPY_NUMBERS, ids=[c[0] for c in _NUMPY_NUMBERS])
def test_numpy_numbers_as_arguments(
    name: str, call: Callable[..., Any], graph: dtorch.Graph
) -> None:
    full = torch.randn(4, 6, generator=torch.Generator().manual_seed(3))
    mesh = dtorch.init_device_mesh("cpu", 2)
    t = dtorch.from_torch(full, device_mesh=mesh, graph=graph)  # Replicate: any op takes it
    torch.testing.assert_close(call(t, dtorch.nn.functional).to_torch(), call(full, F))


def test_numpy_integers_name_placements_and_mesh_dims(graph: dtorch.Graph) -> None:
    assert dtorch.Shard(np.int64(1)) == dtorch.Shard(1)
    assert hash(dtorch.Shard(np.int32(1))) == hash(dtorch.Shard(1))
    mesh = dtorch.init_device_mesh("cpu", (2,), mesh_dim_names=("a",))
    t = dtorch.arange(4.0, device_mesh=mesh, graph=graph)
    moved = t.redistribute_by_dict(placements_dict={np.int64(0): dtorch.Shard(0)})
    assert moved.placements == [dtorch.Shard(0)] and moved.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_int_of_many_elements_and_huge_numbers_say_what_is_wrong(graph: dtorch.Graph) -> None:
    x = dtorch.ones(3, graph=graph)
    with pytest.raises(ValueError, match="only one element tensors can be converted"):
        int(x)
    with pytest.raises(ValueError, match="only one element tensors can be converted"):
        float(x)
    with pytest.raises(ValueError, match=r"beyond the ints torch takes as a number"):
        x + 2**70
    assert int(dtorch.ones(1, graph=graph)) == 1 and float(x.sum()) == 3.0


#: Calls with one flag argument ``v`` that torch takes as a Python bool only.
_FLAG_CALLS: dict[str, Callable[[Any, Any, Any], Any]] = {
    "sum keepdim": lambda m, t, v: m.sum(t, 0, keepdim=v),
    "amax keepdim": lambda m, t, v: m.amax(t, 0, keepdim=v),
    "max keepdim": lambda m, t, v: m.max(t, 0, keepdim=v),
    "std keepdim": lambda m, t, v: m.std(t, 0, keepdim=v),
    "var unbiased": lambda m, t, v: m.var(t, 0, unbiased=v),
    "logsumexp keepdim": lambda m, t, v: m.logsumexp(t, 0, keepdim=v),
    "norm keepdim": lambda m, t, v: m.norm(t, 2, 0, keepdim=v),
    "sort descending": lambda m, t, v: m.sort(t, 0, descending=v),
    "sort stable": lambda m, t, v: m.sort(t, stable=v, dim=0),
    "argsort descending": lambda m, t, v: m.argsort(t, 0, descending=v),
    "topk largest": lambda m, t, v: m.topk(t, 2, largest=v),
    "topk sorted": lambda m, t, v: m.topk(t, 2, sorted=v),
    "scatter_reduce include_self": lambda m, t, v: m.scatter_reduce(
        t, 0, _index_like(m, t), t[:1], "sum", include_self=v
    ),
}


def _index_like(module: Any, t: Any) -> Any:
    index = torch.zeros(1, 4, dtype=torch.long)
    return index if module is torch else dtorch.from_torch(index, device_mesh=t.device_mesh)


@pytest.mark.parametrize("value", [1, 0, "yes", 1.0], ids=repr)
@pytest.mark.parametrize("name", list(_FLAG_CALLS))
def test_flags_take_bools_only_as_in_torch(name: str, value: Any, graph: dtorch.Graph) -> None:
    """A flag given as an int, a float or a string is refused with a TypeError naming it, as
    torch refuses it (``bool(value)`` took ``descending="no"`` as True)."""
    call = _FLAG_CALLS[name]
    full = torch.randn(3, 4)
    with pytest.raises(TypeError):
        call(torch, full, value)
    t = dtorch.from_torch(full, device_mesh=dtorch.init_device_mesh("cpu", 2))
    with pytest.raises(TypeError, match=name.split()[1]):
        call(dtorch, t, value)
    for flag in (True, False, np.bool_(True)):  # numpy bools: accepted, as dtorch takes them
        want = _values(call(torch, full, bool(flag)))
        torch.testing.assert_close(_values(call(dtorch, t, flag)), want)  # std: rounding


def _values(result: Any) -> torch.Tensor:
    first = result[0] if isinstance(result, tuple) else result
    return first if isinstance(first, torch.Tensor) else first.to_torch()


def test_attention_flags_take_bools_only(graph: dtorch.Graph) -> None:
    """``is_causal``/``enable_gqa`` of scaled_dot_product_attention: bools only, as torch's."""
    q = torch.randn(1, 2, 3, 4)
    dq = dtorch.from_torch(q, device_mesh=dtorch.init_device_mesh("cpu", 2))
    for flag in ("is_causal", "enable_gqa"):
        with pytest.raises(TypeError):
            F.scaled_dot_product_attention(q, q, q, **{flag: 1})
        with pytest.raises(TypeError, match=flag):
            DF.scaled_dot_product_attention(dq, dq, dq, **{flag: 1})


@pytest.mark.parametrize("other", [np.ones(3), 1j], ids=["ndarray", "complex"])
def test_equality_with_operands_refused_elsewhere_is_refused(
    other: Any, graph: dtorch.Graph
) -> None:
    """torch compares a numpy array or a complex number elementwise; dtorch refuses them
    for ``+`` and ``<`` with a TypeError, and now for ``==``/``!=`` too, on either side
    (they fell back to Python's identity test: ``x == np.ones(3)`` was False)."""
    full = torch.arange(6.0).reshape(2, 3)
    assert isinstance(full == other, torch.Tensor)
    x = dtorch.from_torch(full, device_mesh=dtorch.init_device_mesh("cpu", 2))
    for compare in (lambda: x == other, lambda: x != other, lambda: other == x):
        with pytest.raises(TypeError):
            compare()


def test_equality_with_what_torch_does_not_compare_is_false(graph: dtorch.Graph) -> None:
    """``None``, a string, a list or a dict is not compared elementwise by torch: False."""
    full = torch.arange(3.0)
    x = dtorch.from_torch(full, device_mesh=dtorch.init_device_mesh("cpu", 2))
    for other in (None, "a", [0.0, 1.0, 2.0], {1: 2}, fractions.Fraction(1, 1)):
        assert (full == other) is False
        assert (x == other) is False and (x != other) is True


def _deep_list() -> list[Any]:
    deep: list[Any] = [0]
    for _ in range(3000):
        deep = [deep]
    return deep


def _self_holding_list() -> list[Any]:
    looped: list[Any] = [0]
    looped.append(looped)
    return looped


@pytest.mark.parametrize("make", [_deep_list, _self_holding_list], ids=["deep", "self-holding"])
@pytest.mark.parametrize(
    "call",
    [
        lambda m, t, data: t[data],
        lambda m, t, data: t.__setitem__(data, 1.0),
        lambda m, t, data: m.tensor(data),
    ],
    ids=["getitem", "setitem", "tensor"],
)
def test_lists_nested_past_torchs_dims_raise_torchs_error(
    make: Callable[[], list[Any]], call: Any, graph: dtorch.Graph
) -> None:
    """A list nested 3,000 deep, or one holding itself, raises the error class torch raises
    (a RecursionError escaped dtorch's own walk of the list)."""
    data = make()
    with pytest.raises(Exception) as expected:
        call(torch, torch.arange(6.0), data)
    with pytest.raises(Exception) as got:
        call(dtorch, dtorch.arange(6.0), data)
    assert type(got.value) is type(expected.value)


#: Number arguments given a string: (the argument's name in dtorch's message, the call).
_NUMBER_ARGUMENTS: list[tuple[str, Callable[[Any, Any, Any], Any]]] = [
    ("pad: value", lambda m, f, t: f.pad(t, (1, 1), value="x")),
    ("leaky_relu: negative_slope", lambda m, f, t: f.leaky_relu(t, "a")),
    ("elu: alpha", lambda m, f, t: f.elu(t, "a")),
    ("arange: a bound", lambda m, f, t: m.arange("a")),
    ("arange: a bound", lambda m, f, t: m.arange(0, "a")),
    ("rtol", lambda m, f, t: t.allclose(t, t)),
    ("dropout: p", lambda m, f, t: f.dropout(t, "a")),
    ("layer_norm: eps", lambda m, f, t: f.layer_norm(t, (3,), eps="a")),
    ("group_norm: eps", lambda m, f, t: f.group_norm(t.reshape(2, 3, 1), 1, eps="a")),
    ("rms_norm: eps", lambda m, f, t: f.rms_norm(t, (3,), eps="a")),
    ("batch_norm: eps", lambda m, f, t: f.batch_norm(t, None, None, training=True, eps="a")),
]


@pytest.mark.parametrize(("what", "call"), _NUMBER_ARGUMENTS, ids=[w for w, _ in _NUMBER_ARGUMENTS])
def test_number_arguments_given_other_values_name_the_argument(
    what: str, call: Callable[[Any, Any, Any], Any], graph: dtorch.Graph
) -> None:
    """A string (or a tensor) where a number belongs is torch's TypeError, naming the
    function and the argument (``float("a")`` raised a ValueError naming neither)."""
    full = torch.randn(2, 3)
    with pytest.raises(TypeError):
        call(torch, F, full)
    with pytest.raises(TypeError, match=what):
        call(dtorch, DF, dtorch.from_torch(full, device_mesh=dtorch.init_device_mesh("cpu", 2)))


_POOL_FLAGS: list[tuple[str, Callable[[Any, Any, Any], Any]]] = [
    ("ceil_mode", lambda f, x, v: f.max_pool1d(x, 3, ceil_mode=v)),
    ("count_include_pad", lambda f, x, v: f.avg_pool1d(x, 3, count_include_pad=v)),
    ("ceil_mode", lambda f, x, v: f.max_pool2d(x.unsqueeze(0), 2, ceil_mode=v)),
    ("ceil_mode", lambda f, x, v: f.avg_pool2d(x.unsqueeze(0), 2, ceil_mode=v)),
    ("count_include_pad", lambda f, x, v: f.avg_pool2d(x.unsqueeze(0), 2, count_include_pad=v)),
]


@pytest.mark.parametrize(("flag", "call"), _POOL_FLAGS, ids=[f for f, _ in _POOL_FLAGS])
def test_pooling_flags_take_bools_only(
    flag: str, call: Callable[[Any, Any, Any], Any], graph: dtorch.Graph
) -> None:
    """The pools' flags are bools, as torch's (``ceil_mode="no"`` ran with ceil_mode on);
    ``return_indices`` is taken by its truth, as torch's functional dispatches on it."""
    full = torch.randn(2, 4, 6)
    x = dtorch.from_torch(full, device_mesh=dtorch.init_device_mesh("cpu", 2))
    with pytest.raises(TypeError):
        call(F, full, "no")
    with pytest.raises(TypeError, match=flag):
        call(DF, x, "no")


@pytest.mark.parametrize(
    "index", ["a", b"x", 1.5, object()], ids=["str", "bytes", "float", "object"]
)
def test_unsupported_indices_raise_torchs_class(index: Any, graph: dtorch.Graph) -> None:
    """A string index is torch's TypeError, a float or another object its IndexError."""
    with pytest.raises(Exception) as expected:
        torch.zeros(3)[index]
    with pytest.raises(Exception) as got:
        dtorch.zeros(3)[index]
    assert type(got.value) is type(expected.value) or issubclass(
        type(got.value), type(expected.value)
    )


_UNIMPLEMENTED: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("softmax of int64", lambda f, m: f.softmax(m.arange(6).view(2, 3), 1)),
    ("gelu of int64", lambda f, m: f.gelu(m.arange(6).view(2, 3))),
    ("shift of float", lambda f, m: m.ones(3) << 1),
    ("reflect pad of 2 on 4-D", lambda f, m: f.pad(m.ones(1, 1, 2, 2), (1, 1), "reflect")),
    ("bilinear of 3-D", lambda f, m: f.interpolate(m.ones(1, 1, 3), size=3, mode="bilinear")),
    ("median of bool", lambda f, m: m.ones(3, dtype=torch.bool).median()),
]


@pytest.mark.parametrize("call", [c for _, c in _UNIMPLEMENTED], ids=[n for n, _ in _UNIMPLEMENTED])
def test_what_torch_has_not_implemented_is_a_not_implemented_error(
    call: Callable[[Any, Any], Any], graph: dtorch.Graph
) -> None:
    """Where torch raises NotImplementedError (no kernel for the dtype, a mode of that
    shape), dtorch's refusal is one too, as well as its DtypeError or ShapeError (it was
    only those: ``except NotImplementedError`` missed it)."""
    with pytest.raises(NotImplementedError):
        call(F, torch)
    with pytest.raises(NotImplementedError):
        call(DF, dtorch)


@pytest.mark.parametrize(
    "call",
    [lambda m, f, b: b.trace(), lambda m, f, b: m.mv(b, b[0]), lambda m, f, b: f.glu(b.int(), 0)],
    ids=["trace", "mv", "glu of int"],
)
def test_hand_written_no_kernel_refusals_are_not_implemented_errors(
    call: Callable[[Any, Any, Any], Any], graph: dtorch.Graph
) -> None:
    """The composites that refuse a dtype torch has no kernel for say so as torch does, with a
    NotImplementedError (they raised a plain DtypeError)."""
    full = torch.ones(2, 2, dtype=torch.bool)
    with pytest.raises(NotImplementedError):
        call(torch, F, full)
    with pytest.raises(NotImplementedError):
        call(dtorch, DF, dtorch.from_torch(full, graph=graph))


def test_placement_and_size_refusals_name_the_call(graph: dtorch.Graph) -> None:
    """API.md: a placement an operator cannot take is refused naming the operator; so are
    the placements and sizes given to a creation function, redistribute and to."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = dtorch.ones(4, device_mesh=mesh, graph=graph)
    s1, s5, two = [dtorch.Shard(1)], [dtorch.Shard(5)], [dtorch.Shard(0), dtorch.Shard(1)]
    cases: list[tuple[Callable[[], Any], type[Exception], str]] = [
        (lambda: dtorch.from_torch(torch.ones(3), device_mesh=mesh, placements=s1, graph=graph),
         PlacementError, "from_torch: Shard(1) is out of range for a 1-D tensor"),
        (lambda: dtorch.tensor([1.0], device_mesh=mesh, placements=s1, graph=graph),
         PlacementError, "from_torch: Shard(1) is out of range"),
        (lambda: dtorch.randn(3, device_mesh=mesh, placements=s1, graph=graph),
         PlacementError, "randn: Shard(1) is out of range"),
        (lambda: dtorch.zeros(3, device_mesh=mesh, placements=two, graph=graph),
         PlacementError, "zeros: 2 placements"),
        (lambda: x.redistribute(mesh, s5), PlacementError, "redistribute: Shard(5) is out of"),
        (lambda: x.redistribute(mesh, two), PlacementError, "redistribute: 2 placements"),
        (lambda: x.redistribute_by_dict(placements_dict={0: dtorch.Shard(4)}), PlacementError,
         "redistribute: Shard(4) is out of range"),
        (lambda: dtorch.ones(-1, graph=graph), ShapeError, "ones: sizes must be non-negative"),
        (lambda: dtorch.empty(size=(2, -3), graph=graph), ShapeError, "empty: sizes must be"),
        (lambda: dtorch.zeros(1.5, graph=graph), TypeError, "zeros: sizes must be non-negative"),
    ]  # fmt: skip
    for call, error, words in cases:
        with pytest.raises(error, match=f"^{re.escape(words)}"):
            call()

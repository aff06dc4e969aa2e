"""Dtypes at the edges of torch's kernels, against torch on the full tensor: complex values
that must not be cast to real before ``abs`` (and what is built on it), numbers that promote
as numbers in ``xlogy``/``logaddexp``, and the calls torch refuses: each is refused at the
call (not on the devices), in torch's exception class family (an UnsupportedDtypeError where
torch raises NotImplementedError); thread and process mode."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import dtorch
import dtorch.nn.functional as DF
from dtorch.errors import DTorchError, PlacementError, UnsupportedDtypeError
from tests.api.ops_harness import S0, R, place

pytestmark = pytest.mark.timeout(180)

_C = torch.tensor([3 + 4j, 2j, 1 + 0j, -1 - 1j, 0.5 - 2j, -3 + 0j], dtype=torch.complex64)


def _mesh() -> dtorch.DeviceMesh:
    return dtorch.init_device_mesh("cpu", 2)


def _as_torch(want: Callable[[], Any], got: Callable[[], Any], exact: bool = False) -> None:
    """``got()`` (dtorch) gives ``want()``'s (torch's) values, or, where torch raises, raises
    at the call a dtorch error of torch's class."""
    try:
        expected = want()
    except Exception as error:  # torch's refusal: the same class family, at the call
        with pytest.raises(type(error)) as raised:
            got()
        assert isinstance(raised.value, DTorchError), repr(raised.value)
        return
    result = got()
    actual = result.to_torch() if isinstance(result, dtorch.Tensor) else result
    assert actual.dtype == expected.dtype
    if exact:
        assert torch.equal(actual, expected), (actual, expected)
    else:
        torch.testing.assert_close(actual, expected, equal_nan=True)


# --- 1. complex values are not cast to real ------------------------------------------------


@pytest.mark.parametrize("placement", [R, S0])
def test_complex_abs_and_what_builds_on_it(placement: Any, graph: dtorch.Graph) -> None:
    """``abs`` of complex is the modulus (the shards were cast to float32 first, dropping the
    imaginary part); var, std, norm, l1_loss and normalize inherit it."""
    t = place(_C, _mesh(), [placement], graph)
    other = place(_C.flip(0), _mesh(), [placement], graph)
    _as_torch(_C.abs, t.abs)
    _as_torch(lambda: torch.abs(_C), lambda: abs(t))
    _as_torch(_C.var, t.var)
    _as_torch(_C.std, t.std)
    _as_torch(lambda: torch.var_mean(_C)[0], lambda: dtorch.var_mean(t)[0])
    _as_torch(lambda: torch.std_mean(_C)[0], lambda: dtorch.std_mean(t)[0])
    _as_torch(_C.norm, t.norm)
    _as_torch(lambda: F.l1_loss(_C, _C.flip(0)), lambda: DF.l1_loss(t, other))
    _as_torch(lambda: F.normalize(_C.view(2, 3), dim=1), lambda: DF.normalize(t.view(2, 3), dim=1))


def test_in_place_abs_of_complex_is_refused_at_the_call(graph: dtorch.Graph) -> None:
    """torch: "In-place abs is not supported for complex tensors" (dtorch wrote the modulus
    back as a complex value); the tensor is unchanged."""
    t = place(_C, _mesh(), [S0], graph)
    _as_torch(lambda: _C.clone().abs_(), t.abs_)
    assert torch.equal(t.to_torch(), _C)


# --- 2. numbers promote as numbers -----------------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "number"),
    [(torch.uint8, -3), (torch.uint8, 300), (torch.int8, 2**40), (torch.int8, -0.5),
     (torch.float32, 2**40), (torch.float16, 0.1), (torch.bool, -2), (torch.int64, True)],
)  # fmt: skip
def test_xlogy_and_logaddexp_with_a_number(
    dtype: torch.dtype, number: Any, graph: dtorch.Graph
) -> None:
    """The number is not wrapped into the tensor's dtype first (``xlogy(u8, -3)`` is NaN,
    not ``log(253)``); torch's ``logaddexp`` takes tensors only, so its 0-d tensor of the
    number is the oracle (integer tensors refused, as torch's kernel has none)."""
    full = torch.tensor([0, 1, 2, 5, 7, 3]).to(dtype)
    t = place(full, _mesh(), [S0], graph)
    _as_torch(lambda: torch.xlogy(full, number), lambda: dtorch.xlogy(t, number))
    _as_torch(lambda: torch.xlogy(number, full), lambda: dtorch.xlogy(number, t))
    n = torch.tensor(number)
    _as_torch(lambda: torch.logaddexp(full, n), lambda: dtorch.logaddexp(t, number))
    _as_torch(lambda: torch.logaddexp(n, full), lambda: dtorch.logaddexp(number, t))


# --- 3. refused at the call where torch's kernels refuse --------------------------------------


@pytest.mark.parametrize("equation", ["ij,jk", "ij,ij->i", "ij,ij->", "ij,ij->ij", "ij,ik->i"])
@pytest.mark.parametrize("other", [torch.bool, torch.float32])
def test_einsum_of_bool_as_torch(equation: str, other: torch.dtype, graph: dtorch.Graph) -> None:
    """A contraction torch runs through ``bmm`` has no bool kernel (NotImplementedError, also
    beside another dtype); the others compute."""
    a = torch.tensor([[True, False, True], [False, True, True], [True, True, False]])
    b = a.T.to(other)
    ta, tb = (place(x, _mesh(), [R], graph) for x in (a, b))
    _as_torch(lambda: torch.einsum(equation, a, b), lambda: dtorch.einsum(equation, ta, tb), True)
    sa, sb = (place(x, _mesh(), [S0], graph) for x in (a, b))
    if other == torch.bool and equation in ("ij,jk", "ij,ij->i"):
        _as_torch(lambda: torch.einsum(equation, a, b), lambda: dtorch.einsum(equation, sa, sb))


@pytest.mark.parametrize("other", [torch.uint8, torch.float32, torch.bool])
def test_batched_products_of_bool_as_torch(other: torch.dtype, graph: dtorch.Graph) -> None:
    """``bmm`` (and a batched matmul) of bool has no kernel, mixed with another dtype too
    (NotImplementedError before the dtype check); a float first operand is torch's
    RuntimeError."""
    a = torch.ones(2, 2, 3, dtype=torch.bool)
    b = torch.ones(2, 3, 2, dtype=other)
    ta, tb = (place(x, _mesh(), [S0], graph) for x in (a, b))
    _as_torch(lambda: torch.bmm(a, b), lambda: dtorch.bmm(ta, tb))
    _as_torch(lambda: torch.matmul(a, b), lambda: dtorch.matmul(ta, tb))
    _as_torch(lambda: torch.bmm(b, a), lambda: dtorch.bmm(tb, ta))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.bool, torch.uint8, torch.float16])
def test_pools_of_complex_as_torch(dtype: torch.dtype, graph: dtorch.Graph) -> None:
    """max_pool2d has no complex kernel (it failed on the devices)."""
    x = torch.arange(32).reshape(1, 2, 4, 4).to(dtype)
    t = place(x, _mesh(), [S0], graph)
    for name in ("max_pool2d", "avg_pool2d", "adaptive_avg_pool2d"):
        _as_torch(lambda n=name: getattr(F, n)(x, 2), lambda n=name: getattr(DF, n)(t, 2), True)


_MODES = {
    "nearest": 3, "nearest-exact": 4, "linear": 3, "bilinear": 4, "bicubic": 4,
    "trilinear": 5, "area": 4,
}  # fmt: skip


@pytest.mark.parametrize("mode", sorted(_MODES))
def test_interpolate_of_uint8_as_torch(mode: str, graph: dtorch.Graph) -> None:
    """uint8 has kernels for the nearest modes, bilinear and bicubic only; linear, trilinear
    and area failed on the devices."""
    shape = (2, 2, *[4] * (_MODES[mode] - 2))
    x = torch.arange(torch.Size(shape).numel()).reshape(shape).to(torch.uint8)
    t = place(x, _mesh(), [S0], graph)
    _as_torch(
        lambda: F.interpolate(x, scale_factor=2, mode=mode),
        lambda: DF.interpolate(t, scale_factor=2, mode=mode),
        True,
    )


@pytest.mark.parametrize(
    ("bounds", "dtype"),
    [((0, 4), torch.bool), ((0, 4), torch.complex64), ((0, 4), torch.uint16),
     ((0, 3, 0.5), torch.int64), ((0, 2.5, 0.9), torch.int64), ((0, 3.5, 1), torch.int64),
     ((0, 3, 1.5), torch.int64), ((-0.5, 3, 1), torch.int64), ((0.5, 3.7, 1), torch.int64),
     ((0, 3.5, 1), torch.int32), ((0, 3, 1.5), torch.uint8), ((0, 3, 1.5), torch.float16)],
)  # fmt: skip
def test_arange_dtypes_as_torch(bounds: tuple[Any, ...], dtype: torch.dtype, graph: Any) -> None:
    """No arange kernel for bool, complex or the wide unsigned dtypes; int64 takes the bounds
    as int64 first (a step of 0.5 becomes 0: "step must be nonzero"), the others do not."""
    _as_torch(
        lambda: torch.arange(*bounds, dtype=dtype),
        lambda: dtorch.arange(*bounds, dtype=dtype, device_mesh=_mesh()),
        True,
    )


# --- 4. computed where torch raises ------------------------------------------------------------


@pytest.mark.parametrize("placement", [R, S0])
def test_nan_reductions_of_complex_are_refused(placement: Any, graph: dtorch.Graph) -> None:
    """torch: "nansum on CPU does not support complex inputs" (nanmean too)."""
    t = place(_C, _mesh(), [placement], graph)
    f = torch.ones(6)
    tf = place(f, _mesh(), [placement], graph)
    _as_torch(_C.nansum, t.nansum)
    _as_torch(lambda: torch.nansum(_C, 0), lambda: dtorch.nansum(t, 0))
    _as_torch(_C.nanmean, t.nanmean)
    _as_torch(lambda: f.nansum(dtype=torch.complex64), lambda: tf.nansum(dtype=torch.complex64))
    i = torch.arange(6)  # an integer input holds no NaN: summed into complex as sum does
    ti = place(i, _mesh(), [placement], graph)
    _as_torch(lambda: i.nansum(dtype=torch.complex64), lambda: ti.nansum(dtype=torch.complex64))


# --- 5. torch's exception class ---------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.bool, torch.int64, torch.uint8, torch.complex64])
def test_norms_of_non_floats_are_not_implemented(dtype: torch.dtype, graph: dtorch.Graph) -> None:
    """layer_norm, group_norm, rms_norm and batch_norm (both modes) have no kernel for these:
    NotImplementedError, as torch's (rms_norm takes complex)."""
    x = torch.arange(16).reshape(2, 2, 4).to(dtype)
    t = place(x, _mesh(), [S0], graph)
    stats = [place(torch.zeros(2), _mesh(), [R], graph), place(torch.ones(2), _mesh(), [R], graph)]
    mean, var = torch.zeros(2), torch.ones(2)
    _as_torch(lambda: F.layer_norm(x, (4,)), lambda: DF.layer_norm(t, (4,)))
    _as_torch(lambda: F.group_norm(x, 1), lambda: DF.group_norm(t, 1))
    _as_torch(lambda: F.rms_norm(x, (4,)), lambda: DF.rms_norm(t, (4,)))
    _as_torch(lambda: F.batch_norm(x, mean, var), lambda: DF.batch_norm(t, *stats))
    _as_torch(
        lambda: F.batch_norm(x, None, None, training=True),
        lambda: DF.batch_norm(t, None, None, training=True),
    )


@pytest.mark.parametrize(("a", "b"), [(torch.bool, torch.bool), (torch.bool, torch.float32),
                                      (torch.float32, torch.bool)])  # fmt: skip
def test_conv_of_bool_is_not_implemented(a: torch.dtype, b: torch.dtype, graph: Any) -> None:
    """A bool input has no conv kernel (NotImplementedError); a bool weight beside a float
    input is torch's dtype mismatch (RuntimeError)."""
    x1, w1 = torch.ones(2, 2, 5, dtype=a), torch.ones(3, 2, 3, dtype=b)
    x2, w2 = torch.ones(2, 2, 5, 5, dtype=a), torch.ones(3, 2, 3, 3, dtype=b)
    t1, t2 = (place(x, _mesh(), [S0], graph) for x in (x1, x2))
    v1, v2 = (place(w, _mesh(), [R], graph) for w in (w1, w2))
    _as_torch(lambda: F.conv1d(x1, w1), lambda: DF.conv1d(t1, v1))
    _as_torch(lambda: F.conv2d(x2, w2), lambda: DF.conv2d(t2, v2))


def test_clamp_min_max_with_a_complex_tensor_are_not_implemented(graph: dtorch.Graph) -> None:
    """torch's clamp_min/clamp_max of a complex tensor operand: "maximum_cpu" has no complex
    kernel (NotImplementedError; ``maximum`` itself is a RuntimeError)."""
    f = torch.ones(4)
    c = f.to(torch.complex64)
    tf, tc = (place(x, _mesh(), [S0], graph) for x in (f, c))
    _as_torch(lambda: torch.clamp_min(f, c), lambda: dtorch.clamp_min(tf, tc))
    _as_torch(lambda: torch.clamp_min(c, f), lambda: dtorch.clamp_min(tc, tf))
    _as_torch(lambda: torch.clamp_max(c, c), lambda: dtorch.clamp_max(tc, tc))
    _as_torch(
        lambda: torch.clamp_min(c, torch.tensor(1.0)), lambda: tc.clamp_min(torch.tensor(1.0))
    )
    _as_torch(lambda: torch.maximum(c, c), lambda: dtorch.maximum(tc, tc))


@pytest.mark.parametrize("dtype", [torch.int16, torch.uint8, torch.bool, torch.float32])
def test_repeat_interleave_repeats_dtype(dtype: torch.dtype, graph: dtorch.Graph) -> None:
    """Repeats other than int32/int64 have no kernel: NotImplementedError."""
    x = torch.arange(3.0)
    t = place(x, _mesh(), [R], graph)
    repeats = torch.ones(3, dtype=dtype)
    _as_torch(lambda: x.repeat_interleave(repeats), lambda: t.repeat_interleave(repeats))


@pytest.mark.parametrize(("dtype", "reduce"), [(torch.bool, "mean"), (torch.complex64, "amax"),
                                               (torch.complex64, "prod")])  # fmt: skip
def test_scatter_reduce_dtypes(dtype: torch.dtype, reduce: str, graph: dtorch.Graph) -> None:
    """scatter_reduce's kernels lack these reductions of these dtypes: NotImplementedError."""
    x = torch.ones(4, dtype=dtype)
    index = torch.tensor([0, 1, 0, 1])
    t = place(x, _mesh(), [R], graph)
    _as_torch(
        lambda: x.scatter_reduce(0, index, x, reduce),
        lambda: t.scatter_reduce(0, place(index, _mesh(), [R], graph), t, reduce),
    )


@pytest.mark.parametrize(
    "dtypes",
    [(torch.complex64,) * 3, (torch.int64,) * 3, (torch.float32, torch.float16, torch.float32)],
)
def test_attention_dtypes(dtypes: tuple[torch.dtype, ...], graph: dtorch.Graph) -> None:
    """Complex q, k, v: no softmax kernel (NotImplementedError); integers and mixed dtypes
    are torch's RuntimeError."""
    q, k, v = (torch.ones(1, 2, 3, 4, dtype=d) for d in dtypes)
    tq, tk, tv = (place(x, _mesh(), [S0], graph) for x in (q, k, v))
    _as_torch(
        lambda: F.scaled_dot_product_attention(q, k, v),
        lambda: DF.scaled_dot_product_attention(tq, tk, tv),
    )


# --- 6. computed as torch does ------------------------------------------------------------------


@pytest.mark.parametrize("placement", [R, S0])
def test_dot_of_complex(placement: Any, graph: dtorch.Graph) -> None:
    """``dot`` of complex vectors is the plain sum of products (no conjugate), as torch's."""
    t = place(_C, _mesh(), [placement], graph)
    other = place(_C.flip(0), _mesh(), [placement], graph)
    _as_torch(lambda: torch.dot(_C, _C.flip(0)), lambda: dtorch.dot(t, other))


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.ones(2).bitwise_not(),
        lambda m: ~m.ones(2, dtype=torch.complex64),
        lambda m: m.ones(2, dtype=torch.int64).round(decimals=1),
        lambda m: m.clamp(m.ones(2, dtype=torch.complex64), m.ones(2)),
        lambda m: m.clamp(m.ones(2), m.ones(2, dtype=torch.complex64), None),
    ],
    ids=["bitwise_not-float", "invert-complex", "round-int", "clamp-complex", "clamp-bound"],
)
def test_elementwise_refusals_are_torchs_not_implemented(call: Any, graph: dtorch.Graph) -> None:
    """torch raises NotImplementedError (``~`` a TypeError): dtorch's UnsupportedDtypeError is
    both (they were a TypeError and DtypeErrors)."""
    with pytest.raises((NotImplementedError, TypeError)):
        call(torch)
    with pytest.raises(UnsupportedDtypeError):
        call(dtorch)


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint64, torch.float8_e5m2])
def test_partial_of_a_dtype_torch_cannot_add_is_refused_at_the_call(
    dtype: torch.dtype, graph: dtorch.Graph
) -> None:
    """torch has no add for these dtypes, so a Partial of one could never be summed: it is
    refused where it would be made (it failed on the devices at the first read); Shard and
    Replicate work, and an empty Partial is Replicate (nothing to sum)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    full = torch.arange(4).to(dtype)
    message = rf"could never be summed \(torch adds no {dtype} tensors\)"
    with pytest.raises(PlacementError, match=r"^from_torch: .*" + message):
        dtorch.from_torch(full, device_mesh=mesh, placements=[dtorch.Partial()], graph=graph)
    with pytest.raises(PlacementError, match=r"^zeros: .*" + message):
        dtorch.zeros(4, dtype=dtype, device_mesh=mesh, placements=[dtorch.Partial()], graph=graph)
    sharded = dtorch.from_torch(full, device_mesh=mesh, placements=[dtorch.Shard(0)], graph=graph)
    with pytest.raises(PlacementError, match=r"^redistribute: .*" + message):
        sharded.redistribute(mesh, [dtorch.Partial()])
    assert torch.equal(sharded.redistribute(mesh, [dtorch.Replicate()]).to_torch(), full)
    empty = dtorch.empty(
        4, dtype=dtype, device_mesh=mesh, placements=[dtorch.Partial()], graph=graph
    )
    assert empty.placements == [dtorch.Replicate()]

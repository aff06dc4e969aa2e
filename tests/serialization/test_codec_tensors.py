"""Tensors of every plain dtype and odd shapes, buffer aliasing, generators, refusals."""

from __future__ import annotations

import math

import pytest
import torch

from dtorch.errors import DeserializationError, SerializationError
from dtorch.ir.dtypes import DTYPE_TO_CODE, PLAIN_DTYPES
from dtorch.ir.mesh import init_device_mesh
from dtorch.ir.opkind import CreateKind
from dtorch.ir.params import CreateParam, DropoutParam
from dtorch.ir.placement import Shard
from dtorch.serialization import assert_structural_equal, deserialize, serialize

_DTYPES = sorted(PLAIN_DTYPES, key=DTYPE_TO_CODE.__getitem__)


def _sample(dtype: torch.dtype, shape: tuple[int, ...], seed: int = 0) -> torch.Tensor:
    """A tensor of ``dtype`` whose bytes are random (0/1 for bool)."""
    count = math.prod(shape)
    generator = torch.Generator().manual_seed(seed)
    raw = torch.randint(0, 256, (count * dtype.itemsize,), dtype=torch.uint8, generator=generator)
    if dtype is torch.bool:
        raw = raw % 2
    return raw.view(dtype).reshape(shape)


def _same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality (NaN payloads of float8 etc. included), checked through uint8 views."""
    flat = [t.contiguous().reshape(-1).view(torch.uint8) for t in (a, b)]
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(*flat)


@pytest.mark.parametrize("dtype", _DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2), (5,), (2, 3, 4)], ids=str)
def test_every_plain_dtype_and_shape_round_trips(
    dtype: torch.dtype, shape: tuple[int, ...]
) -> None:
    tensor = _sample(dtype, shape, seed=len(shape))
    restored = deserialize(serialize(tensor))
    assert type(restored) is torch.Tensor and restored.dtype is dtype
    assert _same_bytes(tensor, restored)
    assert restored.is_contiguous()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.complex64, torch.bool])
def test_non_contiguous_and_view_inputs(dtype: torch.dtype) -> None:
    base = _sample(dtype, (6, 8), seed=3)
    for tensor in (base.T, base[::2, 1::3], base[2:4], base.expand(2, 6, 8)[1]):
        restored = deserialize(serialize(tensor))
        assert _same_bytes(tensor.contiguous(), restored)
        assert restored.shape == tensor.shape


def test_conjugate_negative_and_grad_tensors_keep_their_values() -> None:
    z = torch.tensor([1 + 2j, -3j], dtype=torch.complex64)
    assert torch.equal(deserialize(serialize(z.conj())), z.conj().resolve_conj())
    assert torch.equal(deserialize(serialize(torch._neg_view(z))), -z)
    w = torch.ones(3, requires_grad=True)
    restored = deserialize(serialize(w))
    assert not restored.requires_grad and torch.equal(restored, torch.ones(3))


@pytest.mark.timeout(60)
def test_large_tensor() -> None:
    tensor = torch.arange(4 * 1024 * 1024, dtype=torch.float32).reshape(1024, 4096)
    payload = serialize(tensor)
    assert len(payload) < tensor.numel() * 4 + 4096
    assert torch.equal(deserialize(payload), tensor)


def test_decoded_tensors_own_their_bytes_by_default() -> None:
    payload = bytearray(serialize([torch.zeros(4), torch.arange(3)]))
    first, second = deserialize(payload)
    first.fill_(7.0)
    again = deserialize(payload)
    assert torch.equal(again[0], torch.zeros(4)) and torch.equal(second, torch.arange(3))


def test_aliasing_writable_buffers_is_opt_in_and_zero_copy() -> None:
    payload = bytearray(serialize([torch.zeros(4), torch.ones(2, dtype=torch.float64)]))
    a, b = deserialize(payload, alias_tensors=True)
    a.fill_(5.0)
    assert torch.equal(deserialize(payload)[0], torch.full((4,), 5.0))
    assert a.data_ptr() % 64 == b.data_ptr() % 64  # both aligned alike inside the payload
    del a, b


def test_read_only_input_is_never_aliased() -> None:
    payload = serialize(torch.zeros(3))
    tensor = deserialize(payload, alias_tensors=True)
    tensor.fill_(1.0)  # a private copy: the bytes object is untouched
    assert torch.equal(deserialize(payload), torch.zeros(3))


def test_shared_tensor_is_written_once() -> None:
    tensor = torch.randn(64)
    payload = serialize([tensor, tensor])
    assert len(payload) < 64 * 4 * 2
    x, y = deserialize(payload)
    assert x is y and torch.equal(x, tensor)


def test_quantized_sparse_and_meta_tensors_are_refused() -> None:
    quantized = torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.qint8)
    with pytest.raises(SerializationError, match=r"torch\.qint8"):
        serialize(quantized)
    with pytest.raises(SerializationError, match="sparse"):
        serialize(torch.eye(2).to_sparse())
    with pytest.raises(SerializationError, match="meta"):
        serialize(torch.empty(2, device="meta"))


@pytest.mark.parametrize("draws_before", [0, 1, 7])
def test_generator_state_round_trips(draws_before: int) -> None:
    generator = torch.Generator().manual_seed(1234)
    for _ in range(draws_before):
        torch.randn(3, generator=generator)
    restored = deserialize(serialize(generator))
    assert type(restored) is torch.Generator and restored is not generator
    expected = torch.randn(5, generator=generator), torch.rand(2, generator=generator)
    got = torch.randn(5, generator=restored), torch.rand(2, generator=restored)
    assert torch.equal(expected[0], got[0]) and torch.equal(expected[1], got[1])


def test_corrupt_generator_state_is_a_deserialization_error() -> None:
    from dtorch.serialization.catalog import DEFAULT_REGISTRY
    from dtorch.serialization.tensors import restore_generator

    assert torch.Generator in DEFAULT_REGISTRY.by_type
    with pytest.raises(DeserializationError):
        restore_generator("cpu", b"\x00" * 10)
    with pytest.raises(DeserializationError, match="not accepted"):
        restore_generator("meta", b"")
    with pytest.raises(DeserializationError, match="not a device"):
        restore_generator("cpu:x:y", b"")


def test_params_with_tensors_and_generators() -> None:
    generator = torch.Generator().manual_seed(5)
    value = torch.arange(6.0).reshape(2, 3)
    mesh = init_device_mesh("cpu", 2)
    create = CreateParam(
        CreateKind.FROM_TENSOR, (2, 3), torch.float32, mesh, (Shard(0),), (), generator, value
    )
    dropout = DropoutParam(0.25, True, generator)
    restored_create, restored_dropout = deserialize(serialize((create, dropout)))
    assert_structural_equal((create, dropout), (restored_create, restored_dropout))
    assert restored_create.generator is restored_dropout.generator
    assert torch.equal(restored_create.value, value)

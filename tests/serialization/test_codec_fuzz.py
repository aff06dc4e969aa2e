"""Bounded fuzzing: any bytes give a value or a DeserializationError, never anything else.

The long campaign is ``benchmarks/fuzz_codec.py --count 1000000``.
"""

from __future__ import annotations

import contextlib
import random
import tracemalloc
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dtorch.errors import DeserializationError
from dtorch.serialization import deserialize
from dtorch.serialization.fuzz import MUTATORS, reframe, sample_payloads, split

_SETTINGS = settings(
    max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)


SAMPLES = sample_payloads()


def check(data: Any) -> None:
    """Deserialize ``data``: a value or a DeserializationError pass, anything else fails."""
    with contextlib.suppress(DeserializationError):
        deserialize(data)


@pytest.mark.timeout(60)
@_SETTINGS
@given(st.binary(max_size=256))
def test_random_bytes(data: bytes) -> None:
    check(data)
    check(bytearray(data))


@pytest.mark.timeout(60)
@_SETTINGS
@given(st.binary(max_size=256))
def test_random_documents_behind_a_valid_frame(document: bytes) -> None:
    check(reframe(document))
    check(reframe(document, b"\x00" * 64))


_MSGPACK_TREES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=8)
    | st.sampled_from(["ir.Span", "py.list", "torch.Tensor", "ir.Operator"]),
    lambda children: st.lists(children, max_size=4),
    max_leaves=24,
)  # fmt: skip


@pytest.mark.timeout(60)
@_SETTINGS
@given(_MSGPACK_TREES)
def test_well_formed_msgpack_with_random_structure(document: Any) -> None:
    import msgpack

    check(reframe(msgpack.packb(document)))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sample", range(len(SAMPLES)))
def test_every_truncation(sample: int) -> None:
    payload = SAMPLES[sample]
    for end in range(len(payload)):
        with pytest.raises(DeserializationError):
            deserialize(payload[:end])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sample", range(len(SAMPLES)))
def test_every_single_bit_flip_in_the_document(sample: int) -> None:
    version, document, data = split(SAMPLES[sample])
    for position in range(len(document)):
        flipped = bytearray(document)
        flipped[position] ^= 1 << (position % 8)
        check(reframe(bytes(flipped), data, version))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(MUTATORS))
def test_mutators(name: str) -> None:
    rng = random.Random(name)
    for i in range(150):
        check(MUTATORS[name](rng, SAMPLES[i % len(SAMPLES)]))


@pytest.mark.timeout(60)
def test_absurd_declared_lengths_allocate_nothing_large() -> None:
    cases = [
        reframe(b"\x93\x90\x91\x93\x00\xce\xff\xff\xff\xff\x90\x90"),  # a group of 4G nodes
        reframe(b"\xdd\xff\xff\xff\xff"),  # an array of 4G items
        reframe(b"\xc6\x7f\xff\xff\xff"),  # 2 GiB of bin
        reframe(b"\x93\x91\x92\xaaty.Replicate\x90\x91\x93\x00\xce\x00\x10\x00\x00\x90\x90"),
        b"DTSZ\x01\x00\x00\x00" + b"\xff" * 16,  # a frame claiming exabytes
    ]
    tracemalloc.start()
    try:
        for data in cases:
            tracemalloc.reset_peak()
            with pytest.raises(DeserializationError):
                deserialize(data)
            assert tracemalloc.get_traced_memory()[1] < 1_000_000
    finally:
        tracemalloc.stop()


@pytest.mark.timeout(60)
def test_deep_nesting_is_refused_without_recursion_errors() -> None:
    for depth in (1_000, 100_000, 1_000_000):
        with pytest.raises(DeserializationError):
            deserialize(reframe(b"\x91" * depth + b"\x00"))


def test_inputs_that_are_not_bytes() -> None:
    for value in ("DTSZ", 12, None, [1], memoryview(b"DTSZ" * 8)[::2]):
        with pytest.raises(DeserializationError):
            deserialize(value)  # type: ignore[arg-type]


def _tensor_payload_with(dtype_code: Any, length: int) -> bytes:
    """A float32 tensor's payload whose dtype column says ``dtype_code``, of ``length`` items."""
    import msgpack
    import torch

    from dtorch.serialization import serialize

    _, document, data = split(serialize(torch.ones(2, dtype=torch.float32)))
    types, rows, root = msgpack.unpackb(document, strict_map_key=False)
    rows[0][2][0] = [dtype_code]
    rows[0][2][1] = [[length]]
    return reframe(msgpack.packb([types, rows, root]), data)


def test_the_unchanged_tensor_payload_decodes() -> None:
    import torch

    assert torch.equal(deserialize(_tensor_payload_with(0, 2)), torch.ones(2))


@pytest.mark.parametrize(
    ("dtype", "length"), [("qint8", 8), ("quint8", 8), ("qint32", 2), ("quint4x2", 8)]
)
def test_quantized_dtype_codes_are_refused(dtype: str, length: int) -> None:
    import torch

    from dtorch.ir.dtypes import DTYPE_TO_CODE

    code = DTYPE_TO_CODE[getattr(torch, dtype)]
    with pytest.raises(DeserializationError, match="quantized"):
        deserialize(_tensor_payload_with(code, length))


@pytest.mark.parametrize("code", [True, False, 0.0])
def test_a_dtype_code_that_is_not_an_int_is_refused(code: Any) -> None:
    with pytest.raises(DeserializationError):
        deserialize(_tensor_payload_with(code, 2))

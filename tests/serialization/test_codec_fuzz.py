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
from dtorch.serialization import deserialize, serialize
from dtorch.serialization.fuzz import MUTATORS, reframe, sample_payloads, split
from dtorch.serialization.reader import MAX_NESTING, deserialize_value

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


def _chained_tuples(depth: int, as_dict_key: bool) -> bytes:
    """A payload of ``depth`` tuples, each a node holding the previous one (a level per group,
    so MessagePack's own nesting limit never sees it), the last one a dict key if asked."""
    import msgpack

    header = [["py.tuple", ["items"]], ["py.dict", ["keys", "values"]]]
    groups = [[0, 1, [[[]]]]] + [[0, 1, [[[[i - 1]]]]] for i in range(1, depth)]
    root = depth - 1
    if as_dict_key:
        groups.append([1, 1, [[[[depth - 1]]], [[1]]]])
        root = depth
    return reframe(msgpack.packb([header, groups, [root]]))


@pytest.mark.timeout(60)
def test_tuples_nested_through_references_are_refused_past_the_limit() -> None:
    """Hashing a tuple recurses in C without a depth check: 200,000 levels as a dict key
    crashed the process. Deeper than MAX_NESTING is refused; that deep is a value."""
    for as_key in (False, True):
        with pytest.raises(DeserializationError, match="tuples nested 1001 deep"):
            deserialize(_chained_tuples(200_000, as_key))
    value = deserialize(_chained_tuples(MAX_NESTING, as_dict_key=True))
    assert isinstance(value, dict) and len(value) == 1
    deepest = next(iter(value))
    for _ in range(MAX_NESTING - 1):
        (deepest,) = deepest
    assert deepest == ()


@pytest.mark.timeout(60)
def test_tuples_sharing_inner_tuples_are_refused_past_their_weight() -> None:
    """64 tuples each holding the one before twice: 719 bytes, 2**64 items for a hash to walk
    (as a dict key, the decode hung for ever). Refused by the items counted through the
    shared inner tuples; a modest sharing (2**10) is a value."""
    bomb: tuple[object, ...] = (1,)
    for _ in range(64):
        bomb = (bomb, bomb)
    with pytest.raises(DeserializationError, match="counting those of its inner tuples"):
        deserialize(serialize([bomb]))
    small: tuple[object, ...] = (1,)
    for _ in range(10):
        small = (small, small)
    assert deserialize(serialize([small]))[0] == small


def test_overlapping_tensor_data_is_refused_before_it_is_copied() -> None:
    """A thousand tensors each claiming the same 1 MiB of a 1 MiB data section: refused after
    the first overlap, not after a gigabyte of copies."""
    import msgpack

    size, count = 1 << 20, 1000
    header = [["torch.Tensor", ["dtype", "shape", "data"]], ["py.list", ["items"]]]
    tensors = [0, count, [[8] * count, [[size]] * count, [[0, size]] * count]]
    groups = [tensors, [1, 1, [[[[i] for i in range(count)]]]]]
    data = reframe(msgpack.packb([header, groups, [count]]), b"\x01" * size)
    tracemalloc.start()
    try:
        with pytest.raises(DeserializationError, match="share data bytes"):
            deserialize(data)
        assert tracemalloc.get_traced_memory()[1] < 8 * size
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("count", [1, 40], ids=["row-path", "column-path"])
@pytest.mark.parametrize("value", [True, 1.0])
def test_references_and_enum_values_must_be_exact_ints(count: int, value: Any) -> None:
    """``True == 1.0 == 1``: a bool or a float must not pass for node 1 or enum member 1."""
    import msgpack

    enums = [[["enum.OpKind", ["value"]]], [[0, count, [[value] * count]]], [0]]
    mesh = ["cpu", [2], [0, 1], None]
    header = [
        ["ir.DeviceMesh", ["device_type", "shape", "device_ids", "dim_names"]],
        ["ir.Shard", ["dim", "split_order", "sub_split_coordinates"]],
        ["ir.Operand", ["id", "shape", "dtype", "mesh", "placements"]],
    ]
    operands = [list(range(1, count + 1)), [[4]] * count, [0] * count, [value] * count]
    groups = [
        [0, 2, [[m] * 2 for m in mesh]],  # nodes 0 and 1: meshes, so node 1 is well typed
        [1, 1, [[0], [-1], [[]]]],
        [2, count, [*operands, [[2]] * count]],
    ]
    for document in (enums, [header, groups, [3]]):
        with pytest.raises(DeserializationError):
            deserialize(reframe(msgpack.packb(document)))


def test_errors_about_huge_values_stay_short() -> None:
    """A record refusing a huge value (a mesh of 300,000 equal ids, a generator on a device
    named by 300,000 characters) says so in a few hundred characters."""
    import msgpack

    ids = [0] * 300_000
    mesh = [["ir.DeviceMesh", ["device_type", "shape", "device_ids", "dim_names"]]]
    meshes = [mesh, [[0, 1, [["cpu"], [[len(ids)]], [ids], [None]]]], [0]]
    generator = [["torch.Generator", ["device", "state"]]]
    generators = [generator, [[0, 1, [["x" * 300_000], [b""]]]], [0]]
    for document in (meshes, generators):
        with pytest.raises(DeserializationError) as info:
            deserialize(reframe(msgpack.packb(document)))
        assert len(str(info.value)) < 1000


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


def test_shapes_of_many_huge_dims_are_refused_in_linear_time() -> None:
    """A tensor or mesh shape of 20,000 dims of 2**63-1: ``math.prod`` of it multiplies ever
    longer ints (quadratic; 100,000 dims took 31 s), the capped product stops at the data's
    size; the message stays short and says what the data holds."""
    import msgpack

    big = [2**63 - 1] * 20_000
    tensor = [[["torch.Tensor", ["dtype", "shape", "data"]]], [[0, 1, [[0], [big], [[0, 0]]]]]]
    with pytest.raises(DeserializationError, match="needs more than the 0 bytes") as info:
        deserialize(reframe(msgpack.packb([*tensor, [0]])))
    assert len(str(info.value)) < 1000
    names = ["device_type", "shape", "device_ids", "dim_names"]
    mesh = [[["ir.DeviceMesh", names]], [[0, 1, [["cpu"], [[2] * 20_000], [[0, 1]], [None]]]]]
    with pytest.raises(DeserializationError, match=r"20000 dims\) does not hold 2") as info:
        deserialize(reframe(msgpack.packb([*mesh, [0]])))
    assert len(str(info.value)) < 1000


@pytest.mark.parametrize("rows", [True, False])
def test_a_dict_holding_one_key_twice_is_refused(rows: bool) -> None:
    """Two entries of one key were merged, the last winning: two readers of one file (a
    program file's header, say) could disagree on what it holds (a security review)."""
    data = serialize({"keyA": 1, "keyB": 2, "keyC": {"x": 3}})
    bad = data.replace(b"keyB", b"keyA")
    with pytest.raises(DeserializationError, match="a dict holds the key 'keyA' twice"):
        deserialize_value(bad, rows=rows)

"""The payload format by hand: older data without optional fields, newer versions, bad tables."""

from __future__ import annotations

import struct
from typing import Any

import msgpack
import pytest
import torch

from dtorch.errors import (
    BadReferenceError,
    DeserializationError,
    MissingFieldError,
    UnknownTypeError,
    UnsupportedVersionError,
)
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.opkind import ActivationKind, BinaryKind
from dtorch.ir.params import ActivationParam, BroadcastBinaryParam
from dtorch.ir.placement import Shard
from dtorch.ir.span import Span
from dtorch.serialization import FORMAT_VERSION, deserialize, serialize
from dtorch.serialization.wire import HEADER_SIZE, MAGIC


def payload(document: Any, version: int = 1, data: bytes = b"") -> bytes:
    """A payload built by hand: frame header, MessagePack document, aligned data section."""
    body = msgpack.packb(document)
    header = struct.pack("<4sHHQQ", MAGIC, version, 0, len(body), len(data))
    if not data:
        return header + body
    pad = -(HEADER_SIZE + len(body)) % 64
    return header + body + bytes(pad) + data


def test_hand_built_payload_matches_the_writer() -> None:
    built = payload(
        [[["ir.Span", ["file", "line", "column"]]], [[0, 1, [["f.py"], [3], [7]]]], [0]]
    )
    assert built == serialize(Span("f.py", 3, 7))
    assert deserialize(built) == Span("f.py", 3, 7)


def test_older_data_without_optional_fields_takes_defaults() -> None:
    document = [
        [
            ["ir.Shard", ["dim"]],
            ["param.Activation", ["activation"]],
            ["param.BroadcastBinary", ["binary"]],
            ["ir.DeviceMesh", ["device_type", "shape", "device_ids"]],
            ["ir.Span", ["file", "line"]],
            ["py.list", ["items"]],
        ],
        [
            [0, 2, [[1, -1]]],
            [1, 1, [[int(ActivationKind.GELU)]]],
            [2, 1, [[int(BinaryKind.MUL)]]],
            [3, 1, [["cpu"], [[2]], [[4, 5]]]],
            [4, 1, [["old.py"], [9]]],
            [5, 1, [[[[0], [1], [2], [3], [4], [5]]]]],
        ],
        [6],
    ]
    shard, last, gelu, mul, mesh, span = deserialize(payload(document))
    assert shard == Shard(1) and shard.split_order == -1 and last == Shard(-1)
    assert gelu == ActivationParam(ActivationKind.GELU) and gelu.approximate == "none"
    assert mul == BroadcastBinaryParam(BinaryKind.MUL, None, False)
    assert (
        mesh == DeviceMesh.from_ids("cpu", (2,), (4, 5))
        and mesh.mesh_dim_names is None
        and mesh.dim_names == []
    )
    assert span == Span("old.py", 9, 0)


def test_a_missing_required_field_is_named() -> None:
    document = [[["param.Activation", ["approximate"]]], [[0, 1, [["tanh"]]]], [0]]
    with pytest.raises(MissingFieldError, match=r"param\.Activation.*'activation'"):
        deserialize(payload(document))


def test_newer_versions_are_refused_before_parsing() -> None:
    future = payload("anything at all", version=FORMAT_VERSION + 1)
    with pytest.raises(UnsupportedVersionError, match=f"version {FORMAT_VERSION + 1} is newer"):
        deserialize(future)
    with pytest.raises(DeserializationError, match="version 0 is not valid"):
        deserialize(payload([[], [], None], version=0))


def test_every_payload_carries_the_version() -> None:
    for value in (None, [1, 2], Span("f", 1), torch.zeros(2)):
        data = serialize(value)
        assert data[:4] == MAGIC
        assert struct.unpack_from("<H", data, 4)[0] == FORMAT_VERSION


@pytest.mark.parametrize(
    ("document", "error", "message"),
    [
        ([[["ir.Nope", []]], [], None], UnknownTypeError, "ir.Nope"),
        ([[["ir.Span", ["file", "line", "colour"]]], [], None], DeserializationError, "colour"),
        ([[["ir.Span", ["file", "file"]]], [], None], DeserializationError, "twice"),
        ([[["ir.Span", ["file", "line"]]], [[0, 1, [["f"], [1]]]], [1]], BadReferenceError, "1"),
        ([[["py.list", ["items"]]], [[0, 1, [[[[0]]]]]], [0]], BadReferenceError, "0"),
        ([[["py.list", ["items"]]], [[0, 1, [[[[-1]]]]]], None], BadReferenceError, "-1"),
        (
            [[["ir.Span", ["file", "line"]]], [[0, 1, [["f"], [1.5]]]], None],
            DeserializationError,
            "float",
        ),
        (
            [[["ir.Span", ["file", "line"]]], [[0, 2, [["f"], [1]]]], None],
            DeserializationError,
            "column of 2",
        ),
        (
            [[["ir.Span", ["file", "line"]]], [[3, 1, [["f"], [1]]]], None],
            DeserializationError,
            "slot",
        ),
        ([[["ir.Replicate", []]], [[0, 10**6, []]], None], DeserializationError, "node count"),
        (
            [[["param.Activation", ["activation"]]], [[0, 1, [[99]]]], None],
            DeserializationError,
            "ActivationKind",
        ),
        (
            [[["ir.Operand", ["id", "shape", "dtype", "mesh", "placements"]]], [], None, 4],
            DeserializationError,
            "document",
        ),
        ({"a": 1}, DeserializationError, "document"),
    ],
)
def test_malformed_tables_name_the_problem(document: Any, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        deserialize(payload(document))


def test_references_must_point_to_records_of_the_declared_type() -> None:
    document = [
        [
            ["ir.Span", ["file", "line", "column"]],
            ["ir.Operand", ["id", "shape", "dtype", "mesh", "placements"]],
        ],
        [[0, 1, [["f"], [1], [0]]], [1, 1, [[1], [[2]], [0], [0], [[]]]]],
        [1],
    ]
    with pytest.raises(DeserializationError, match=r"ir\.Operand\.mesh.*DeviceMesh.*Span"):
        deserialize(payload(document))


def test_invalid_record_values_are_deserialization_errors() -> None:
    document = [[["ir.Shard", ["dim", "sub_split"]]], [[0, 1, [[0], [-5]]]], [0]]
    with pytest.raises(DeserializationError, match=r"ir\.Shard"):
        deserialize(payload(document))
    mesh = [
        [["ir.DeviceMesh", ["device_type", "shape", "device_ids"]]],
        [[0, 1, [["tpu"], [[1]], [[0]]]]],
        [0],
    ]
    with pytest.raises(DeserializationError, match="tpu"):
        deserialize(payload(mesh))


def test_tensor_data_ranges_are_checked() -> None:
    def tensor_payload(shape: list[int], data_range: list[int], data: bytes) -> bytes:
        document = [
            [["torch.Tensor", ["dtype", "shape", "data"]]],
            [[0, 1, [[0], [shape], [data_range]]]],
            [0],
        ]
        return payload(document, data=data)

    good = tensor_payload([2], [0, 8], bytes(8))
    assert torch.equal(deserialize(good), torch.zeros(2))
    with pytest.raises(DeserializationError, match="outside"):
        deserialize(tensor_payload([2], [60, 8], bytes(8)))
    with pytest.raises(DeserializationError, match="needs 12 bytes"):
        deserialize(tensor_payload([3], [0, 8], bytes(8)))
    with pytest.raises(DeserializationError, match="dimension"):
        deserialize(tensor_payload([-2], [0, 8], bytes(8)))
    with pytest.raises(DeserializationError, match="needs"):
        deserialize(tensor_payload([2**40, 2**40], [0, 8], bytes(8)))


def test_bool_tensors_hold_only_zero_and_one() -> None:
    document = [
        [["torch.Tensor", ["dtype", "shape", "data"]]],
        [[0, 1, [[9], [[2]], [[0, 2]]]]],
        [0],
    ]
    with pytest.raises(DeserializationError, match="bool"):
        deserialize(payload(document, data=b"\x01\x02"))


def test_two_tensors_may_not_share_bytes() -> None:
    document = [
        [["torch.Tensor", ["dtype", "shape", "data"]], ["py.tuple", ["items"]]],
        [[0, 2, [[8, 8], [[4], [4]], [[0, 4], [2, 4]]]], [1, 1, [[[[0], [1]]]]]],
        [2],
    ]
    with pytest.raises(DeserializationError, match="share"):
        deserialize(payload(document, data=bytes(8)))


def test_the_renamed_shard_field_still_decodes_and_coordinates_round_trip() -> None:
    # Shard's nesting field was called sub_split before it became split_order.
    document = [[["ir.Shard", ["dim", "sub_split"]]], [[0, 1, [[0], [1]]]], [0]]
    assert deserialize(payload(document)) == Shard(0, split_order=1)
    marked = [Shard(0, sub_split_coordinates=(4, 7)), Shard(1, 0, (2,)), Shard(0)]
    assert deserialize(serialize(marked)) == marked
    assert deserialize(serialize(marked))[0] != Shard(0)


def _without_defaulted_fields(value: Any) -> tuple[bytes, int]:
    """``value``'s payload with every field that has a default dropped from its type entry
    and its group (a writer that did not know them yet); and how many were dropped."""
    from dtorch.serialization.catalog import DEFAULT_REGISTRY
    from dtorch.serialization.fuzz import reframe, split

    _, document, data = split(serialize(value))
    types, groups, root = msgpack.unpackb(document)
    fields = DEFAULT_REGISTRY.by_type[type(value)].fields
    dropped = [f.name for f in fields if f.missing_column(1) is not None]
    (entry,) = [t for t in types if t[0] == DEFAULT_REGISTRY.by_type[type(value)].tag]
    slot = types.index(entry)
    for name in dropped:
        at = entry[1].index(name)
        del entry[1][at]
        for group in groups:
            if group[0] == slot:
                del group[2][at]
    return reframe(msgpack.packb([types, groups, root]), data), len(dropped)


def _fields(value: Any) -> list[Any]:
    import dataclasses

    return [getattr(value, f.name) for f in dataclasses.fields(value)]


def test_every_defaulted_param_field_may_be_missing() -> None:
    """Every param record built with its defaults reads back equal from a payload lacking all
    its defaulted fields: enum and dtype defaults too (the defaults used to go through the
    wire decoders, which refused an enum member where they expect its int)."""
    from dtorch.ir.params import PARAM_TYPES

    checked = 0
    for cls in PARAM_TYPES.values():
        try:
            value = cls()
        except TypeError:  # required fields: nothing to leave out
            continue
        data, dropped = _without_defaulted_fields(value)
        read = deserialize(data)  # by fields: some params compare by identity (a generator)
        assert type(read) is cls and _fields(read) == _fields(value), cls.__name__
        checked += dropped > 0
    assert checked >= 10  # Conv, Dropout, Activation, ... (14 when this was written)

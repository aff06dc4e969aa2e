"""Payload files: same payload behind a magic prefix, clear refusals, I/O errors name paths."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest
import torch

from dtorch.errors import DeserializationError, UnsupportedVersionError
from dtorch.ir.mesh import init_device_mesh
from dtorch.ir.operator import Operand
from dtorch.ir.placement import Shard
from dtorch.serialization import (
    assert_structural_equal,
    deserialize_from_file,
    serialize,
    serialize_to_file,
    wire,
)
from dtorch.serialization.files import FILE_MAGIC


def _value() -> object:
    mesh = init_device_mesh("cpu", 2)
    operand = Operand(1, (4,), torch.float32, mesh, (Shard(0),))
    return {"operand": operand, "weights": [torch.randn(3, 5), torch.arange(7)], "mesh": mesh}


def test_file_holds_magic_then_the_payload(tmp_path: Path) -> None:
    value = _value()
    path = tmp_path / "graph.dtorch"
    serialize_to_file(value, path)
    data = path.read_bytes()
    assert data.startswith(FILE_MAGIC)
    assert data[len(FILE_MAGIC) :] == serialize(value)
    restored = deserialize_from_file(str(path))
    assert_structural_equal(value, restored)
    assert restored["operand"].mesh is restored["mesh"]


def test_loaded_tensors_are_writable_and_independent(tmp_path: Path) -> None:
    path = tmp_path / "t.dtorch"
    serialize_to_file([torch.zeros(4), torch.zeros(4)], path)
    a, b = deserialize_from_file(path)
    a.add_(1)
    assert torch.equal(b, torch.zeros(4)) and torch.equal(a, torch.ones(4))
    assert torch.equal(deserialize_from_file(path)[0], torch.zeros(4))


def test_overwrite_is_atomic_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "x.dtorch"
    serialize_to_file([1], path)
    serialize_to_file([2], path)
    assert deserialize_from_file(path) == [2]
    assert sorted(os.listdir(tmp_path)) == ["x.dtorch"]


def test_non_dtorch_files_are_refused_clearly(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello, world")
    with pytest.raises(DeserializationError, match=r"notes.txt.*not a dtorch file"):
        deserialize_from_file(path)
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    with pytest.raises(DeserializationError, match="not a dtorch file"):
        deserialize_from_file(empty)


def test_corrupt_payload_in_a_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "cut.dtorch"
    serialize_to_file(_value(), path)
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(DeserializationError, match=r"cut\.dtorch"):
        deserialize_from_file(path)
    newer = bytearray(FILE_MAGIC + serialize([1]))
    newer[len(FILE_MAGIC) + 4] = 99
    path.write_bytes(bytes(newer))
    with pytest.raises(UnsupportedVersionError, match=r"cut\.dtorch.*version 99"):
        deserialize_from_file(path)


def test_io_errors_name_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "x.dtorch"
    with pytest.raises(FileNotFoundError, match="nowhere"):
        deserialize_from_file(missing)
    with pytest.raises(FileNotFoundError, match="nowhere"):
        serialize_to_file([1], missing)
    assert os.listdir(tmp_path) == []


@pytest.mark.timeout(30)
def test_a_pipe_or_a_directory_is_refused_without_waiting(tmp_path: Path) -> None:
    # opening a named pipe for reading would wait for a writer for ever
    fifo = tmp_path / "p.dtorch"
    os.mkfifo(fifo)
    with pytest.raises(DeserializationError, match=r"p\.dtorch' is not a regular file"):
        deserialize_from_file(fifo)
    with pytest.raises(DeserializationError, match=rf"{tmp_path.name}' is a directory"):
        deserialize_from_file(tmp_path)


def test_a_file_larger_than_memory_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """A sparse file of 1 TiB (4 KiB on disk): allocating its size raised a bare MemoryError,
    or, below the commit limit, would have zero-filled every page."""
    path = tmp_path / "sparse.dtorch"
    payload = 2**40 - len(FILE_MAGIC)  # a header whose sizes add up to the file's
    with open(path, "wb") as file:
        file.write(FILE_MAGIC + wire.frame(b"d" * 40, [], payload - 64)[0])
        file.truncate(2**40)
    with pytest.raises(DeserializationError, match=r"sparse\.dtorch'?: its payload would take "):
        deserialize_from_file(path)


def test_a_header_that_does_not_match_the_file_is_refused_before_it_is_read(
    tmp_path: Path,
) -> None:
    """A large sparse file whose header declares a few bytes: refused from the header alone,
    before the reader holds (and zero-fills) the file's size."""
    path = tmp_path / "sparse.dtorch"
    with open(path, "wb") as file:
        file.write(FILE_MAGIC + wire.frame(b"d", [], 0)[0] + b"d")
        file.truncate(2**30)
    tracemalloc.start()
    try:
        with pytest.raises(DeserializationError, match="declares a 1-byte document"):
            deserialize_from_file(path)
        assert tracemalloc.get_traced_memory()[1] < 2**20
    finally:
        tracemalloc.stop()

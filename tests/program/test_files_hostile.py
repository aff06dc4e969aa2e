"""Program files written to do harm: each is refused with a DeserializationError, and the
load leaves nothing behind that could still read the file (found by a security review).

The oracle for "nothing left reading the file" is the process itself: a kernel still copying
a constant out of the file's mapping when the file is truncated would die of SIGBUS.
"""

from __future__ import annotations

import dataclasses
import os
import tracemalloc
from pathlib import Path

import pytest
import torch

import dtorch
from dtorch.errors import DeserializationError
from dtorch.ir.mesh import DeviceMesh
from dtorch.program import files
from dtorch.serialization import serialize
from tests.program.corrupt import header, load_bytes, resealed

pytestmark = pytest.mark.timeout(120)


def _saved_sharded(tmp_path: Path, rows: int) -> bytes:
    """A program reading a [rows, 256] constant sharded over two devices."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    w = dtorch.from_torch(torch.ones(rows, 256), device_mesh=mesh, placements=[dtorch.Shard(0)])
    x = dtorch.zeros(rows, 256, device_mesh=mesh, placements=[dtorch.Shard(0)])
    path = tmp_path / "p.dtorch"
    dtorch.trace(lambda a: a * w, x).save(path)
    return path.read_bytes()


def _on_mesh(data: bytes, mesh: DeviceMesh) -> bytes:
    """``data`` with every operand of its header moved to ``mesh``."""
    root = header(data)

    def moved(operand: object) -> object:
        return dataclasses.replace(operand, mesh=mesh)  # type: ignore[type-var]

    root["body"] = dataclasses.replace(
        root["body"], operands=tuple(map(moved, root["body"].operands))
    )
    for key in ("inputs", "constants", "results"):
        root[key] = tuple(map(moved, root[key]))
    return resealed(data, serialize(root))


def test_a_refused_constant_is_made_before_the_load_raises(
    graph: dtorch.Graph, tmp_path: Path
) -> None:
    """Shard(0) on a one-device mesh is made as Replicate: the load refuses the constant, but
    only once its creation, which copies it out of the file, has finished."""
    one = DeviceMesh.from_ids("cpu", (1,), (0,))
    data = _on_mesh(_saved_sharded(tmp_path, 1024), one)
    with pytest.raises(DeserializationError, match=r"was created as .*\(R,\)"):
        load_bytes(tmp_path, data, graph)
    os.truncate(tmp_path / "bad.dtorch", 0)  # a kernel still reading it would crash us
    graph.sync()
    assert dtorch.ones(2, graph=graph).sum().item() == 2.0


def test_a_constant_of_absurd_shape_is_refused_quickly(graph: dtorch.Graph, tmp_path: Path) -> None:
    """300 dims of 2**63-1: its size has thousands of digits (formatting it raised ValueError)."""
    data = _saved_sharded(tmp_path, 4)
    root = header(data)
    huge = dataclasses.replace(root["constants"][0], shape=(2**63 - 1,) * 300)
    root["constants"] = (huge,)
    with pytest.raises(DeserializationError, match=r"needs more than 9223372036854775808"):
        load_bytes(tmp_path, resealed(data, serialize(root)), graph)


def test_a_result_tree_sharing_its_nodes_is_refused_quickly(
    graph: dtorch.Graph, tmp_path: Path
) -> None:
    """A header whose result tree holds one node twice at each of 60 levels: 2 KB, 2**60 nodes
    to walk (the load hung for ever): the codec refuses it; 12 levels are walked (the
    tensor leaf then stands 4,096 times)."""
    data = _saved_sharded(tmp_path, 4)
    root = header(data)
    refusals = ((60, "counting those of its inner tuples"), (12, r"leaves are not 0\.\.0"))
    for levels, refusal in refusals:
        tree: tuple[object, ...] = ("T", 0)
        for _ in range(levels):
            tree = ("tuple", (tree, tree))
        root["result"] = tree
        with pytest.raises(DeserializationError, match=refusal):
            load_bytes(tmp_path, resealed(data, serialize(root)), graph)


def test_a_program_whose_trees_repeat_empty_containers_loads(
    graph: dtorch.Graph, tmp_path: Path
) -> None:
    """The codec shares equal tuples, so a tree read back may hold one node twice (two
    empty tuples in the arguments and the result): such a file loads and runs."""

    def fn(t: dtorch.Tensor, c: object = None, d: object = None) -> object:
        return t + 1, (), ()

    x = dtorch.ones(3, graph=graph)
    path = tmp_path / "p.dtorch"
    dtorch.trace(fn, x, c=(), d=()).save(path)
    program = dtorch.load_program(path, graph=graph)
    result, first, second = program(x, c=(), d=())
    assert result.tolist() == [2.0, 2.0, 2.0] and first == second == ()


def test_a_header_claiming_any_size_is_checked_before_it_is_held(tmp_path: Path) -> None:
    """A sparse file (a few KB on disk) whose prefix declares a 128 MiB header: its checksum
    is computed as it is read, in chunks, and refused before the load holds the header (it
    read all of it into memory first)."""
    path = tmp_path / "sparse.dtorch"
    size = 128 << 20
    with path.open("wb") as out:
        out.write(files._PREFIX.pack(files.MAGIC, files.VERSION, 0, files.DATA_START, size))
        out.truncate(files.DATA_START + size)
    tracemalloc.start()
    try:
        with pytest.raises(DeserializationError, match="checksum does not match"):
            dtorch.load_program(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, f"{peak} bytes held"


def test_names_with_control_characters_are_refused(graph: dtorch.Graph, tmp_path: Path) -> None:
    """Names reach terminals (summaries, messages): a file whose program or operator name
    holds an escape sequence is refused, showing it escaped; a span's file name is shown
    escaped."""
    data = _saved_sharded(tmp_path, 4)
    evil = "\x1b]0;pwned\x07\x1b[2J"
    root = header(data)
    root["name"] = evil
    with pytest.raises(DeserializationError, match=r"program's name .*x1b.* control") as info:
        load_bytes(tmp_path, resealed(data, serialize(root)), graph)
    assert "\x1b" not in str(info.value)
    root = header(data)
    ops = root["body"].operators
    root["body"] = dataclasses.replace(
        root["body"], operators=(dataclasses.replace(ops[0], name=evil), *ops[1:])
    )
    with pytest.raises(DeserializationError, match="operator 0's name") as info:
        load_bytes(tmp_path, resealed(data, serialize(root)), graph)
    assert "\x1b" not in str(info.value)
    root = header(data)
    span = dataclasses.replace(ops[0].span)
    object.__setattr__(span, "file", f"{evil}.py")  # as a forged file holds it
    root["body"] = dataclasses.replace(
        root["body"], operators=(dataclasses.replace(ops[0], span=span), *ops[1:])
    )
    program = load_bytes(tmp_path, resealed(data, serialize(root)), graph)
    assert program.spec.body.operators[0].span.file == "\\x1b]0;pwned\\x07\\x1b[2J.py"
    assert "\x1b" not in program.summary()


def test_a_traced_name_with_control_characters_is_shown_escaped(graph: dtorch.Graph) -> None:
    def fn(t: dtorch.Tensor) -> dtorch.Tensor:
        return t + 1

    fn.__qualname__ = "f\x1b[2J"
    program = dtorch.trace(fn, dtorch.ones(2, graph=graph))
    assert program.spec.name == "f\\x1b[2J"
    assert repr(program) == "Program(f\\x1b[2J: 1 operator, 1 input, 0 constants, 1 result)"


def test_a_header_larger_than_any_program_file_holds_is_refused_unread(tmp_path: Path) -> None:
    """A checksum anyone can compute guards nothing: a header claiming more than
    ``MAX_HEADER_BYTES`` is refused before a byte of it is read."""
    path = tmp_path / "huge.dtorch"
    size = files.MAX_HEADER_BYTES + 1
    with path.open("wb") as out:
        out.write(files._PREFIX.pack(files.MAGIC, files.VERSION, 0, files.DATA_START, size))
        out.truncate(files.DATA_START + size)
    with pytest.raises(DeserializationError, match="more than a program file holds"):
        dtorch.load_program(path)


def test_constants_copied_past_the_machine_s_memory_are_refused_before_any_is_made(
    graph: dtorch.Graph, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Replicate constant is one copy per device, and the file names the devices: a 1 MiB
    constant on 1,000 devices asks for 1 GiB (1.05 MB of file made the loader take 500 MB;
    a crafted mesh asks for any amount). With 100 MB available the load is refused, saying
    both numbers, before anything is created; the same file on two devices loads."""
    monkeypatch.setattr("dtorch.serialization.files.available_memory", lambda: 100 * 2**20)
    mesh = dtorch.init_device_mesh("cpu", 2)
    w, x = (dtorch.ones(1024, 256, device_mesh=mesh, graph=graph) for _ in "wx")  # Replicate
    dtorch.trace(lambda a: a * w, x).save(tmp_path / "p.dtorch")
    data = (tmp_path / "p.dtorch").read_bytes()
    many = DeviceMesh.from_ids("cpu", (1000,), tuple(range(1000)))
    with pytest.raises(
        DeserializationError,
        match=r"its constants \(a copy on each device holding one\) would take 1,048,576,000 "
        r"bytes of memory; this machine has 104,857,600 available",
    ):
        load_bytes(tmp_path, _on_mesh(data, many), graph)
    program = load_bytes(tmp_path, data, graph)
    assert program(x).sum().item() == 1024 * 256

"""Program files: save, load (same process, another process, other devices), and refusals.

The oracle is torch on full tensors: a loaded program's results must equal what torch
computes from the same inputs and weights.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import random
import re
import stat
import struct
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import dtorch
from dtorch.errors import DeserializationError, MeshError, UnsupportedVersionError
from dtorch.ir.operator import Operator
from dtorch.ir.opkind import CreateKind, OpKind, PromiseKind
from dtorch.ir.params import (
    CloneParam,
    FuseParam,
    NonzeroParam,
    NvtxParam,
    PromiseHandle,
    SubGraphParam,
    SyncParam,
    UnsentParam,
)
from dtorch.program import files
from dtorch.serialization import serialize
from dtorch.serialization.fuzz import mutate
from examples.program import round_trip
from tests.program.corrupt import header as _header
from tests.program.corrupt import load_bytes as _load
from tests.program.corrupt import resealed as _resealed

R, S, P = dtorch.Replicate(), dtorch.Shard, dtorch.Partial()
REPO = Path(__file__).resolve().parents[2]


def _weights() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return torch.randn(4, 6, generator=gen), torch.randn(6, generator=gen)


def _model(w: Any, b: Any) -> Any:
    """A function of a 2-D input: a dict of a list of results (torch and dtorch alike)."""

    def fn(x: Any, scale: float = 2.0) -> Any:
        h = (x @ w + b).relu() * scale
        return {"h": [h, h.sum(0)], "n": 3}

    return fn


def _traced(mesh: dtorch.DeviceMesh | None = None) -> tuple[dtorch.Program, Any]:
    """The model traced on the default graph (one device, or ``mesh`` with w sharded on the
    columns); returns the program and the torch function it must equal."""
    w, b = _weights()
    if mesh is None:
        dw, db = dtorch.from_torch(w), dtorch.from_torch(b)
        x = dtorch.zeros(3, 4)
    else:
        dw = dtorch.from_torch(w, device_mesh=mesh, placements=[R, S(1)])
        db = dtorch.from_torch(b, device_mesh=mesh, placements=[R, S(0)])
        x = dtorch.zeros(3, 4, device_mesh=mesh, placements=[R, R])
    return dtorch.trace(_model(dw, db), x), _model(w, b)


def _check(program: dtorch.Program, expected_fn: Any, mesh: Any = None) -> None:
    x = torch.randn(3, 4)
    kw = {} if mesh is None else {"device_mesh": mesh, "placements": [R] * mesh.ndim}
    got = program(dtorch.from_torch(x, **kw))
    want = expected_fn(x)
    assert got["n"] == 3 and len(got["h"]) == 2
    for g, e in zip(got["h"], want["h"], strict=True):
        torch.testing.assert_close(g.to_torch(), e)


def test_save_load_same_process(graph: dtorch.Graph, tmp_path: Path) -> None:
    program, expected = _traced()
    path = tmp_path / "p.dtorch"
    program.save(path)
    del program
    with dtorch.Graph(dtorch.GraphOption(per_device_per_process=False)).as_default() as other:
        loaded = dtorch.load_program(path)
        assert loaded.graph is other
        _check(loaded, expected)
        del loaded
    other.close()
    loaded = dtorch.load_program(path, graph=graph)
    _check(loaded, expected)
    _check(loaded, expected)  # the cached body again


_CHILD = textwrap.dedent(
    """
    import sys, torch, dtorch
    graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=False))
    with graph.as_default():
        program = dtorch.load_program(sys.argv[1])
        x = torch.load(sys.argv[2], weights_only=True)
        out = program(dtorch.from_torch(x))
        torch.save([t.to_torch() for t in out["h"]] + [out["n"]], sys.argv[3])
    graph.close()
    """
)


@pytest.mark.timeout(180)
def test_load_in_another_process(graph: dtorch.Graph, tmp_path: Path) -> None:
    program, expected = _traced()
    path, x_path, out_path = tmp_path / "p.dtorch", tmp_path / "x.pt", tmp_path / "out.pt"
    program.save(path)
    x = torch.randn(3, 4)
    torch.save(x, x_path)
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), str(x_path), str(out_path)],
        check=False, cwd=REPO, capture_output=True, text=True, timeout=150,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    h, total, n = torch.load(out_path, weights_only=True)
    want = expected(x)
    torch.testing.assert_close(h, want["h"][0])
    torch.testing.assert_close(total, want["h"][1])
    assert n == 3


def test_mesh_remapping(tmp_path: Path) -> None:
    with dtorch.Graph(dtorch.GraphOption(per_device_per_process=False)).as_default() as g:
        traced_on = dtorch.DeviceMesh("cpu", [[0, 1], [2, 3]], ("dp", "tp"))
        program, expected = _traced(traced_on)
        path = tmp_path / "p.dtorch"
        program.save(path)
        target = dtorch.DeviceMesh("cpu", [[4, 5], [6, 7]], ("dp", "tp"))
        loaded = dtorch.load_program(path, device_mesh=target)
        meshes = {o.mesh for o in (*loaded.spec.body.operands, *loaded.spec.constants)}
        assert meshes == {target}
        _check(loaded, expected, target)
        same = dtorch.load_program(path)  # device_mesh=None: the saved devices
        assert same.spec.constants[0].mesh == traced_on
        _check(same, expected, traced_on)
        with pytest.raises(MeshError, match="shape"):
            dtorch.load_program(path, device_mesh=dtorch.DeviceMesh("cpu", [4, 5, 6, 7]))
        with pytest.raises(TypeError):
            dtorch.load_program(path, device_mesh=[target])  # type: ignore[arg-type]
    g.close()


def test_sub_mesh_follows_the_root(tmp_path: Path) -> None:
    with dtorch.Graph(dtorch.GraphOption(per_device_per_process=False)).as_default() as g:
        root = dtorch.init_device_mesh("cpu", (2, 2))
        row = dtorch.DeviceMesh("cpu", [2, 3])
        w = dtorch.from_torch(torch.arange(4.0), device_mesh=row, placements=[S(0)])
        x = dtorch.ones(4, device_mesh=root, placements=[R, S(0)])
        y = dtorch.ones(4, device_mesh=row, placements=[S(0)])
        program = dtorch.trace(lambda a, b: (a * 2, b * w), x, y)
        path = tmp_path / "p.dtorch"
        program.save(path)
        target = dtorch.DeviceMesh("cpu", [[4, 5], [6, 7]])
        loaded = dtorch.load_program(path, device_mesh=target)
        moved_row = dtorch.DeviceMesh("cpu", [6, 7])
        assert loaded.spec.constants[0].mesh == moved_row
        a = dtorch.ones(4, device_mesh=target, placements=[R, S(0)])
        b = dtorch.full((4,), 3.0, device_mesh=moved_row, placements=[S(0)])
        doubled, scaled = loaded(a, b)
        assert doubled.tolist() == [2.0] * 4 and scaled.tolist() == [0.0, 3.0, 6.0, 9.0]
        assert scaled.device_mesh == moved_row
    g.close()


def test_in_place_writes_partial_constant_and_list_results(
    graph: dtorch.Graph, tmp_path: Path
) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    c = torch.arange(4.0)
    partial = dtorch.from_torch(c, device_mesh=mesh, placements=[P])

    def step(state: Any, x: Any) -> Any:
        state.copy_(state + x * 2)
        return [state * 1, (partial * x).redistribute(mesh, [R]), None]

    state = dtorch.zeros(4, device_mesh=mesh, placements=[R])
    program = dtorch.trace(step, state, dtorch.ones(4, device_mesh=mesh, placements=[R]))
    assert program.spec.body.writes == (0,)
    path = tmp_path / "p.dtorch"
    program.save(path)
    loaded = dtorch.load_program(path, graph=graph)
    assert loaded.spec.constants[0].placements == (P,)
    s = dtorch.zeros(4, device_mesh=mesh, placements=[R], graph=graph)
    x = torch.tensor([1.0, -2.0, 3.0, 0.5])
    dx = dtorch.from_torch(x, device_mesh=mesh, placements=[R], graph=graph)
    first, summed, none = loaded(s, dx)
    assert none is None
    torch.testing.assert_close(first.to_torch(), x * 2)
    torch.testing.assert_close(summed.to_torch(), c * x)
    loaded(s, dx)
    torch.testing.assert_close(s.to_torch(), x * 4)  # written back to the input, twice


@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.uint8, torch.bool])
def test_partial_constants_whose_sum_promotes_load(
    dtype: torch.dtype, graph: dtorch.Graph, tmp_path: Path
) -> None:
    """The loader waits on each constant through its sum; a Partial int8/int32/uint8/bool one
    (whose sum promotes, so the parts would not add up) failed to load with a PlacementError
    from that sum: it is summed across the devices first."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    full = torch.tensor([1, 0, 1]).to(dtype)
    constant = dtorch.from_torch(full, device_mesh=mesh, placements=[P])
    example = dtorch.zeros(3, dtype=dtype, device_mesh=mesh, placements=[P])
    program = dtorch.trace(lambda x: x + constant, example)
    path = tmp_path / "p.dtorch"
    program.save(path)
    loaded = dtorch.load_program(path, graph=graph)
    x = dtorch.zeros(3, dtype=dtype, device_mesh=mesh, placements=[P], graph=graph)
    assert torch.equal(loaded(x).to_torch(), full)


def test_fresh_ids(graph: dtorch.Graph, tmp_path: Path) -> None:
    program, _ = _traced()
    path = tmp_path / "p.dtorch"
    program.save(path)
    a = dtorch.load_program(path, graph=graph)
    b = dtorch.load_program(path, graph=graph)
    ids_a = {o.id for o in a.spec.body.operands} | {o.id for o in a.spec.constants}
    ids_b = {o.id for o in b.spec.body.operands} | {o.id for o in b.spec.constants}
    assert not ids_a & ids_b
    assert not {op.id for op in a.spec.body.operators} & {op.id for op in b.spec.body.operators}


# --- refusals -------------------------------------------------------------------------------
def _saved(tmp_path: Path) -> bytes:
    program, _ = _traced()
    path = tmp_path / "p.dtorch"
    program.save(path)
    return path.read_bytes()


def test_newer_version_and_not_a_program(graph: dtorch.Graph, tmp_path: Path) -> None:
    data = _saved(tmp_path)
    newer = bytearray(data)
    struct.pack_into("<I", newer, 8, files.VERSION + 1)
    with pytest.raises(UnsupportedVersionError, match=f"version {files.VERSION + 1}"):
        _load(tmp_path, bytes(newer), graph)
    with pytest.raises(DeserializationError, match="not a dtorch program"):
        _load(tmp_path, b"PK\x03\x04" + data[4:], graph)
    with pytest.raises(DeserializationError, match="header is tagged"):
        _load(tmp_path, _resealed(data, serialize({**_header(data), "format": "x"})), graph)


def _keywords(**parts: dtorch.Tensor) -> list[dtorch.Tensor]:
    # iterates its keywords: another order changes the result
    return [t * (i + 1) for i, t in enumerate(parts.values())]


def _named(a: dtorch.Tensor, b: dtorch.Tensor) -> list[dtorch.Tensor]:
    return [a * 1, b * 2]


def test_a_loaded_program_keeps_the_keyword_order_rule(graph: dtorch.Graph, tmp_path: Path) -> None:
    """A function taking **kwargs refuses another keyword order after a load as before it
    (the loaded program took them in the traced order and gave the traced order's values);
    named parameters take any order; a version 1 file, which does not say, the traced one."""
    a, b = dtorch.ones(2), dtorch.zeros(2)
    calls = {"traced": {"a": a, "b": b}, "swapped": {"b": b, "a": a}}
    for fn, free in ((_keywords, False), (_named, True)):
        dtorch.trace(fn, **calls["traced"]).save(tmp_path / "k.dtorch")
        data = (tmp_path / "k.dtorch").read_bytes()
        old = {k: v for k, v in _header(data).items() if k != "any_keyword_order"}
        for version, record in ((files.VERSION, _header(data)), (1, old)):
            program = _load(tmp_path, _resealed(data, serialize(record), version), graph)
            assert program.spec.any_keyword_order is (free and version > 1)
            assert [t.tolist() for t in program(**calls["traced"])] == [[1.0, 1.0], [0.0, 0.0]]
            if program.spec.any_keyword_order:
                got = [t.tolist() for t in program(**calls["swapped"])]
                assert got == [t.tolist() for t in fn(**calls["swapped"])]
            else:
                with pytest.raises(dtorch.TraceError, match="keyword arguments: traced with"):
                    program(**calls["swapped"])
    for bad in ({"any_keyword_order": 1}, {}):
        record = {k: v for k, v in _header(data).items() if k != "any_keyword_order"} | bad
        with pytest.raises(DeserializationError, match=r"any_keyword_order|program record"):
            _load(tmp_path, _resealed(data, serialize(record)), graph)


def test_a_file_cut_inside_its_prefix_is_called_truncated(
    graph: dtorch.Graph, tmp_path: Path
) -> None:
    data = _saved(tmp_path)
    with pytest.raises(DeserializationError, match="truncated: it holds 10 bytes"):
        _load(tmp_path, data[:10], graph)
    with pytest.raises(DeserializationError, match="not a dtorch program"):
        _load(tmp_path, b"", graph)


def test_a_pipe_or_a_directory_is_refused_without_waiting(
    graph: dtorch.Graph, tmp_path: Path
) -> None:
    # opening a named pipe for reading would wait for a writer for ever
    fifo = tmp_path / "p.dtorch"
    os.mkfifo(fifo)
    with pytest.raises(DeserializationError, match="not a regular file"):
        dtorch.load_program(fifo, graph=graph)
    with pytest.raises(DeserializationError, match="is a directory"):
        dtorch.load_program(tmp_path, graph=graph)


def test_forbidden_operator_kind(graph: dtorch.Graph, tmp_path: Path) -> None:
    data = _saved(tmp_path)
    root = _header(data)
    body = root["body"]
    op = body.operators[0]
    promise = PromiseHandle(PromiseKind.MEMORY, "p1")
    for param in (SyncParam(promise), SubGraphParam(())):
        refused = type(op)(op.id, "x", param, (), (), op.span)
        bad = type(body)((refused, *body.operators), body.operands, body.inputs, body.outputs)
        with pytest.raises(DeserializationError, match="may not hold"):
            _load(tmp_path, _resealed(data, serialize({**root, "body": bad})), graph)


def test_inconsistent_records(graph: dtorch.Graph, tmp_path: Path) -> None:
    data = _saved(tmp_path)
    root = _header(data)
    body = root["body"]
    cases = {
        "undefined": type(body)(body.operators[1:], body.operands, body.inputs, body.outputs),
        "body outputs": type(body)(body.operators, body.operands, body.inputs, body.outputs[:1]),
        "placeholders": type(body)(body.operators, body.operands, (), body.outputs),
    }
    for match, bad in cases.items():
        with pytest.raises(DeserializationError, match=match):
            _load(tmp_path, _resealed(data, serialize({**root, "body": bad})), graph)
    with pytest.raises(DeserializationError, match="tree"):
        _load(tmp_path, _resealed(data, serialize({**root, "result": ("T", 9)})), graph)
    w = root["constants"][0]
    wider = dataclasses.replace(w, shape=(w.shape[0], w.shape[1] + 1))
    with pytest.raises(DeserializationError, match="bytes of its value"):
        constants = (wider, *root["constants"][1:])
        _load(tmp_path, _resealed(data, serialize({**root, "constants": constants})), graph)
    packed = dataclasses.replace(w, dtype=torch.uint4, shape=(w.shape[0], w.shape[1] * 4))
    with pytest.raises(DeserializationError, match="no dtorch tensor holds that dtype"):
        constants = (packed, *root["constants"][1:])  # as many bytes: only the dtype is wrong
        _load(tmp_path, _resealed(data, serialize({**root, "constants": constants})), graph)
    with pytest.raises(DeserializationError, match="checksum"):
        _load(tmp_path, _resealed(data, serialize({**root, "crcs": (0, 0)})), graph)
    with pytest.raises(DeserializationError, match="program record"):
        _load(tmp_path, _resealed(data, serialize([1, 2])), graph)


def test_metadata_the_rules_disagree_with(graph: dtorch.Graph, tmp_path: Path) -> None:
    """An intermediate whose recorded shape, dtype or placements are not what its operator
    makes from its inputs (the kernels and the planner would trust them) is refused."""
    data = _saved(tmp_path)
    root = _header(data)
    body = root["body"]
    made = body.operators[0].outputs[0]  # x @ w: float32[3, 6], an intermediate
    assert made not in body.outputs
    wrong = {
        "makes float32\\[3, 6\\].*not float32\\[3, 7\\]": {"shape": (3, 7)},
        "not float64": {"dtype": torch.float64},
    }
    for match, change in wrong.items():
        operands = tuple(
            dataclasses.replace(o, **change) if o.id == made else o for o in body.operands
        )
        bad = dataclasses.replace(body, operands=operands)
        with pytest.raises(DeserializationError, match=f"operator 0 .*{match}"):
            _load(tmp_path, _resealed(data, serialize({**root, "body": bad})), graph)


def test_a_redistribution_must_make_what_its_param_names(
    graph: dtorch.Graph, tmp_path: Path
) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = dtorch.zeros(4, 2, device_mesh=mesh, placements=[S(0)])
    program = dtorch.trace(lambda t: t.redistribute(mesh, [R]) * 2, x)
    path = tmp_path / "p.dtorch"
    program.save(path)
    data = path.read_bytes()
    root = _header(data)
    body = root["body"]
    convert = body.operators[0]
    operands = tuple(
        dataclasses.replace(o, placements=(S(1),)) if o.id == convert.outputs[0] else o
        for o in body.operands
    )
    bad = dataclasses.replace(body, operands=operands)
    with pytest.raises(DeserializationError, match=r"operator 0 .*makes .*\(R,\).*not .*S\(1\)"):
        _load(tmp_path, _resealed(data, serialize({**root, "body": bad})), graph)


@pytest.mark.timeout(240)
def test_fuzz_corrupt_and_truncated(tmp_path: Path) -> None:
    """Seeded cuts and byte flips (DeserializationError, or for a flip in padding a program
    equal to the saved one) and header mutations re-sealed with a right checksum (reaching
    the checks behind it: DeserializationError or a program); nothing else, never a hang."""
    with dtorch.Graph(dtorch.GraphOption(per_device_per_process=False)).as_default() as g:
        data = _saved(tmp_path)
        _, expected = _traced()
        rng = random.Random(12)
        header = data[files._PREFIX.unpack_from(data)[3] :]
        raw = [data[:cut] for cut in sorted(rng.sample(range(len(data)), 100))]
        raw += [_flipped(rng, data) for _ in range(200)]
        for case in raw:
            program = _load_or_none(tmp_path, case, g)
            if program is not None:  # only padding was hit
                _check(program, expected)
        loaded = [_load_or_none(tmp_path, _resealed(data, mutate(rng, header)), g)]
        loaded += [
            _load_or_none(tmp_path, _resealed(data, mutate(rng, header)), g) for _ in range(199)
        ]
        assert sum(p is not None for p in loaded) < 100
        root = _header(data)
        for _ in range(150):  # records that decode but do not fit together: check_spec's
            bad = serialize(_mutated_record(rng, root))
            assert _load_or_none(tmp_path, _resealed(data, bad), g) is None
    g.close()


def _load_or_none(tmp_path: Path, data: bytes, graph: dtorch.Graph) -> dtorch.Program | None:
    try:
        return _load(tmp_path, data, graph)
    except DeserializationError:
        return None


def _mutated_record(rng: random.Random, root: dict[str, Any]) -> dict[str, Any]:
    """``root`` with one part of its body, ids, trees or metadata changed so that it is no
    longer a consistent program."""
    body = root["body"]
    ops, operands = list(body.operators), list(body.operands)
    what = rng.randrange(6)
    if what == 0:  # an operator dropped, duplicated, or moved before its inputs exist
        i = rng.randrange(len(ops))
        change = rng.randrange(3)
        if change == 0:
            del ops[i]
        elif change == 1:
            ops.insert(i, ops[i])
        else:
            ops.insert(0, ops.pop())
    elif what == 1:  # an operator reading or writing an id that does not exist
        i = rng.randrange(len(ops))
        field = rng.choice(("inputs", "outputs"))
        ids = list(getattr(ops[i], field))
        ids[rng.randrange(len(ids))] += rng.choice((1000, -1000, 2**40))
        ops[i] = dataclasses.replace(ops[i], **{field: tuple(ids)})
    elif what == 2:  # an operand's metadata changed
        i = rng.randrange(len(operands))
        o = operands[i]
        operands[i] = dataclasses.replace(o, shape=(*o.shape, 2), placements=o.placements * 2)
    elif what == 3:
        return {**root, "result": rng.choice((("T", 1), ("V", 1), ("list", (("T", 0),))))}
    elif what == 4:
        return {**root, "inputs": root["inputs"] * 2}
    else:
        outputs = (*body.outputs[1:], body.outputs[0] + rng.choice((1, 1000)))
        return {**root, "body": dataclasses.replace(body, outputs=outputs)}
    return {
        **root,
        "body": dataclasses.replace(body, operators=tuple(ops), operands=tuple(operands)),
    }


def _flipped(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.choice((1, 2, 8))):
        out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


def test_the_example_round_trip_equals_torch(graph: dtorch.Graph, tmp_path: Path) -> None:
    got, expected = round_trip(tmp_path)  # examples/program.py: the README's round trip
    torch.testing.assert_close(got, expected)


def _saved_of(tmp_path: Path, fn: Any, *args: Any) -> bytes:
    path = tmp_path / "p.dtorch"
    dtorch.trace(fn, *args).save(path)
    return path.read_bytes()


def _with_body(data: bytes, **change: Any) -> bytes:
    """``data`` with its body's fields changed (``operators=...``), re-sealed."""
    root = _header(data)
    return _resealed(data, serialize({**root, "body": dataclasses.replace(root["body"], **change)}))


def _redistributed(tmp_path: Path) -> bytes:
    """A program whose body is a redistribution (operator 0) and a multiplication."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = dtorch.zeros(4, 2, device_mesh=mesh, placements=[S(0)])
    return _saved_of(tmp_path, lambda t: t.redistribute(mesh, [R]) * 2, x)


def test_an_operator_no_kernel_runs_is_refused(graph: dtorch.Graph, tmp_path: Path) -> None:
    """Kinds without a kernel (the client never records them) would break the whole graph at
    the first call: the load refuses them, naming the operator."""
    data = _redistributed(tmp_path)
    operators = _header(data)["body"].operators
    for param in (NvtxParam("range"), FuseParam(()), NonzeroParam()):
        bad = Operator(99, "odd_99", param, (), (), operators[0].span)
        with pytest.raises(DeserializationError, match=r"operator 0 is odd_99 .*no kernel runs"):
            _load(tmp_path, _with_body(data, operators=(bad, *operators)), graph)


def test_an_unsent_operator_is_refused(graph: dtorch.Graph, tmp_path: Path) -> None:
    """The process runner's stand-in for an operator it could not send has a kernel (that
    fails), but no program may hold one: its rule refuses it."""
    data = _redistributed(tmp_path)
    convert, mul = _header(data)["body"].operators
    unsent = dataclasses.replace(convert, param=UnsentParam(OpKind.Convert, "a reason"))
    with pytest.raises(DeserializationError, match=r"operator 0 .*made by the process runner"):
        _load(tmp_path, _with_body(data, operators=(unsent, mul)), graph)


def test_the_arity_of_every_operator_is_checked_first(graph: dtorch.Graph, tmp_path: Path) -> None:
    data = _redistributed(tmp_path)
    convert, mul = _header(data)["body"].operators
    source, made = convert.inputs[0], mul.outputs[0]
    cases = {
        "reads 0 inputs; a Convert reads 1": (dataclasses.replace(convert, inputs=()), mul),
        "reads 2 inputs; a Convert reads 1": (
            dataclasses.replace(convert, inputs=(source, source)), mul
        ),
        "reads 3 inputs; a BroadcastBinary reads 1": (
            convert, dataclasses.replace(mul, inputs=(*mul.inputs, source, source)[:3])
        ),
        # ``* 2`` holds its number in the param: a second tensor would reach its kernel
        "reads 2 inputs; a BroadcastBinary reads 1": (
            convert, dataclasses.replace(mul, inputs=(*mul.inputs, source))
        ),
        "reads and makes nothing": (
            convert, mul, Operator(98, "clone_98", CloneParam(), (), (), mul.span)
        ),
    }  # fmt: skip
    for words, operators in cases.items():
        with pytest.raises(DeserializationError, match=re.escape(words)):
            _load(tmp_path, _with_body(data, operators=operators), graph)
    assert made in _header(data)["body"].outputs


def test_a_body_called_by_name_is_refused(graph: dtorch.Graph, tmp_path: Path) -> None:
    with pytest.raises(DeserializationError, match="names program"):
        _load(tmp_path, _with_body(_redistributed(tmp_path), by_name=True), graph)


def test_a_deep_tree_is_refused_quickly(graph: dtorch.Graph, tmp_path: Path) -> None:
    data = _saved_of(tmp_path, lambda t: t * 2, dtorch.zeros(4))
    tree: tuple[Any, ...] = ("T", 0)
    for _ in range(100):  # within the codec's own limit (MAX_NESTING): the tree's is lower
        tree = ("tuple", (tree,))
    args = ("tuple", (("tuple", (tree,)), ("dict", (), ())))
    with pytest.raises(DeserializationError, match="deeper than 64 levels"):
        _load(tmp_path, _resealed(data, serialize({**_header(data), "args": args})), graph)
    keys = ("k" * 10_000,) * 100 + (1.5,)  # a wide node with a bad key: shown in brief
    wide = ("tuple", (("dict", keys, (("V", 1),) * 101), ("dict", (), ())))
    with pytest.raises(DeserializationError, match="bad dict node") as info:
        _load(tmp_path, _resealed(data, serialize({**_header(data), "args": wide})), graph)
    assert len(str(info.value)) < 400


def test_a_named_result_node_must_name_one_of_torch_s_with_its_fields(
    graph: dtorch.Graph, tmp_path: Path
) -> None:
    """A file's result tree may hold torch's named tuples by name: a name that is not one
    of ``torch.return_types`` (a module path, say) or a wrong field count is refused."""
    data = _saved_of(tmp_path, lambda t: t * 2, dtorch.zeros(4))
    for bad in (("result", "os.system", (("T", 0),)), ("result", "max", (("T", 0),)),
                ("result", 3, (("T", 0), ("V", 1))), ("result", "max", "T")):  # fmt: skip
        header = {**_header(data), "result": bad}
        with pytest.raises(DeserializationError, match=r"bad named-tuple node|unknown tree node"):
            _load(tmp_path, _resealed(data, serialize(header)), graph)


def _created(t: Any) -> Any:
    """Creations of every kind a program may hold, added to ``t`` (float32[4])."""
    mesh, S0 = t.device_mesh, [S(0)]
    kw: dict[str, Any] = {"device_mesh": mesh, "placements": S0}
    made = dtorch.arange(4.0, **kw) + dtorch.full((4,), 0.5, **kw) + dtorch.ones(4, **kw)
    return t + made + dtorch.zeros(4, **kw) + dtorch.from_torch(torch.arange(4.0) * 10, **kw)


def test_creations_whose_data_makes_another_tensor_are_refused(
    graph: dtorch.Graph, tmp_path: Path
) -> None:
    """A creation's kernel builds its values from its own data (arange's bounds, full's fill,
    from_torch's value); data that does not make exactly the declared shape and dtype (a 1 KB
    file making a call allocate 800 MB) is refused."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = dtorch.zeros(4, device_mesh=mesh, placements=[S(0)])
    data = _saved_of(tmp_path, _created, x)
    operators = list(_header(data)["body"].operators)
    changes: dict[CreateKind, list[tuple[dict[str, Any], str]]] = {
        CreateKind.ARANGE: [
            ({"args": (0.0, 1.0, 1.0)}, "makes 1 values"),
            ({"args": (0.0, 2.0e8, 1.0)}, "makes 200000000 values"),
            ({"args": (0.0, 4.0, 0.0)}, "step must be nonzero"),
            ({"args": (0.0, 4.0)}, "has 2 bounds"),
        ],
        CreateKind.FULL: [({"args": (1.0, 2.0)}, "fills with 2 values"), ({"args": ()}, "with 0")],
        CreateKind.ONES: [({"args": (3,)}, "carries data")],
        CreateKind.ZEROS: [({"value": torch.ones(4)}, "carries data")],
        CreateKind.FROM_TENSOR: [
            ({"value": torch.ones(1)}, r"float32\[1\], not the torch.float32\[4\]"),
            ({"value": torch.ones(4, dtype=torch.float64)}, r"of torch.float64\[4\]"),
            ({"value": None}, "without its value"),
        ],
    }
    for index, op in enumerate(operators):
        for change, words in changes.get(getattr(op.param, "create", None), []):  # type: ignore[call-overload]
            bad = dataclasses.replace(op, param=dataclasses.replace(op.param, **change))
            body = (*operators[:index], bad, *operators[index + 1 :])
            with pytest.raises(DeserializationError, match=f"operator {index} .*{words}"):
                _load(tmp_path, _with_body(data, operators=body), graph)
    loaded = dtorch.load_program(tmp_path / "p.dtorch", graph=graph)  # the file as saved
    y = torch.randn(4)
    expected = y + torch.arange(4.0) + 0.5 + 1 + torch.arange(4.0) * 10
    got = loaded(dtorch.from_torch(y, device_mesh=mesh, placements=[S(0)]))
    torch.testing.assert_close(got.to_torch(), expected)


def test_a_load_waits_on_its_own_constants_alone(graph: dtorch.Graph, tmp_path: Path) -> None:
    """An earlier failure of another operator nobody fetched is not the load's: the load
    returns, the failure stays for the next sync, and the constants go with the program."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    w = torch.randn(64, 8)
    half = torch.full((8,), 0.5).to(torch.float8_e4m3fn)  # a dtype torch does not sum
    held = [
        dtorch.from_torch(w, device_mesh=mesh, placements=[S(1)]),
        dtorch.from_torch(half, device_mesh=mesh),
    ]
    fn = lambda t: t @ held[0] + held[1].to(torch.float32)  # noqa: E731
    path = tmp_path / "p.dtorch"
    dtorch.trace(fn, dtorch.zeros(2, 64, device_mesh=mesh)).save(path)
    held.clear()
    gc.collect()
    baseline = graph.get_memory_stats(mesh)
    ints = dtorch.arange(4, device_mesh=mesh)
    failed = ints // dtorch.zeros(4, dtype=torch.int64, device_mesh=mesh)  # never fetched
    program = dtorch.load_program(path, graph=graph)
    x = torch.randn(2, 64)
    torch.testing.assert_close(program(dtorch.from_torch(x, device_mesh=mesh)).to_torch(),
                               x @ w + 0.5)  # fmt: skip
    with pytest.raises(dtorch.DTorchError, match="floor_divide"):
        graph.sync()
    del program, failed, ints
    gc.collect()
    after = graph.get_memory_stats(mesh)
    for device in mesh.device_ids:
        assert after.find(device).memory_allocated == baseline.find(device).memory_allocated


def test_a_save_into_a_missing_directory_names_the_path_given(tmp_path: Path) -> None:
    """The error named the temporary file made beside the target ('.dtorch-<hex>')."""
    program = dtorch.trace(lambda t: t * 2, dtorch.ones(2))
    target = tmp_path / "missing" / "p.dtorch"
    with pytest.raises(FileNotFoundError) as caught:
        program.save(target)
    assert caught.value.filename == str(target)
    assert list(tmp_path.iterdir()) == []


def test_a_save_onto_a_directory_or_through_a_symlink(graph: dtorch.Graph, tmp_path: Path) -> None:
    """A directory is refused naming it (the rename's error named the temporary file), before
    anything is written; a symlink is written through, as torch.save does (the rename put a
    file in the link's place and left its target as it was)."""
    program = dtorch.trace(lambda t: t * 2, dtorch.ones(2))
    with pytest.raises(IsADirectoryError) as caught:
        program.save(tmp_path)
    assert caught.value.filename == str(tmp_path)
    assert list(tmp_path.iterdir()) == []
    real, link = tmp_path / "real.dtorch", tmp_path / "link.dtorch"
    dtorch.trace(lambda t: t * 3, dtorch.ones(2)).save(real)
    link.symlink_to(real)
    program.save(link)
    assert link.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == [link.name, real.name]
    assert dtorch.load_program(real)(dtorch.ones(2)).tolist() == [2.0, 2.0]


def test_a_load_onto_a_closed_graph_is_a_graph_error(
    graph: dtorch.Graph, make_graph: Callable[[], dtorch.Graph], tmp_path: Path
) -> None:
    """Not a DeserializationError (the file is sound), with constants or without (that one
    loaded, and its first call failed)."""
    w = dtorch.ones(2)
    closed = make_graph()
    closed.close()
    for index, fn in enumerate((lambda t: t * 2, lambda t: t * w)):
        path = tmp_path / f"{index}.dtorch"
        dtorch.trace(fn, dtorch.ones(2)).save(path)
        with pytest.raises(dtorch.GraphError, match="is closed; load onto an open graph"):
            dtorch.load_program(path, graph=closed)


def test_a_save_after_its_graph_closed_says_so(
    make_graph: Callable[[], dtorch.Graph], tmp_path: Path
) -> None:
    """The constants' values went with the graph: the error says that (it said no more
    operators could be recorded); a program without constants still saves, and nothing is
    left beside the target."""
    g = make_graph()
    w = dtorch.ones(2, graph=g)
    with_constant = dtorch.trace(lambda t: t * w, dtorch.ones(2, graph=g))
    without = dtorch.trace(lambda t: t * 2, dtorch.ones(2, graph=g))
    g.close()
    with pytest.raises(dtorch.GraphError, match=r"Graph \d+ is closed, .* 1 constant"):
        with_constant.save(tmp_path / "w.dtorch")
    without.save(tmp_path / "p.dtorch")
    assert dtorch.load_program(tmp_path / "p.dtorch")(dtorch.ones(2)).tolist() == [2.0, 2.0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.dtorch"]


def test_a_saved_file_takes_the_umask(tmp_path: Path) -> None:
    """``save`` renames a finished file over the target: the file has the mode ``open``
    would give it (0o666 less the umask), as ``torch.save``'s, not a temporary file's."""
    with dtorch.Graph(dtorch.GraphOption(per_device_per_process=False)).as_default() as g:
        program = dtorch.trace(lambda t: t * 2, dtorch.zeros(4))
        old = os.umask(0o027)
        try:
            program.save(tmp_path / "p.dtorch")
        finally:
            os.umask(old)
    g.close()
    assert stat.S_IMODE(os.stat(tmp_path / "p.dtorch").st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["p.dtorch"]  # no temporary file left

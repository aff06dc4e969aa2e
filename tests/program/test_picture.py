"""Program.summary(), to_dot() and render(): what they say about traced programs.

The collectives a summary names are checked against the redistribute planner's own plan for
each Convert (``collective_counts``), the programs' results against plain torch, and the DOT
text with a small DOT parser written here (no Graphviz on the test machine is needed)."""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

import dtorch
from dtorch.ir.operator import Operator
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import ConvertParam
from dtorch.ir.redistribute import collective_counts, plan_redistribute
from dtorch.program.picture import GraphvizMissingError, quote
from dtorch.program.summary import format_bytes

S, R = dtorch.Shard, dtorch.Replicate


# --- a small DOT parser: the subset to_dot writes, checked token by token ---------------


def _string(text: str, i: int) -> tuple[str, int]:
    """The quoted string starting at ``text[i]``, decoded, and the index after it."""
    out, i = [], i + 1
    while text[i] != '"':
        assert text[i] != "\n", "raw newline inside a quoted string"
        if text[i] == "\\":
            nxt = text[i + 1]
            out.append({"n": "\n", '"': '"', "\\": "\\"}.get(nxt, "\\" + nxt))
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out), i + 1


def tokens(text: str) -> list[tuple[str, str]]:
    """(kind, value) pairs: kind "id", "str" or the punctuation itself."""
    found, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch == '"':
            value, i = _string(text, i)
            found.append(("str", value))
        elif text.startswith("->", i):
            found.append(("->", "->"))
            i += 2
        elif ch in "{}[]=;,":
            found.append((ch, ch))
            i += 1
        elif ch.isalnum() or ch in "_.#":
            j = i
            while j < len(text) and (text[j].isalnum() or text[j] in "_.#"):
                j += 1
            found.append(("id", text[i:j]))
            i = j
        else:
            raise AssertionError(f"unexpected character {ch!r} at {i}")
    return found


@dataclass
class Dot:
    name: str = ""
    nodes: dict[str, dict[str, str]] = field(default_factory=dict)
    edges: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = tokens(text)
        self.at = 0
        self.dot = Dot()

    def take(self, *kinds: str) -> str:
        kind, value = self.toks[self.at]
        assert kind in kinds, f"expected {kinds}, got {kind} {value!r} at token {self.at}"
        self.at += 1
        return value

    def peek(self) -> str:
        return self.toks[self.at][0] if self.at < len(self.toks) else ""

    def graph(self) -> Dot:
        assert self.take("id") == "digraph"
        self.dot.name = self.take("id", "str")
        self.block()
        assert self.at == len(self.toks), "text after the graph"
        return self.dot

    def block(self) -> None:
        self.take("{")
        while self.peek() != "}":
            self.statement()
        self.take("}")

    def attrs(self) -> dict[str, str]:
        found: dict[str, str] = {}
        self.take("[")
        while self.peek() != "]":
            key = self.take("id")
            self.take("=")
            found[key] = self.take("id", "str")
            if self.peek() == ",":
                self.take(",")
        self.take("]")
        return found

    def statement(self) -> None:
        first = self.take("id", "str")
        if first == "subgraph":
            self.take("id")
            self.block()
            return
        if self.peek() == "=":  # a graph attribute
            self.take("=")
            self.take("id", "str")
        elif self.peek() == "->":
            self.take("->")
            dst = self.take("id")
            self.dot.edges.append((first, dst, self.attrs()))
        else:
            found = self.attrs()
            if first not in ("node", "edge"):
                assert first not in self.dot.nodes, f"node {first} declared twice"
                self.dot.nodes[first] = found
        self.take(";")


def parse_dot(text: str) -> Dot:
    """The nodes and edges of ``text``; AssertionError where it is not valid DOT (of the
    subset to_dot writes) or an edge names an undeclared node."""
    dot = _Parser(text).graph()
    for src, dst, _ in dot.edges:
        assert src in dot.nodes and dst in dot.nodes, (src, dst)
    return dot


# --- programs ----------------------------------------------------------------------------


def _rows(summary: str) -> list[list[str]]:
    """The table rows of a summary (after its header row), split on runs of 2+ spaces."""
    lines = summary.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("#  operator"))
    return [[c.strip() for c in line.split("  ") if c.strip()] for line in lines[start + 1 :]]


def _convert_counts(program: dtorch.Program) -> dict[str, int]:
    """What the planner says the program's Converts issue, summed (the oracle)."""
    spec = program.spec
    meta = {o.id: o for o in (*spec.body.operands, *spec.constants)}
    total: dict[str, int] = {}
    for op in spec.body.operators:
        if op.kind == OpKind.Convert:
            src = meta[op.inputs[0]]
            plan = plan_redistribute(
                src.shape, src.mesh, src.placements, op.param.mesh, op.param.placements
            )
            for name, n in collective_counts(plan).items():
                total[name] = total.get(name, 0) + n
    return dict(sorted(total.items()))


def _check_dot(program: dtorch.Program) -> Dot:
    """The program's DOT parses, with a node per operator, distinct input, constant and
    result, an edge per operand read and per result, and Converts styled apart."""
    spec = program.spec
    dot = parse_dot(program.to_dot())
    ops = spec.body.operators
    expected = len(ops) + len(set(spec.body.inputs)) + len(spec.constants) + len(spec.results)
    assert len(dot.nodes) == expected
    assert len(dot.edges) == sum(len(op.inputs) for op in ops) + len(spec.results)
    filled = [n for n, a in dot.nodes.items() if "filled" in a.get("style", "")]
    assert len(filled) == sum(op.kind == OpKind.Convert for op in ops)
    assert dot.name == spec.name
    return dot


def test_explicit_shard_to_replicate_is_an_all_gather(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    full = torch.arange(24.0).reshape(4, 6)
    x = dtorch.from_torch(full, device_mesh=mesh, placements=[S(0)])
    program = dtorch.trace(lambda t: t.redistribute(mesh, [R()]).relu(), x)
    assert torch.equal(program(x).to_torch(), full.relu())
    text = program.summary()
    assert text.splitlines()[0] == (
        f"Program {program.spec.name}: 2 operators, 1 input, 0 constants (0 B), 1 result"
    )
    assert "collectives per call: all_gather 1" in text
    rows = _rows(text)
    assert rows[0][2:] == [
        "Convert", "x0", "float32[4, 6]", "cpu(2,)", "(R,)", rows[0][7], "all_gather(mesh dim 0)"
    ]  # fmt: skip
    assert rows[0][7].startswith("test_picture.py:")
    assert rows[1][2:4] == ["Activation", "#0"] and rows[1][-1] == "-"
    dot = _check_dot(program)
    convert = next(a for a in dot.nodes.values() if "filled" in a.get("style", ""))
    assert "all_gather(mesh dim 0)" in convert["label"]
    assert "float32[4, 6] (R,)" in convert["label"]
    assert sorted(a["label"] for _, _, a in dot.edges) == ["[4, 6]"] * 3


def test_implicit_redistribution_is_a_local_slice_on_the_users_line(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    a, b = torch.randn(4, 6), torch.randn(4, 6)
    x = dtorch.from_torch(a, device_mesh=mesh, placements=[S(0)])
    r = dtorch.from_torch(b, device_mesh=mesh, placements=[R()])  # a constant, replicated

    def add_bias(t: dtorch.Tensor) -> dtorch.Tensor:
        return t + r  # the rule wants r as S(0): the recorder inserts a Convert

    program = dtorch.trace(add_bias, x)
    assert torch.allclose(program(x).to_torch(), a + b)
    ops = program.spec.body.operators
    assert [op.kind for op in ops] == [OpKind.Convert, OpKind.BroadcastBinary]
    assert ops[0].name.startswith("redistribute_") and ops[0].span == ops[1].span
    text = program.summary()
    assert "1 constant (96 B)" in text and "collectives per call: none" in text
    rows = _rows(text)
    assert rows[0][3] == "w0" and rows[0][-1] == "local slice(mesh dim 0)"
    assert rows[0][-2] == rows[1][-2]  # both on the user's line
    assert rows[1][3] == "x0, #0"
    dot = _check_dot(program)
    assert dot.nodes["w0"]["label"] == "constant 0\nfloat32[4, 6]\ncpu(2,) (R,)\n96 B"
    assert ("w0", "op0") in [(s, d) for s, d, _ in dot.edges]


def test_partial_to_replicate_is_an_all_reduce(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    a, b = torch.randn(4, 6), torch.randn(6, 3)
    x = dtorch.from_torch(a, device_mesh=mesh, placements=[S(1)])
    w = dtorch.from_torch(b, device_mesh=mesh, placements=[S(0)])
    program = dtorch.trace(lambda t: (t @ w).redistribute(mesh, [R()]), x)  # S(k) x S(k) -> P
    assert torch.allclose(program(x).to_torch(), a @ b, atol=1e-5)
    text = program.summary()
    assert "collectives per call: all_reduce 1" in text
    rows = _rows(text)
    assert rows[0][2:7] == ["Matmul", "x0, w0", "float32[4, 3]", "cpu(2,)", "(P,)"]
    assert rows[1][2] == "Convert" and rows[1][6] == "(R,)"
    assert rows[1][-1] == "all_reduce(mesh dim 0)"
    assert "constant 0  float32[6, 3] on cpu(2,) (S(0),)  72 B" in text
    _check_dot(program)


def test_two_dim_mesh_names_each_step_and_counts_match_the_planner(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    full = torch.randn(4, 6)
    x = dtorch.from_torch(full, device_mesh=mesh, placements=[S(0), S(1)])

    def moves(t: dtorch.Tensor) -> tuple[dtorch.Tensor, dtorch.Tensor]:
        gathered = t.redistribute(mesh, [R(), R()])
        swapped = t.redistribute(mesh, [S(1), S(0)])
        return gathered, swapped.redistribute(mesh, [R(), S(0)])

    program = dtorch.trace(moves, x)
    gathered, moved = program(x)
    assert torch.equal(gathered.to_torch(), full) and torch.equal(moved.to_torch(), full)
    text = program.summary()
    counts = _convert_counts(program)
    assert counts["all_gather"] >= 2
    line = ", ".join(f"{name} {n}" for name, n in counts.items())
    assert f"collectives per call: {line}" in text
    assert "all_gather(mesh dim 0)" in text and "all_gather(mesh dim 1)" in text
    steps = [r[-1] for r in _rows(text)]  # a row per planned step (continuations too)
    planned = sum(max(1, len(_plan_steps(program, op))) for op in program.spec.body.operators)
    assert len(steps) == planned
    _check_dot(program)


def _plan_steps(program: dtorch.Program, op: Operator) -> tuple[object, ...]:
    spec = program.spec
    param = op.param
    if not isinstance(param, ConvertParam):
        return ()
    meta = {o.id: o for o in (*spec.body.operands, *spec.constants)}
    src = meta[op.inputs[0]]
    return plan_redistribute(
        src.shape, src.mesh, src.placements, param.mesh, param.placements
    ).steps


def test_partial_to_shard_and_shard_to_shard(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = dtorch.from_torch(torch.randn(4, 6), device_mesh=mesh, placements=[S(1)])
    w = dtorch.from_torch(torch.randn(6, 4), device_mesh=mesh, placements=[S(0)])
    program = dtorch.trace(
        lambda t: ((t @ w).redistribute(mesh, [S(0)]), t.redistribute(mesh, [S(0)])), x
    )
    text = program.summary()
    assert "reduce_scatter(mesh dim 0)" in text and "all_to_all(mesh dim 0)" in text
    assert "collectives per call: all_to_all 1, reduce_scatter 1" in text
    _check_dot(program)


def test_in_place_aliases_and_passed_through_results(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = dtorch.zeros(4, 2, device_mesh=mesh, placements=[S(0)])
    w = dtorch.ones(4, 2, device_mesh=mesh, placements=[S(0)])

    def f(a: dtorch.Tensor, b: dtorch.Tensor) -> tuple[dtorch.Tensor, ...]:
        a[0] = 1.0
        return a + b, a, w

    program = dtorch.trace(f, x, x)
    text = program.summary()
    rows = _rows(text)
    assert rows[0][2:5] == ["SetItem", "x0", "writes x0"]
    assert "result 1    x0 " in text and "result 2    w0 " in text
    dot = _check_dot(program)
    assert dot.nodes["x0"]["label"].startswith("input 0, 1\n")  # one tensor, two slots
    # the add reads what the setitem wrote: its edges start at the setitem
    assert [(s, d) for s, d, _ in dot.edges if d == "op1"] == [("op0", "op1")] * 2
    assert ("x0", "r1") not in [(s, d) for s, d, _ in dot.edges]


def test_labels_are_escaped(graph: dtorch.Graph) -> None:
    def f(t: dtorch.Tensor) -> dtorch.Tensor:
        return t * 2

    f.__qualname__ = 'we"ird\\name\nwith a line'
    program = dtorch.trace(f, dtorch.zeros(3))
    assert program.spec.name == 'we"ird\\name\\nwith a line'  # the newline shown escaped
    text = program.to_dot()
    assert 'digraph "we\\"ird\\\\name\\\\nwith a line" {' in text
    assert parse_dot(text).name == program.spec.name
    _check_dot(program)
    assert program.summary().startswith('Program we"ird\\name')


def test_quote_and_format_bytes() -> None:
    assert quote('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'
    assert _string(quote('x\\"\\\\n\n'), 0)[0] == 'x\\"\\\\n\n'
    assert [format_bytes(n) for n in (0, 1023, 1024, 1536, 3 * 2**20)] == [
        "0 B", "1023 B", "1.0 KiB", "1.5 KiB", "3.0 MiB"
    ]  # fmt: skip


def test_parser_rejects_bad_dot() -> None:
    for bad in ['digraph "a {', 'digraph a { x [label="a"]; ', "digraph a { x -> y; }"]:
        with pytest.raises((AssertionError, IndexError)):
            parse_dot(bad)


# --- render ------------------------------------------------------------------------------


def _program() -> dtorch.Program:
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = dtorch.ones(4, 2, device_mesh=mesh, placements=[S(0)])
    return dtorch.trace(lambda t: t.redistribute(mesh, [R()]), x)


def _fake_dot(folder: Path, body: str) -> None:
    """A ``dot`` program in ``folder`` that runs the shell ``body``."""
    folder.mkdir()
    script = folder / "dot"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


def test_render_without_graphviz_says_what_to_install(
    graph: dtorch.Graph, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    program = _program()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(GraphvizMissingError, match=r"install Graphviz.*to_dot\(\) works"):
        program.render(tmp_path / "p.svg")
    assert not (tmp_path / "p.svg").exists()
    written = program.render(tmp_path / "p.dot")  # DOT text needs no Graphviz
    assert written.read_text() == program.to_dot()


def test_render_pipes_the_dot_text_through_dot(
    graph: dtorch.Graph, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    program = _program()
    _fake_dot(tmp_path / "bin", 'echo "$1"; cat')  # prints its format flag, then the input
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    out = program.render(tmp_path / "p.SVG")
    assert out.read_text() == "-Tsvg\n" + program.to_dot()
    assert program.render(str(tmp_path / "p.out"), format="png").read_text().startswith("-Tpng")


def test_render_reports_dot_failures_and_bad_formats(
    graph: dtorch.Graph, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    program = _program()
    _fake_dot(tmp_path / "bin", 'echo "syntax error in line 3" >&2; exit 2')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(RuntimeError, match=r"dot -Tsvg failed \(2\): syntax error in line 3"):
        program.render(tmp_path / "p.svg")
    with pytest.raises(ValueError, match="has no suffix"):
        program.render(tmp_path / "picture")
    with pytest.raises(ValueError, match="unknown format 'bmp'"):
        program.render(tmp_path / "p.bmp")


def test_render_svg_with_graphviz(graph: dtorch.Graph, tmp_path: Path) -> None:
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot program is not installed")
    out = _program().render(tmp_path / "p.svg")
    text = out.read_text()
    assert "<svg" in text and "all_gather(mesh dim 0)" in text


def _in_kernel_program(t: dtorch.Tensor) -> tuple[dtorch.Tensor, ...]:
    return (
        t.amax(1),
        t.argmax(0),
        t.softmax(1),
        t.cumsum(1),
        t.sort(1).values,
        t.topk(2, 1).values,
        t.median(1).values,
        t.cummax(0).values,
    )


def test_collectives_inside_kernels_are_named_and_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Reductions, softmax, scans, sorts and order statistics over a sharded dim communicate
    inside their kernels: the summary names those collectives on their rows and counts them,
    as many as the runtime issues (counted on ThreadGroup, once per line: by the caller of
    each line's rank 0; a collective along a mesh dim of the 2x2 mesh runs on its 2 lines)."""
    from dtorch.comm.group import group as group_module

    issued: list[str] = []
    for name in ("all_gather", "all_reduce", "broadcast"):
        original = getattr(group_module.ThreadGroup, name)

        def counted(
            self: object,
            inputs: object,
            *a: object,
            _f: object = original,
            _n: str = name,
            **k: object,
        ) -> object:
            if 0 in inputs:  # type: ignore[operator]
                issued.append(_n)
            return _f(self, inputs, *a, **k)  # type: ignore[operator]

        monkeypatch.setattr(group_module.ThreadGroup, name, counted)
    graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=False))
    try:
        mesh = dtorch.init_device_mesh("cpu", (2, 2))
        full = torch.randn(4, 6)
        x = dtorch.from_torch(full, device_mesh=mesh, placements=[S(0), S(1)], graph=graph)
        program = dtorch.trace(_in_kernel_program, x)
        graph.sync()  # tracing runs the operators once: not counted
        issued.clear()
        results = program(x)
        graph.sync()
        runtime = {name: issued.count(name) // 2 for name in set(issued)}  # 2 lines each
        for got, want in zip(results, _in_kernel_program(full), strict=True):  # type: ignore[arg-type]
            torch.testing.assert_close(got.to_torch(), want)
    finally:
        graph.close()
    text = program.summary()
    assert "collectives per call: all_gather 12, all_reduce 2" in text
    assert runtime == {"all_gather": 12, "all_reduce": 2}
    comm = {row[1].rsplit("_", 1)[0]: row[-1] for row in _rows(text) if row[0].isdigit()}
    assert comm["amax"] == "all_gather(mesh dim 1) in kernel"
    assert comm["argmax"] == "all_gather(mesh dim 0) x2 in kernel"
    assert comm["softmax"] == "all_reduce(mesh dim 1) x2 in kernel"
    assert comm["cummax"] == "all_gather(mesh dim 0) x2 in kernel"


def test_every_group_kernel_has_an_in_kernel_rule() -> None:
    from dtorch.kernels.table import GROUP_KERNELS
    from dtorch.program.in_kernel import IN_KERNEL

    assert set(IN_KERNEL) == set(GROUP_KERNELS) - {OpKind.Convert}  # a Convert: its plan

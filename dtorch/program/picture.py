"""A program's picture: Graphviz DOT text of its data flow, and rendering it to a file.

``to_dot(spec)`` (``Program.to_dot()``) needs nothing installed. It draws one node per
distinct tensor input (an input passed in several argument slots is one node naming them
all), per constant (weights: one node each, grouped in a dashed box), per operator and per
result, and one edge per operand an operator reads and per result, labelled with the
operand's shape. An operator's label is its name, kind, and each output's dtype, shape and
placements; Convert operators (redistributions, explicit or inserted by the recorder) are
drawn as filled boxes labelled with the collectives the redistribute planner plans for them.
Every label is a quoted DOT string with its quotes and backslashes escaped, so any program
name or file name gives valid DOT.

``render(spec, path, format=None)`` (``Program.render``) pipes that text through Graphviz's
``dot`` program to write an SVG, PNG or PDF (the format from the path's suffix), or writes
the DOT text itself for ``.dot``/``.gv``. Without ``dot`` it raises ``GraphvizMissingError``
saying what to install (the ``graphviz`` package from PyPI alone does not bring the program).

Example:
    >>> import dtorch
    >>> mesh = dtorch.init_device_mesh("cpu", 2)
    >>> x = dtorch.ones(4, 2, device_mesh=mesh, placements=[dtorch.Shard(0)])
    >>> program = dtorch.trace(lambda t: t.redistribute(mesh, [dtorch.Replicate()]) * 2, x)
    >>> text = to_dot(program.spec)
    >>> text.splitlines()[0], text.count(" -> ")
    ('digraph "<lambda>" {', 3)
    >>> "all_gather(mesh dim 0)" in text
    True
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from dtorch.errors import DTorchError
from dtorch.ir.operator import Operand, Operator
from dtorch.ir.placement import format_placements
from dtorch.program.spec import ProgramSpec
from dtorch.program.summary import (
    convert_plan,
    format_bytes,
    layout_text,
    mesh_text,
    nbytes,
    operand_table,
    span_text,
    step_texts,
    tensor_text,
)
from dtorch.runtime.shards import IN_PLACE_KINDS

#: Formats ``dot -T`` writes that ``render`` accepts (others are refused before running it).
IMAGE_FORMATS = frozenset({"svg", "png", "pdf", "jpg", "jpeg", "gif", "ps", "eps"})

#: Formats ``render`` writes itself: the DOT text.
TEXT_FORMATS = frozenset({"dot", "gv"})

_DOT_TIMEOUT_S = 120  # a picture of thousands of operators still lays out well within this

_HEAD = [
    "  rankdir=TB;",
    '  node [shape=box, fontname="monospace", fontsize=10];',
    '  edge [fontname="monospace", fontsize=9];',
]

_CONVERT_STYLE = 'shape=box, style="filled,rounded", fillcolor="#fde9b8"'


class GraphvizMissingError(DTorchError, RuntimeError):
    """Rendering needs Graphviz's ``dot`` program, which is not installed."""


def quote(text: str) -> str:
    r"""``text`` as a quoted DOT string: backslashes and quotes escaped, lines as ``\n``.

    Example:
        >>> print(quote('say "hi"\\now\nnext'))
        "say \"hi\"\\now\nnext"
    """
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\r", "").replace("\n", "\\n") + '"'


def _node(name: str, label: str, style: str = "", indent: str = "    ") -> str:
    return f"{indent}{name} [label={quote(label)}{', ' + style if style else ''}];"


def _edge(src: str, dst: str, operand: Operand) -> str:
    return f"  {src} -> {dst} [label={quote(str(list(operand.shape)))}];"


def _cluster(name: str, label: str, nodes: list[str], style: str) -> list[str]:
    """A labelled box around ``nodes`` (none: nothing)."""
    if not nodes:
        return []
    head = [f"  subgraph cluster_{name} {{", f"    label={quote(label)}; {style}"]
    return [*head, *nodes, "  }"]


def _input_nodes(spec: ProgramSpec) -> tuple[list[str], dict[int, str]]:
    """A node per distinct input placeholder, naming every slot bound to it."""
    slots: dict[int, list[int]] = {}
    for slot, placeholder in enumerate(spec.body.inputs):
        slots.setdefault(placeholder, []).append(slot)
    nodes, sources = [], {}
    for placeholder, bound in slots.items():
        name = f"x{bound[0]}"
        label = f"input {', '.join(map(str, bound))}\n{_layout_lines(spec.inputs[bound[0]])}"
        nodes.append(_node(name, label, "shape=ellipse"))
        sources[placeholder] = name
    return nodes, sources


def _constant_nodes(spec: ProgramSpec) -> tuple[list[str], dict[int, str]]:
    """A node per constant (a weight): its shape, placements and bytes."""
    nodes, sources = [], {}
    for index, constant in enumerate(spec.constants):
        label = f"constant {index}\n{_layout_lines(constant)}\n{format_bytes(nbytes(constant))}"
        nodes.append(_node(f"w{index}", label, "shape=note"))
        sources[constant.id] = f"w{index}"
    return nodes, sources


def _layout_lines(operand: Operand) -> str:
    return f"{tensor_text(operand)}\n{mesh_text(operand)} {format_placements(operand.placements)}"


def _operator_node(index: int, op: Operator, operands: dict[int, Operand]) -> str:
    """The operator's node; a Convert is filled and names its planned steps."""
    lines = [op.name, f"{op.kind.name}  {span_text(op)}"]
    lines += [
        f"{tensor_text(operands[o])} {format_placements(operands[o].placements)}"
        for o in op.outputs
    ] or ["writes its first input"]
    plan = convert_plan(op, operands)
    if plan is None:
        return _node(f"op{index}", "\n".join(lines), indent="  ")
    return _node(f"op{index}", "\n".join([*lines, *step_texts(plan)]), _CONVERT_STYLE, "  ")


def _made(op: Operator) -> tuple[int, ...]:
    """The ids whose value ``op`` leaves: its outputs, or the input an in-place op writes
    (later readers of it read what ``op`` wrote, so their edges start at ``op``)."""
    if op.kind in IN_PLACE_KINDS and not op.outputs:
        return op.inputs[:1]
    return op.outputs


def _result_nodes(spec: ProgramSpec) -> list[str]:
    return [
        _node(f"r{i}", f"result {i}\n{layout_text(meta)}", "shape=ellipse, peripheries=2")
        for i, meta in enumerate(spec.results)
    ]


def to_dot(spec: ProgramSpec) -> str:
    """The DOT text of ``spec``'s data flow (see the module docstring)."""
    operands = operand_table(spec)
    inputs, sources = _input_nodes(spec)
    constants, weights = _constant_nodes(spec)
    sources.update(weights)
    lines = [f"digraph {quote(spec.name)} {{", *_HEAD]
    lines += _cluster("inputs", "inputs", inputs, "style=dotted;")
    lines += _cluster("constants", "constants", constants, "style=dashed;")
    edges = []
    for index, op in enumerate(spec.body.operators):
        lines.append(_operator_node(index, op, operands))
        edges += [_edge(sources[i], f"op{index}", operands[i]) for i in op.inputs]
        sources.update((o, f"op{index}") for o in _made(op))
    lines += _cluster("results", "results", _result_nodes(spec), "style=dotted;")
    for i, local in enumerate(spec.body.outputs):
        edges.append(_edge(sources[local], f"r{i}", operands[local]))
    return "\n".join([*lines, *edges, "}"]) + "\n"


def _format_of(path: Path, format: str | None) -> str:
    """The output format: ``format`` or the path's suffix, lower case, checked."""
    chosen = (format or path.suffix.removeprefix(".")).lower()
    if not chosen:
        raise ValueError(f"render: {str(path)!r} has no suffix; pass format='svg' (or 'png')")
    if chosen not in IMAGE_FORMATS | TEXT_FORMATS:
        known = ", ".join(sorted(IMAGE_FORMATS | TEXT_FORMATS))
        raise ValueError(f"render: unknown format {chosen!r}; one of {known}")
    return chosen


def run_dot(text: str, format: str) -> bytes:
    """What Graphviz's ``dot -T<format>`` makes of ``text``."""
    try:
        done = subprocess.run(
            ["dot", f"-T{format}"], input=text.encode(), capture_output=True,
            timeout=_DOT_TIMEOUT_S, check=False,
        )  # fmt: skip
    except FileNotFoundError:
        raise GraphvizMissingError(
            "render needs Graphviz's `dot` program on PATH: install Graphviz (apt-get install "
            "graphviz, brew install graphviz, or conda install graphviz; the `graphviz` package "
            "from PyPI alone does not bring the program). to_dot() works without it: its text "
            "renders in any Graphviz viewer"
        ) from None
    if done.returncode != 0:
        detail = done.stderr.decode(errors="replace").strip()
        raise RuntimeError(f"render: dot -T{format} failed ({done.returncode}): {detail}")
    return done.stdout


def render(spec: ProgramSpec, path: str | os.PathLike[str], format: str | None = None) -> Path:
    """Write the picture of ``spec`` to ``path`` (format from the suffix unless given);
    returns the path written."""
    target = Path(path)
    chosen = _format_of(target, format)
    text = to_dot(spec)
    if chosen in TEXT_FORMATS:
        target.write_text(text)
    else:
        target.write_bytes(run_dot(text, chosen))
    return target

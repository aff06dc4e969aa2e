"""A program's summary: one row per operator, with the collectives each Convert issues.

``summary(spec)`` (``Program.summary()``) is plain fixed-width text: a header (the program's
name, how many operators, inputs, constants with their full-tensor bytes, and results, and
how many collectives of each kind one call issues), the inputs, constants and results, then
a table with one row per operator: its index, name, kind, what it reads, each output's
dtype and shape, mesh and placements, the user line that recorded it, and, for a Convert
(an explicit ``redistribute`` or an implicit ``redistribute_N`` the recorder inserted), the
steps the redistribute planner plans for it (``dtorch.ir.redistribute.plan_redistribute``,
what the Convert kernel executes), such as ``all_gather(mesh dim 0)`` or ``local slice``;
for an operator that communicates inside its kernel (a reduction, sort or softmax over a
sharded dim, ring attention), the collectives it issues there (``dtorch.program.in_kernel``),
such as ``all_gather(mesh dim 0) x2 in kernel``. The header counts both.

In the "reads" column ``x0`` is tensor input 0, ``w0`` constant 0 and ``#3`` what operator 3
made. The summary reads metadata only: it records nothing and never waits for the devices.

Example:
    >>> import dtorch
    >>> mesh = dtorch.init_device_mesh("cpu", 2)
    >>> x = dtorch.ones(4, 2, device_mesh=mesh, placements=[dtorch.Shard(0)])
    >>> program = dtorch.trace(lambda t: t.redistribute(mesh, [dtorch.Replicate()]).relu(), x)
    >>> print(summary(program.spec))  # doctest: +NORMALIZE_WHITESPACE
    Program <lambda>: 2 operators, 1 input, 0 constants (0 B), 1 result
    collectives per call: all_gather 1
    input 0     float32[4, 2] on cpu(2,) (S(0),)
    result 0    #1 float32[4, 2] on cpu(2,) (R,)
    #  operator          kind        reads  output       mesh     placements  line  comm
    0  redistribute_...  Convert     x0  float32[4, 2]  cpu(2,)  (R,)  ...  all_gather(mesh dim 0)
    1  relu_...          Activation  #0  float32[4, 2]  cpu(2,)  (R,)  ...  -
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from dtorch.ir.operator import Operand, Operator
from dtorch.ir.params import ConvertParam
from dtorch.ir.placement import format_placements
from dtorch.ir.redistribute import (
    TRANSFER_TYPES,
    AllGather,
    AllReduce,
    AllToAll,
    LocalChunk,
    RedistributePlan,
    ReduceScatter,
    ShardToPartial,
    Step,
    ZeroNonOwner,
    collective_counts,
    plan_redistribute,
)
from dtorch.program.in_kernel import in_kernel, issued_text
from dtorch.program.spec import ProgramSpec

_COLUMNS = ("#", "operator", "kind", "reads", "output", "mesh", "placements", "line", "comm")


def operand_table(spec: ProgramSpec) -> dict[int, Operand]:
    """The metadata of every id the body reads or makes: its local operands and constants."""
    table = {o.id: o for o in spec.constants}
    table.update((o.id, o) for o in spec.body.operands)
    return table


def source_names(spec: ProgramSpec) -> dict[int, str]:
    """A short name for every id: ``x0`` (input slot 0), ``w0`` (constant 0), ``#3``
    (made by operator 3); an input bound to several slots is named by its first."""
    names = {c.id: f"w{i}" for i, c in enumerate(spec.constants)}
    for slot, placeholder in reversed(list(enumerate(spec.body.inputs))):
        names[placeholder] = f"x{slot}"
    for index, op in enumerate(spec.body.operators):
        names.update((o, f"#{index}") for o in op.outputs)
    return names


def convert_plan(op: Operator, operands: dict[int, Operand]) -> RedistributePlan | None:
    """The plan the Convert kernel runs for ``op`` (None: ``op`` is no Convert)."""
    param = op.param
    if not isinstance(param, ConvertParam):
        return None
    src = operands[op.inputs[0]]
    return plan_redistribute(src.shape, src.mesh, src.placements, param.mesh, param.placements)


def _along(step: Any) -> str:
    return f"{step.collective}(mesh dim {step.mesh_dim})"


def _transfer(step: Any) -> str:
    count = step.count
    if count == 0:  # every move stays on its device
        return "local copy"
    return step.collective if count == 1 else f"{step.collective} x{count}"


#: How each step type reads in a picture (the planner's own step records, by type).
_STEP_TEXT: dict[type[Step], Callable[[Any], str]] = {
    AllGather: _along,
    AllToAll: _along,
    ReduceScatter: _along,
    AllReduce: _along,
    LocalChunk: lambda s: f"local slice(mesh dim {s.mesh_dim})",
    ZeroNonOwner: lambda s: f"zero non-owners(mesh dim {s.mesh_dim})",
    ShardToPartial: lambda s: f"shard to partial(mesh dim {s.mesh_dim})",
    **dict.fromkeys(TRANSFER_TYPES, _transfer),
}


def step_texts(plan: RedistributePlan) -> tuple[str, ...]:
    """Each step of ``plan`` in words; ``("none",)`` for a plan without steps."""
    return tuple(_STEP_TEXT[type(s)](s) for s in plan.steps) or ("none",)


def program_counts(spec: ProgramSpec) -> dict[str, int]:
    """How many collectives of each kind one call of the program issues (its Converts, and
    the operators that communicate inside their kernels)."""
    operands = operand_table(spec)
    counts: Counter[str] = Counter()
    for op in spec.body.operators:
        plan = convert_plan(op, operands)
        if plan is not None:
            counts.update(collective_counts(plan))
        for collective, count, _ in in_kernel(op, operands) or ():
            counts[collective] += count
    return dict(sorted(counts.items()))


def comm_texts(op: Operator, operands: dict[int, Operand]) -> tuple[str, ...]:
    """The "comm" cells of ``op``: its Convert plan's steps, or the collectives it issues
    inside its kernel, or ``-``."""
    plan = convert_plan(op, operands)
    if plan is not None:
        return step_texts(plan)
    return tuple(map(issued_text, in_kernel(op, operands) or ())) or ("-",)


def nbytes(operand: Operand) -> int:
    """Bytes of the full tensor (all shards together, replicas counted once)."""
    numel = 1
    for size in operand.shape:
        numel *= size
    return numel * operand.dtype.itemsize


def format_bytes(count: int) -> str:
    """``72 B``, ``1.5 KiB``, ``3.0 MiB``: binary units, one decimal past bytes."""
    if count < 1024:
        return f"{count} B"
    value = float(count)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:.1f} {unit}"


def tensor_text(operand: Operand) -> str:
    """``float32[4, 2]``."""
    return f"{str(operand.dtype).removeprefix('torch.')}{list(operand.shape)}"


def mesh_text(operand: Operand) -> str:
    """``cpu(2, 2)``: the device type and the mesh shape."""
    return f"{operand.mesh.device_kind}{operand.mesh.shape}"


def layout_text(operand: Operand) -> str:
    """``float32[4, 2] on cpu(2,) (S(0),)``."""
    return f"{tensor_text(operand)} on {mesh_text(operand)} {format_placements(operand.placements)}"


def span_text(op: Operator) -> str:
    """``model.py:12``: the file's base name and line of the user code (``-`` if unknown)."""
    span = op.span
    return "-" if span.is_unknown() else f"{os.path.basename(span.file)}:{span.line}"


def plural(count: int, noun: str) -> str:
    """``count`` and ``noun``, in the plural unless one.

    Example:
        >>> plural(1, "operator"), plural(2, "input")
        ('1 operator', '2 inputs')
    """
    return f"{count} {noun}{'' if count == 1 else 's'}"


def header_lines(spec: ProgramSpec) -> list[str]:
    """The program's counts, then its collectives per call."""
    weights = sum(nbytes(c) for c in spec.constants)
    counts = program_counts(spec)
    comm = ", ".join(f"{name} {n}" for name, n in counts.items()) or "none"
    return [
        f"Program {spec.name}: {plural(len(spec.body.operators), 'operator')}, "
        f"{plural(len(spec.inputs), 'input')}, {plural(len(spec.constants), 'constant')} "
        f"({format_bytes(weights)}), {plural(len(spec.results), 'result')}",
        f"collectives per call: {comm}",
    ]


def boundary_lines(spec: ProgramSpec) -> list[str]:
    """One line per input slot, constant and result."""
    names = source_names(spec)
    lines = [f"input {i:<5} {layout_text(o)}" for i, o in enumerate(spec.inputs)]
    lines += [
        f"constant {i:<2} {layout_text(c)}  {format_bytes(nbytes(c))}"
        for i, c in enumerate(spec.constants)
    ]
    for i, (local, meta) in enumerate(zip(spec.body.outputs, spec.results, strict=True)):
        lines.append(f"result {i:<4} {names.get(local, '?')} {layout_text(meta)}")
    return lines


def operator_rows(spec: ProgramSpec) -> list[tuple[str, ...]]:
    """The table's rows: one per operator, plus a row per extra output or Convert step."""
    operands, names = operand_table(spec), source_names(spec)
    rows: list[tuple[str, ...]] = []
    for index, op in enumerate(spec.body.operators):
        comm = comm_texts(op, operands)
        outputs = [operands[o] for o in op.outputs]
        reads = ", ".join(names.get(i, "?") for i in op.inputs)
        first = (str(index), op.name, op.kind.name, reads)
        for line in range(max(len(outputs), len(comm), 1)):
            lead = first if line == 0 else ("",) * 4
            out = _output_cells(outputs[line] if line < len(outputs) else None, line, reads)
            tail = (span_text(op) if line == 0 else "", comm[line] if line < len(comm) else "")
            rows.append((*lead, *out, *tail))
    return rows


def _output_cells(operand: Operand | None, line: int, reads: str) -> tuple[str, str, str]:
    """Output, mesh and placements cells (an in-place operator writes its first input)."""
    if operand is None:
        return (f"writes {reads.partition(',')[0]}" if line == 0 else "", "", "")
    return tensor_text(operand), mesh_text(operand), format_placements(operand.placements)


def format_table(rows: Sequence[tuple[str, ...]], columns: tuple[str, ...]) -> list[str]:
    """Left-aligned fixed-width columns two spaces apart, trailing blanks stripped."""
    widths = [max(len(r[c]) for r in (columns, *rows)) for c in range(len(columns))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
        for r in (columns, *rows)
    ]


def summary(spec: ProgramSpec) -> str:
    """The whole summary of ``spec`` (see the module docstring)."""
    lines = header_lines(spec) + boundary_lines(spec)
    return "\n".join(lines + format_table(operator_rows(spec), _COLUMNS))

"""The checks of a program spec read from a file (``load_program``): everything a saved
program may hold, refused with a DeserializationError naming the first thing that does not
fit, before anything runs. A file is data: every operator must be one its rule accepts with
the operands the file gives, ids defined before use, the result trees built of its leaves.

Example:
    >>> import dtorch
    >>> x = dtorch.ones(2)
    >>> check_spec(dtorch.trace(lambda t: t * 2, x).spec)  # a traced program fits
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dtorch.errors import DeserializationError
from dtorch.ir.operator import Operand, Operator
from dtorch.ir.placement import Shard
from dtorch.program.inferred import arity, mismatch
from dtorch.program.spec import ProgramSpec
from dtorch.program.trace import refusal
from dtorch.program.tree import check_tree
from dtorch.runtime.subgraph import MAX_BODY, runs_in_body


def _bad(message: str) -> DeserializationError:
    return DeserializationError(message)


def check_type(value: Any, kind: type, what: str) -> None:
    if not isinstance(value, kind):
        raise _bad(f"{what} is a {type(value).__name__}, expected a {kind.__name__}")


def check_printable(text: str, what: str) -> None:
    # names reach terminals in messages and summaries: no escape sequences from a file
    if not text.isprintable():
        raise _bad(f"{what} {text[:200]!r} holds control characters")


def check_items(value: Any, kind: type, what: str) -> None:
    check_type(value, tuple, what)
    for index, item in enumerate(value):
        check_type(item, kind, f"{what}[{index}]")


def check_spec(spec: ProgramSpec) -> None:
    """DeserializationError naming the first thing in ``spec`` a saved program cannot hold."""
    body = spec.body
    if body.program != 0 or body.by_name or len(body.operators) > MAX_BODY:
        raise _bad(f"the body names program {body.program} or has too many operators")
    local = _by_id(body.operands, "body operand")
    constants = _by_id(spec.constants, "constant")
    if local.keys() & constants.keys():
        raise _bad(f"ids {sorted(local.keys() & constants.keys())} are local and constant")
    for operand in (*spec.inputs, *spec.constants, *spec.results, *body.operands):
        _check_operand(operand)
    defined = _check_inputs(spec, local) | constants.keys()
    for index, op in enumerate(body.operators):
        _check_operator(op, index, local, defined)
    if local.keys() - defined:
        raise _bad(f"body operands {sorted(local.keys() - defined)} are made by nothing")
    known = {**local, **constants}
    for index, op in enumerate(body.operators):  # what each makes, by its rule
        wrong = mismatch(
            op, tuple(known[i] for i in op.inputs), tuple(known[o] for o in op.outputs)
        )
        if wrong is not None:
            raise _bad(f"body operator {index} ({op.describe()}) {wrong}")
    _check_outputs(spec, known)
    _check_trees(spec)


def _by_id(operands: tuple[Operand, ...], what: str) -> dict[int, Operand]:
    found = {o.id: o for o in operands}
    if len(found) != len(operands):
        raise _bad(f"two {what}s share an id")
    return found


def _check_operand(operand: Operand) -> None:
    ndim, placements = len(operand.shape), operand.placements
    if len(placements) != operand.mesh.ndim or any(d < 0 for d in operand.shape):
        raise _bad(f"operand {operand.describe()}: bad shape or placements for its mesh")
    for p in placements:
        if isinstance(p, Shard) and not -ndim <= p.dim < ndim:
            raise _bad(f"operand {operand.describe()}: {p} of a {ndim}-D tensor")


def _same_meta(a: Operand, b: Operand) -> bool:
    return (a.shape, a.dtype, a.mesh, a.placements) == (b.shape, b.dtype, b.mesh, b.placements)


def _check_inputs(spec: ProgramSpec, local: dict[int, Operand]) -> set[int]:
    """The placeholder ids, checked against the inputs' metadata."""
    body = spec.body
    if len(body.inputs) != len(spec.inputs):
        raise _bad(f"{len(body.inputs)} placeholders for {len(spec.inputs)} inputs")
    for index, (placeholder, traced) in enumerate(zip(body.inputs, spec.inputs, strict=True)):
        if placeholder not in local or not _same_meta(local[placeholder], traced):
            raise _bad(f"input {index}: placeholder {placeholder} is no body operand like it")
    if list(body.writes) != sorted(set(body.writes)) or not set(body.writes) <= set(
        range(len(body.inputs))
    ):
        raise _bad(f"written inputs {body.writes} are not increasing input positions")
    return set(body.inputs)


def _check_operator(op: Operator, index: int, local: dict[int, Operand], defined: set[int]) -> None:
    """``op`` may run here: an allowed kind a body runs, with the inputs and outputs it
    takes, reading defined ids, making new local ones."""
    check_type(op.name, str, f"body operator {index}'s name")
    check_printable(op.name, f"body operator {index}'s name")
    if refusal(op.param) is not None:
        raise _bad(f"body operator {index} is {op.describe()}, which a program may not hold")
    if not runs_in_body(op.kind):
        raise _bad(f"body operator {index} is {op.describe()}, which no kernel runs")
    wrong = arity(op)
    if wrong is not None:
        raise _bad(f"body operator {index} ({op.describe()}) {wrong}")
    missing = [i for i in op.inputs if i not in defined]
    if missing:
        raise _bad(f"body operator {index} ({op.describe()}) reads undefined ids {missing}")
    for output in op.outputs:
        if output not in local or output in defined:
            raise _bad(f"body operator {index} ({op.describe()}) makes id {output} again or "
                       "outside the body")  # fmt: skip
        defined.add(output)


def _check_outputs(spec: ProgramSpec, known: dict[int, Operand]) -> None:
    outputs = spec.body.outputs
    if len(outputs) != len(spec.results):
        raise _bad(f"{len(outputs)} body outputs for {len(spec.results)} results")
    for index, (output, result) in enumerate(zip(outputs, spec.results, strict=True)):
        if output not in known or not _same_meta(known[output], result):
            raise _bad(f"result {index}: body output {output} is no operand like it")


def _check_trees(spec: ProgramSpec) -> None:
    for tree, count, what in ((spec.args, len(spec.inputs), "argument"),
                              (spec.result, len(spec.results), "result")):  # fmt: skip
        try:
            check_tree(tree, count)
        except ValueError as exc:
            raise _bad(f"the {what} tree: {exc}") from None
        if list(_leaves(tree)) != list(range(count)):
            raise _bad(f"the {what} tree's tensor leaves are not 0..{count - 1} in order")
    args = spec.args
    if (
        args[0] != "tuple"
        or len(args[1]) != 2
        or (args[1][0][0], args[1][1][0])
        != (
            "tuple",
            "dict",
        )
    ):
        raise _bad("the argument tree is not one of (args, kwargs)")


def _leaves(tree: Any) -> Iterator[int]:
    """The tensor indices of a checked tree, in order."""
    if tree[0] == "T":
        yield tree[1]
    elif tree[0] != "V":
        for kid in tree[-1]:
            yield from _leaves(kid)

"""ProgramSpec: everything a traced program is, apart from the graph it runs on.

A spec is data: the body (a ``SubGraphParam``: operators, the metadata of their local
operands, input placeholders, output ids, in-place writes), the metadata the inputs had at
trace time (what a replay checks), the constants the body reads (graph operands: weights),
the trees of the arguments and of the result, and the metadata of each result tensor (what a
replay allocates). ``dtorch.program.Program`` binds a spec to a graph; ``dtorch.program.files``
writes one to a file with the constants' values beside it.

Ids: every id local to the body (placeholders and what its operators make) is fresh, taken
from the graph's counter when the program was traced or loaded, so it collides with no
operand a user holds; constant ids are the constants' own.

Example:
    >>> import dtorch
    >>> w = dtorch.ones(3)
    >>> spec = dtorch.trace(lambda x: x * w + 1, dtorch.zeros(3)).spec
    >>> [op.kind.name for op in spec.body.operators], len(spec.inputs), len(spec.constants)
    (['BroadcastBinary', 'BroadcastBinary'], 1, 1)
"""

from __future__ import annotations

from dataclasses import dataclass

from dtorch.ir.operator import Operand
from dtorch.ir.params import SubGraphParam
from dtorch.program.tree import Tree


@dataclass(frozen=True, eq=False)
class ProgramSpec:
    """A traced program's body, inputs, constants and structure; see the module docstring."""

    name: str  # the traced function's qualified name (for messages and pictures)
    body: SubGraphParam  # program=0: a graph names it when the body is first sent
    inputs: tuple[Operand, ...]  # per tensor input slot, as traced (shape/dtype/mesh/placements)
    constants: tuple[Operand, ...]  # graph operands the body reads under their own ids
    args: Tree  # the tree of (args, kwargs) the function was traced with
    result: Tree  # the tree of what it returned
    results: tuple[Operand, ...]  # per result tensor: the metadata a replay allocates
    # False where the function takes **kwargs (it may read them in call order): a call must
    # give the keywords in the traced order; True: named parameters, any order
    any_keyword_order: bool = True

    @property
    def local_ids(self) -> tuple[int, ...]:
        """Every id local to the body (freed after each run)."""
        return tuple(o.id for o in self.body.operands)

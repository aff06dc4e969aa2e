"""The harness of the API operator tests (``tests/api/test_ops_*.py``).

Full torch tensors are distributed with ``dtorch.from_torch`` on a mesh, the operator runs
through the PUBLIC API on the real runtime (device threads of the test's graph), and the
fetched value is compared with plain torch on the full tensors. Output placements are checked
against a table written for ONE mesh dimension (the inputs' placements there -> the output's),
expanded over the mesh as DESIGN.md's placement signatures are; a combination with a row
outside the table must raise a PlacementError that names the operator, the placements it got
and the ones it accepts.

Example:
    >>> import torch, dtorch
    >>> g = dtorch.Graph()
    >>> x = torch.arange(6.0).reshape(3, 2)
    >>> table = {(R,): R, (S0,): S0, (S1,): S1}
    >>> run_api(g, "exp", lambda t: t.exp(), [x], (2,), [x.exp()], table=table, exact=False)
    [((R,),), ((S(0),),), ((S(1),),)]
    >>> g.close()
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
import torch

import dtorch
from dtorch import Partial, Placement, Replicate, Shard
from dtorch.errors import PlacementError
from dtorch.ir.placement import format_placements
from tests.simulate import MESHES, layout_combos

R, P = Replicate(), Partial()
S0, S1, S2 = Shard(0), Shard(1), Shard(2)

#: 1-D, 2-D and 3-D meshes, sizes that divide the test shapes and sizes that do not (the
#: kernel tests' meshes plus a 3-D mesh without a size-1 dim).
ALL_MESHES = (*MESHES, (2, 2, 2))
ND_MESHES = tuple(m for m in MESHES if len(m) > 1)

Row = tuple[Placement, ...]
#: Input placements on one mesh dim -> the placement every output has on that mesh dim.
Table = Mapping[Row, Placement]
Combo = tuple[tuple[Placement, ...], ...]


def place(
    full: torch.Tensor, mesh: dtorch.DeviceMesh, placements: Sequence[Placement], graph: Any
) -> dtorch.Tensor:
    """``full`` distributed on ``mesh`` as ``placements`` (the public creation path)."""
    return dtorch.from_torch(full, device_mesh=mesh, placements=list(placements), graph=graph)


def choices(ndim: int, *, partial: bool = True) -> list[Placement]:
    """The placements one mesh dim can give an ``ndim``-D tensor."""
    out: list[Placement] = [R, *(Shard(d) for d in range(ndim))]
    return [*out, P] if partial else out


def expected_layout(table: Table, combo: Combo) -> tuple[Placement, ...] | None:
    """The output placements the 1-D ``table`` gives on every mesh dim (None: rejected)."""
    out = []
    for m in range(len(combo[0])):
        row = tuple(c[m] for c in combo)
        if row not in table:
            return None
        out.append(table[row])
    return tuple(out)


def on_mesh(mesh: dtorch.DeviceMesh, combo: Combo) -> Combo:
    """``combo`` as the tensors hold it: a placement on a mesh dim of size 1 is Replicate."""
    return tuple(
        tuple(R if n == 1 else p for p, n in zip(c, mesh.shape, strict=True)) for c in combo
    )


def elementwise_table(
    shapes: Sequence[tuple[int, ...]],
    partial_rows: Mapping[Row, Placement] = {},
    *,
    bools: Sequence[bool] = (),
    fixed: Sequence[int] = (),
) -> dict[Row, Placement]:
    """The 1-D table of a broadcasting elementwise operator, from torch's broadcasting: the
    sharded inputs must shard one output dim that none of them broadcasts (a size-1 dim
    against a larger size); the others must be Replicate (the implicit chunk; not allowed
    for the ``fixed`` inputs, written in place); plus the given Partial rows."""
    out_shape = tuple(torch.broadcast_shapes(*shapes))
    per_input = [choices(len(s), partial=not (bools and bools[i])) for i, s in enumerate(shapes)]
    table: dict[Row, Placement] = {}
    for row in itertools.product(*per_input):
        result = _elementwise_row(row, shapes, out_shape, fixed)
        if result is not None:
            table[row] = result
    table.update({r: p for r, p in partial_rows.items() if _allowed(r, per_input)})
    return table


def _allowed(row: Row, per_input: list[list[Placement]]) -> bool:
    return all(p in options for p, options in zip(row, per_input, strict=True))


def _elementwise_row(
    row: Row,
    shapes: Sequence[tuple[int, ...]],
    out_shape: tuple[int, ...],
    fixed: Sequence[int],
) -> Placement | None:
    if any(p == P for p in row):
        return None
    targets = set()
    for p, shape in zip(row, shapes, strict=True):
        if isinstance(p, Shard):
            j = p.dim + len(out_shape) - len(shape)
            if shape[p.dim] != out_shape[j]:
                return None  # a broadcast dim: its shards are not the output's
            targets.add(j)
    if not targets:
        return R
    if len(targets) > 1:
        return None
    (j,) = targets
    for i, (p, shape) in enumerate(zip(row, shapes, strict=True)):
        k = j - (len(out_shape) - len(shape))  # the input's dim for output dim j
        holds = k >= 0 and shape[k] == out_shape[j]
        if i in fixed and p == R and holds:
            return None  # an in-place target is never redistributed
    return Shard(j)


def check_rejection(name: str, error: Exception, inputs: Sequence[dtorch.Tensor]) -> None:
    """The message names the operator, the placements it got and what it accepts."""
    text = str(error)
    assert text.startswith(f"{name}: "), f"message does not start with {name!r}: {text}"
    for t in inputs:
        assert format_placements(t.placements) in text, f"{t.placements} not named in: {text}"
    assert "accepted" in text, f"no accepted placements in: {text}"


def compare(actual: torch.Tensor, expected: torch.Tensor, exact: bool, context: str) -> None:
    """Same dtype and shape; values bit-equal (NaNs where torch has them) or, for reductions
    and matmul, within torch's default tolerances of the dtype."""
    assert actual.dtype == expected.dtype, f"{context}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{context}: shape {actual.shape} != {expected.shape}"
    if exact:
        same = torch.equal(actual, expected) or (
            actual.is_floating_point()
            and torch.equal(actual.isnan(), expected.isnan())
            and torch.equal(actual.nan_to_num(0.0), expected.nan_to_num(0.0))
        )
        assert same, f"{context}: values differ\n{actual}\n!=\n{expected}"
    else:
        torch.testing.assert_close(
            actual, expected, equal_nan=True, msg=lambda m: f"{context}: {m}"
        )


def expect_refusal(run: Callable[[], Any], error: Exception) -> None:
    """Where torch refuses, dtorch refuses with torch's reason: dtypes at the call (a
    TypeError), values (integer division by zero, ...) when the value is fetched."""
    with pytest.raises((TypeError, dtorch.DTorchError), match=re.escape(str(error)[:24])):
        run()


def sample(combos: Sequence[Combo], limit: int, seed: int) -> list[Combo]:
    """All of ``combos``, or ``limit`` of them drawn with a seed (the first always kept)."""
    if len(combos) <= limit:
        return list(combos)
    return [combos[0], *random.Random(seed).sample(list(combos[1:]), limit - 1)]


def row_combos(table: Table, mesh_ndim: int, n_inputs: int, n: int, seed: int) -> list[Combo]:
    """``n`` layouts whose every mesh dim is a row of ``table``, drawn with a seed: accepted
    unless the rows conflict (a random sample of an N-D mesh's layouts holds few that are)."""
    rng, rows = random.Random(seed), sorted(table, key=repr)
    picks = [[rng.choice(rows) for _ in range(mesh_ndim)] for _ in range(n)]
    return [tuple(tuple(row[i] for row in pick) for i in range(n_inputs)) for pick in picks]


def run_api(
    graph: Any,
    name: str,
    fn: Callable[..., Any],
    fulls: Sequence[torch.Tensor],
    mesh_shape: tuple[int, ...],
    want: Sequence[torch.Tensor],
    *,
    table: Table | None,
    limit: int = 400,
    exact: bool = True,
    seed: int = 0,
    combos: Sequence[Combo] | None = None,
) -> list[Combo]:
    """Run ``fn`` on every placement combination of ``fulls`` (or a seeded sample of
    ``limit``); see the module docstring. Returns the accepted combinations."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    todo = combos if combos is not None else layout_combos(mesh.ndim, fulls, limit=limit, seed=seed)
    pending, accepted = [], []
    for combo in todo:
        inputs = [place(t, mesh, p, graph) for t, p in zip(fulls, combo, strict=True)]
        layout = None if table is None else expected_layout(table, on_mesh(mesh, combo))
        context = f"{name} on mesh {mesh_shape} with {list(combo)}"
        try:
            out = fn(*inputs)
        except PlacementError as error:
            check_rejection(name, error, inputs)
            assert table is None or layout is None, f"{context}: rejected, table gives {layout}"
            continue
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        assert len(outs) == len(want), f"{context}: {len(outs)} outputs, expected {len(want)}"
        for o, w in zip(outs, want, strict=True):
            assert (o.shape, o.dtype) == (w.shape, w.dtype), f"{context}: metadata {o!r}"
            if table is not None:
                assert layout is not None, f"{context}: accepted as {o.placements}, table rejects"
                assert tuple(o.placements) == layout, f"{context}: {o.placements} != {layout}"
        pending.append((context, [o.to_torch_async() for o in outs]))
        accepted.append(combo)
    for context, futures in pending:
        for future, w in zip(futures, want, strict=True):
            try:
                value = future.get()
            except dtorch.DTorchError as error:  # say which layout failed on the devices
                raise AssertionError(f"{context}: {error}") from error
            compare(value, w, exact, context)
    return accepted


def limit_for(mesh_shape: tuple[int, ...], one_d: int = 400, n_d: int = 24) -> int:
    """Exhaustive on 1-D meshes, a seeded sample on the larger ones (the time budget)."""
    return one_d if len(mesh_shape) == 1 else n_d

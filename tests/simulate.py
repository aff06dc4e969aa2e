"""The oracle harness: run one operator on a logical mesh in plain Python, no threads.

``simulate`` takes FULL torch inputs, a mesh and per-input placements, and

1. builds the input Operands and runs the operator's rule (``dtorch.ir.rules.infer``);
2. shards every full input into per-device locals with ``dtorch.ir.sharding`` - Partial inputs
   are split into random summands, one per Partial coordinate, that add up to the value
   exactly (floats too: see ``_exact_float_parts``);
3. applies the implicit redistributions the rule asked for (``Inference.input_placements``:
   Replicate -> Shard only, which is a local chunk of the full value);
4. runs the local kernel of the operator on every device;
5. checks that every device's output has the local shape and dtype of the output metadata and
   that replicas (devices that differ only on Replicate mesh dims) hold equal values;
6. assembles every global output (shards placed at their offsets, partials summed).

Tests then compare the global outputs with torch on the full tensors. ``Simulation.inputs``
holds the global values of the inputs after the kernel ran, for in-place operators.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.opkind import BinaryKind
    >>> from dtorch.ir.params import BroadcastBinaryParam
    >>> from dtorch.ir.placement import Partial, Shard
    >>> a, b = torch.arange(6.0).reshape(3, 2), torch.ones(3, 2)
    >>> sim = simulate("add", BroadcastBinaryParam(BinaryKind.ADD), [a, b],
    ...                init_device_mesh("cpu", 2), [(Partial(),), (Partial(),)])
    >>> torch.testing.assert_close(sim.outputs[0], a + b)
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from dtorch.errors import PlacementError
from dtorch.ir.mesh import DeviceMesh, init_device_mesh
from dtorch.ir.operator import Operand, Operator
from dtorch.ir.params import IndexEntry, OpParam, SliceIndex
from dtorch.ir.placement import Partial, Placement, Replicate, Shard, normalize_placements
from dtorch.ir.rules import Inference, infer
from dtorch.ir.sharding import is_replica_leader, local_shape_and_offset
from dtorch.ir.span import Span
from dtorch.ir.subsplit import segment_pieces
from dtorch.kernels.base import KernelContext
from dtorch.kernels.table import LOCAL_KERNELS

Locals = dict[int, torch.Tensor]


@dataclass
class Simulation:
    """What one simulated operator produced."""

    inference: Inference
    operands: tuple[Operand, ...]  # the inputs as the kernel saw them (after redistribution)
    results: tuple[Operand, ...]  # the outputs' metadata
    outputs: tuple[torch.Tensor, ...]  # the assembled global outputs
    inputs: tuple[torch.Tensor, ...]  # the inputs' global values after the kernel ran
    locals: dict[int, list[torch.Tensor]]  # every device's output shards


def operand(
    index: int, full: torch.Tensor, mesh: DeviceMesh, placements: Sequence[Placement]
) -> Operand:
    """The Operand of a full tensor laid out as ``placements`` on ``mesh``."""
    normal = normalize_placements(placements, mesh.ndim, full.ndim)
    return Operand(index, tuple(full.shape), full.dtype, mesh, normal)


def simulate(
    name: str,
    param: OpParam,
    inputs: Sequence[torch.Tensor],
    mesh: DeviceMesh,
    placements: Sequence[Sequence[Placement]],
    *,
    seed: int = 0,
) -> Simulation:
    """Run operator ``name``/``param`` on every device of ``mesh``; see the module doc."""
    pairs = enumerate(zip(inputs, placements, strict=True))
    operands = tuple(operand(i + 1, t, mesh, p) for i, (t, p) in pairs)
    inference = infer(name, param, operands)
    ready = tuple(
        Operand(o.id, o.shape, o.dtype, mesh, inference.input_placement(i, o))
        for i, o in enumerate(operands)
    )
    generator = torch.Generator().manual_seed(seed)
    shards = [distribute(t, o, generator) for t, o in zip(inputs, ready, strict=True)]
    results = tuple(
        Operand(100 + j, m.shape, m.dtype, mesh, m.placements)
        for j, m in enumerate(inference.outputs)
    )
    local = run_kernel(name, param, ready, results, shards)
    outputs = tuple(
        assemble(r, {d: outs[j] for d, outs in local.items()}) for j, r in enumerate(results)
    )
    after = tuple(assemble(o, s) for o, s in zip(ready, shards, strict=True))
    return Simulation(inference, ready, results, outputs, after, local)


def distribute(full: torch.Tensor, target: Operand, generator: torch.Generator) -> Locals:
    """Every device's local shard of ``full`` laid out as ``target`` says.

    On Partial mesh dims the value is split into random summands (one per coordinate of the
    Partial dims; replicas along Replicate dims get equal copies).
    """
    mesh = target.mesh
    partial_dims = [m for m, p in enumerate(target.placements) if isinstance(p, Partial)]
    summands = _summands(full, [mesh.shape[m] for m in partial_dims], generator)
    out: Locals = {}
    for device in mesh.device_ids:
        coordinate = mesh.coordinate_of(device)
        part = summands[tuple(coordinate[m] for m in partial_dims)]
        out[device] = part[target.shard(device).slices()].clone()
    return out


def _summands(
    full: torch.Tensor, sizes: list[int], generator: torch.Generator
) -> dict[tuple[int, ...], torch.Tensor]:
    coords = list(itertools.product(*(range(s) for s in sizes)))
    if full.dtype.is_floating_point:
        return dict(zip(coords, _exact_float_parts(full, len(coords), generator), strict=True))
    parts = {c: _noise(full, generator) for c in coords[1:]}
    rest = full.clone()
    for part in parts.values():
        rest -= part
    return {coords[0]: rest, **parts}


def _exact_float_parts(
    full: torch.Tensor, n: int, generator: torch.Generator
) -> list[torch.Tensor]:
    """Random float summands that add up to ``full`` without rounding, in device order.

    Each step takes a random fraction in [1/2, 1] of what remains: by Sterbenz's lemma the
    subtraction is exact, so adding the parts back from the last one restores every value bit
    for bit - also when a kernel later widens them (float32 -> float64 casts, promotions).
    """
    rest, taken = full.clone(), []
    for _ in range(n - 1):
        fraction = torch.rand(full.shape, generator=generator).to(full.dtype) * 0.5 + 0.5
        part = rest * fraction
        taken.append(part)
        rest = rest - part
    return [rest, *reversed(taken)]


def _noise(like: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    if like.dtype == torch.bool:
        raise ValueError("a bool tensor cannot be split into Partial summands")
    return torch.randint(-4, 5, like.shape, generator=generator).to(like.dtype)


def run_kernel(
    name: str,
    param: OpParam,
    inputs: tuple[Operand, ...],
    outputs: tuple[Operand, ...],
    shards: Sequence[Locals],
) -> dict[int, list[torch.Tensor]]:
    """The local kernel on every device, with the shape/dtype/replica checks of step 5."""
    operator = Operator(
        99, f"{name}_99", param, tuple(o.id for o in inputs), tuple(o.id for o in outputs),
        Span.unknown(),
    )  # fmt: skip
    devices = inputs[0].mesh.device_ids if inputs else outputs[0].mesh.device_ids
    ctx = KernelContext(operator, inputs, outputs, devices)
    kernel = LOCAL_KERNELS[param.kind]
    local = {d: kernel(ctx, d, [s[d] for s in shards]) for d in devices}
    for device, outs in local.items():
        check_local(name, outputs, device, outs)
    for j, result in enumerate(outputs):
        check_replicas(name, result, {d: outs[j] for d, outs in local.items()})
    return local


def check_local(
    name: str, outputs: Sequence[Operand], device: int, outs: Sequence[torch.Tensor]
) -> None:
    """Device ``device`` produced one tensor per output, of the metadata's local shape/dtype."""
    assert len(outs) == len(outputs), f"{name}: {len(outs)} outputs, expected {len(outputs)}"
    for result, out in zip(outputs, outs, strict=True):
        want = result.local_shape(device)
        assert tuple(out.shape) == want, (
            f"{name}: device {device} shape {tuple(out.shape)} != {want}"
        )
        assert out.dtype == result.dtype, (
            f"{name}: device {device} dtype {out.dtype} != {result.dtype}"
        )


def check_replicas(name: str, result: Operand, local: Locals) -> None:
    """Devices that differ only on the output's Replicate mesh dims hold equal values."""
    mesh = result.mesh
    groups: dict[tuple[int, ...], list[int]] = {}
    for device in local:
        coordinate = mesh.coordinate_of(device)
        pairs = zip(coordinate, result.placements, strict=True)
        key = tuple(c for c, p in pairs if not isinstance(p, Replicate))
        groups.setdefault(key, []).append(device)
    for devices in groups.values():
        first = local[devices[0]]
        for other in devices[1:]:
            same = torch.equal(local[other], first) or (
                first.is_floating_point()
                and torch.equal(local[other].isnan(), first.isnan())
                and torch.equal(local[other].nan_to_num(0.0), first.nan_to_num(0.0))
            )
            assert same, f"{name}: replicas on devices {devices[0]} and {other} differ"


def assemble(result: Operand, local: Locals) -> torch.Tensor:
    """The global value: shards at their offsets, partial values summed, replicas read once."""
    mesh = result.mesh
    full = torch.zeros(result.shape, dtype=result.dtype)
    partial = any(isinstance(p, Partial) for p in result.placements)
    for device, shard in local.items():
        coordinate = mesh.coordinate_of(device)
        if not is_replica_leader(result.placements, coordinate):
            continue
        for index, piece in _pieces(result, device, shard):
            if partial:
                full[index] += piece
            else:
                full[index] = piece
    return full


def _pieces(
    result: Operand, device: int, shard: torch.Tensor
) -> list[tuple[tuple[slice, ...], torch.Tensor]]:
    # (global index, local part) of a shard: one box, or the pieces of a sub-split (marked) dim
    marked = [(m, p) for m, p in enumerate(result.placements) if isinstance(p, Shard)
              and p.has_sub_split_coordinates()]  # fmt: skip
    if not marked:
        return [(result.shard(device).slices(), shard)]
    assert len(marked) == 1, f"the simulator assembles one marked mesh dim, got {marked}"
    (m, p), coordinate = marked[0], result.mesh.coordinate_of(device)
    placements = tuple(Replicate() if k == m else q for k, q in enumerate(result.placements))
    _, offset = local_shape_and_offset(result.shape, result.mesh.shape, placements, coordinate)
    local, out = 0, []
    for start, n in segment_pieces(result.shape[p.dim], p.sub_split_coordinates,
                                   result.mesh.shape[m], coordinate[m]):  # fmt: skip
        box = [slice(o, o + s) for o, s in zip(offset, shard.shape, strict=True)]
        box[p.dim] = slice(start, start + n)
        out.append((tuple(box), shard.narrow(p.dim, local, n)))
        local += n
    return out


def assert_same(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Equal shapes, dtypes and values (floats within torch's default tolerances)."""
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    torch.testing.assert_close(actual, expected, equal_nan=True)


def python_index(index: tuple[IndexEntry, ...]) -> tuple[int | slice | None, ...]:
    """``index`` as torch takes it on the full tensor (SliceIndex entries as Python slices)."""
    return tuple(slice(e.start, e.stop, e.step) if isinstance(e, SliceIndex) else e for e in index)


#: Meshes the operator tests run on: 1-D, 2-D and 3-D, sizes that divide and that do not.
MESHES: tuple[tuple[int, ...], ...] = ((2,), (3,), (2, 2), (2, 3), (2, 1, 2))


def placement_choices(ndim: int, *, partial: bool = True) -> list[Placement]:
    """The placements one mesh dim can give an ``ndim``-D tensor."""
    choices: list[Placement] = [Replicate(), *(Shard(d) for d in range(ndim))]
    return [*choices, Partial()] if partial else choices


def layouts(mesh_ndim: int, ndim: int, *, partial: bool = True) -> list[tuple[Placement, ...]]:
    """Every placements tuple of an ``ndim``-D tensor on a ``mesh_ndim``-D mesh."""
    return list(itertools.product(placement_choices(ndim, partial=partial), repeat=mesh_ndim))


def layout_combos(
    mesh_ndim: int, tensors: Sequence[torch.Tensor], *, limit: int = 400, seed: int = 0
) -> list[tuple[tuple[Placement, ...], ...]]:
    """Placements for every input: all combinations, or ``limit`` of them drawn at random
    (seeded) when there are more, always with all-Replicate first. Bool inputs are never
    Partial (a sum of bools is no bool)."""
    per_input = [layouts(mesh_ndim, t.ndim, partial=t.dtype != torch.bool) for t in tensors]
    count = math.prod(len(choices) for choices in per_input)
    if count <= limit:
        return list(itertools.product(*per_input))
    # the same draw as sampling the list of every combination (sample picks by index alone),
    # without building it: three 3-D inputs on a 3-D mesh have 2 million
    picks = random.Random(seed).sample(range(1, count), limit - 1)
    return [_nth_combo(per_input, i) for i in (0, *picks)]


def _nth_combo(per_input: Sequence[Sequence[Any]], index: int) -> tuple[Any, ...]:
    # element ``index`` of itertools.product(*per_input) (the last input varies fastest)
    combo = []
    for choices in reversed(per_input):
        index, k = divmod(index, len(choices))
        combo.append(choices[k])
    return tuple(reversed(combo))


def run_layouts(
    name: str,
    param: OpParam,
    tensors: Sequence[torch.Tensor],
    mesh_shape: tuple[int, ...],
    expected: Sequence[torch.Tensor],
    *,
    limit: int = 400,
    after: Sequence[tuple[int, torch.Tensor]] = (),
) -> list[tuple[tuple[Placement, ...], ...]]:
    """Simulate every layout combination; accepted ones must match ``expected`` (torch on the
    full tensors) and, for in-place operators, ``after`` (input index, its expected value
    after the operator); rejected ones must raise a PlacementError naming the operator and
    what it accepts. Returns the accepted combinations."""
    mesh = init_device_mesh("cpu", mesh_shape)
    accepted = []
    for combo in layout_combos(mesh.ndim, tensors, limit=limit):
        try:
            if _run_one(name, param, tensors, mesh, combo, expected=expected, after=after):
                accepted.append(combo)
        except (AssertionError, RuntimeError) as error:  # say which layout failed
            raise AssertionError(f"{name} on mesh {mesh_shape} with {combo}: {error}") from error
    return accepted


def _run_one(
    name: str,
    param: OpParam,
    tensors: Sequence[torch.Tensor],
    mesh: DeviceMesh,
    combo: Sequence[Sequence[Placement]],
    *,
    expected: Sequence[torch.Tensor],
    after: Sequence[tuple[int, torch.Tensor]],
) -> bool:
    try:
        sim = simulate(name, param, tensors, mesh, combo)
    except PlacementError as error:
        assert str(error).startswith(f"{name}: got "), str(error)
        assert "accepted" in str(error), str(error)
        return False
    for actual, want in zip(sim.outputs, expected, strict=True):
        assert_same(actual, want)
    for index, want in after:
        assert_same(sim.inputs[index], want)
    return True

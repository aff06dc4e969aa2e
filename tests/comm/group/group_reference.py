"""Single-process oracles for the collectives: plain torch on the full tensors, no dtorch code.

A ``Case`` holds every rank's input for one collective and the outputs the collective must
produce, both derived from full tensors with ``torch.chunk`` / ``torch.stack`` only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


def torch_chunks(full: torch.Tensor, parts: int, dim: int) -> list[torch.Tensor]:
    """``torch.chunk`` padded with empty pieces so that there are exactly ``parts``."""
    pieces = list(torch.chunk(full, parts, dim=dim))
    empty_shape = list(full.shape)
    empty_shape[dim] = 0
    while len(pieces) < parts:
        pieces.append(full.new_empty(empty_shape))
    return [p.contiguous() for p in pieces]


@dataclass
class Case:
    """One collective call: name, keyword arguments, per-rank inputs and expected outputs."""

    collective: str
    kwargs: dict[str, Any]
    inputs: list[torch.Tensor]
    expected: list[Any]
    label: str = ""


def _full(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    if dtype.is_complex:
        return torch.complex(torch.randn(shape, generator=gen), torch.randn(shape, generator=gen))
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen).to(dtype)
    if dtype is torch.bool:
        return torch.randint(0, 2, shape, generator=gen).to(dtype)
    low = 0 if dtype in (torch.uint8, torch.uint16, torch.uint32) else -50
    return torch.randint(low, 50, shape, generator=gen).to(dtype)


_REDUCE = {
    "sum": lambda s: s.sum(0),
    "avg": lambda s: s.mean(0),
    "max": lambda s: s.amax(0),
    "min": lambda s: s.amin(0),
}


def all_reduce_case(world: int, shape, op: str, dtype, gen) -> Case:
    inputs = [_full(shape, dtype, gen) for _ in range(world)]
    total = _REDUCE[op](torch.stack(inputs)).to(dtype)  # torch sums small ints as int64
    return Case("all_reduce", {"op": op}, inputs, [total] * world, f"{op} {dtype}")


def all_gather_case(
    world: int, shape, dim: int, gen, *, uneven: bool, as_list=False, dtype=torch.float32
) -> Case:
    full = _full(shape, dtype, gen)
    inputs = torch_chunks(full, world, dim)
    kwargs: dict[str, Any] = {"dim": dim}
    if uneven:
        kwargs["full_size"] = shape[dim]
    name = "all_gather_into_list" if as_list else "all_gather"
    expected: list[Any] = [list(inputs) if as_list else full] * world
    return Case(name, kwargs, inputs, expected, f"{shape} dim={dim} {dtype}")


def reduce_scatter_case(world: int, shape, dim: int, op: str, gen, dtype=torch.float64) -> Case:
    inputs = [_full(shape, dtype, gen) for _ in range(world)]
    total = _REDUCE[op](torch.stack(inputs)).to(dtype)
    expected = torch_chunks(total, world, dim)
    return Case("reduce_scatter", {"dim": dim, "op": op}, inputs, expected, f"{shape} {op}")


def all_to_all_case(
    world: int, shape, src: int, dst: int, gen, *, uneven: bool, dtype=torch.float32
) -> Case:
    full = _full(shape, dtype, gen)
    inputs = torch_chunks(full, world, src)
    kwargs: dict[str, Any] = {"src_dim": src, "dst_dim": dst}
    if uneven:
        kwargs["full_size"] = shape[src]
    return Case(
        "all_to_all", kwargs, inputs, torch_chunks(full, world, dst), f"{shape} {src}->{dst}"
    )


def replicate_to_shard_case(world: int, shape, dim: int, gen) -> Case:
    full = _full(shape, torch.int64, gen)
    return Case(
        "replicate_to_shard",
        {"dim": dim},
        [full] * world,
        torch_chunks(full, world, dim),
        str(shape),
    )


def broadcast_case(world: int, shape, src: int, gen, dtype=torch.int32) -> Case:
    inputs = [_full(shape, dtype, gen) for _ in range(world)]
    return Case("broadcast", {"src": src}, inputs, [inputs[src]] * world, f"src={src}")


def standard_cases(world: int, seed: int = 0) -> list[Case]:
    """Every collective, even and uneven shards, several dims, dtypes and ops."""
    gen = torch.Generator().manual_seed(seed + world)
    even, odd = 2 * world, 2 * world + 1  # odd: uneven for world > 1 (and some empty shards)
    small = max(world - 1, 1)  # fewer elements than ranks: trailing empty shards
    cases = [all_reduce_case(world, (3, 4), op, torch.float64, gen) for op in _REDUCE]
    cases += [
        all_reduce_case(world, (5,), "sum", torch.int64, gen),
        all_reduce_case(world, (2, 2), "min", torch.int32, gen),
        all_gather_case(world, (even, 3), 0, gen, uneven=False),
        all_gather_case(world, (3, odd), 1, gen, uneven=True),
        all_gather_case(world, (small, 2), 0, gen, uneven=True),
        all_gather_case(world, (2, odd, 2), -2, gen, uneven=True, as_list=True),
        all_gather_case(world, (even,), 0, gen, uneven=False, as_list=True),
        reduce_scatter_case(world, (even, 3), 0, "sum", gen),
        reduce_scatter_case(world, (3, odd), 1, "avg", gen),
        reduce_scatter_case(world, (small,), 0, "max", gen),
        all_to_all_case(world, (even, 2 * world), 0, 1, gen, uneven=False),
        all_to_all_case(world, (odd, 3, small + 2), 0, 2, gen, uneven=True),
        all_to_all_case(world, (4, odd + 2), 1, 0, gen, uneven=True),
        replicate_to_shard_case(world, (odd, 2), 0, gen),
        replicate_to_shard_case(world, (2, even), 1, gen),
        broadcast_case(world, (3, 2), world - 1, gen),
        broadcast_case(world, (4,), 0, gen),
        # empty tensors: nothing to move, but every caller still completes the call
        all_reduce_case(world, (0, 3), "sum", torch.float32, gen),
        all_gather_case(world, (0, 3), 0, gen, uneven=True),
        reduce_scatter_case(world, (2, 0), 0, "sum", gen),
        all_to_all_case(world, (0, 4), 0, 1, gen, uneven=True),
    ]
    return cases + dtype_cases(world, gen)


#: Dtypes some collective libraries cannot carry as they are (Gloo: int16, uint16, complex
#: gathers; NCCL: bool, complex). torch itself cannot add uint16 or float8 on the CPU: those
#: are only moved.
ODD_DTYPES = (torch.int16, torch.uint16, torch.bool, torch.complex64, torch.float8_e4m3fn)
_ADDABLE = (torch.int16, torch.bool, torch.complex64)


def dtype_cases(world: int, gen: torch.Generator) -> list[Case]:
    """Moves and reductions of the dtypes a collective library may not carry natively."""
    odd = 2 * world + 1
    cases = [all_reduce_case(world, (3,), "sum", dtype, gen) for dtype in _ADDABLE]
    for dtype in ODD_DTYPES:
        cases += [
            all_gather_case(world, (odd, 2), 0, gen, uneven=True, dtype=dtype),
            all_to_all_case(world, (odd, 3), 0, 1, gen, uneven=True, dtype=dtype),
            broadcast_case(world, (2, 2), 0, gen, dtype=dtype),
        ]
    cases.append(reduce_scatter_case(world, (odd, 2), 0, "sum", gen, dtype=torch.int16))
    cases.append(all_reduce_case(world, (3,), "max", torch.int16, gen))
    return cases


def check_outputs(case: Case, outputs: dict[int, Any]) -> None:
    """Compare a run's outputs (all ranks) against the case's expectation."""
    assert sorted(outputs) == list(range(len(case.inputs))), f"{case.collective}: ranks"
    for rank, got in outputs.items():
        want = case.expected[rank]
        context = f"{case.collective} [{case.label}] rank {rank}"
        if isinstance(want, list):
            assert isinstance(got, list) and len(got) == len(want), context
            for g, w in zip(got, want, strict=True):
                torch.testing.assert_close(g, w, rtol=0, atol=0, msg=context)
        else:
            torch.testing.assert_close(got, want, msg=lambda m, c=context: f"{c}: {m}")

"""The column helpers' fast paths against plain references: repeated objects indexed from
the first values of a column (and past them), numbers kept as positions until they are
emitted, and long batches exploded by one loop instead of a comprehension per field."""

from __future__ import annotations

import dataclasses
import random

import pytest

from dtorch.ir.operator import Operator
from dtorch.ir.params import MatmulParam
from dtorch.ir.span import Span
from dtorch.serialization import deserialize, node_counts, serialize
from dtorch.serialization.columns import Repeated, distinct_by_id, lookup, spread
from dtorch.serialization.registry import _LONG_EXPLODE, _WIDE_EXPLODE, attribute_exploder


def _first_seen(values: list[object]) -> tuple[list[int], list[object]]:
    """Positions and distinct objects, the obvious way."""
    distinct: list[object] = []
    for value in values:
        if not any(value is d for d in distinct):
            distinct.append(value)
    positions = [next(i for i, d in enumerate(distinct) if d is v) for v in values]
    return positions, distinct


@pytest.mark.parametrize("length", [100, 256, 257, 1000])
@pytest.mark.parametrize("kinds", [1, 3])
@pytest.mark.parametrize("late_at", [None, 10, 127, 128, 129, 900])
def test_repeated_columns_are_indexed_in_first_seen_order(
    length: int, kinds: int, late_at: int | None
) -> None:
    rng = random.Random(late_at)
    few = [Span("a.py", i, 0) for i in range(kinds)]
    more = few + [Span("a.py", i, 0) for i in range(5)]  # equal spans stay distinct objects
    values: list[object] = [
        rng.choice(few if late_at is None or i < late_at else more) for i in range(length)
    ]
    positions, distinct = distinct_by_id(values)
    assert (positions, distinct) == _first_seen(values)
    assert spread(positions, distinct) == values


def test_short_or_unrepeated_columns_are_left_alone() -> None:
    values: list[object] = [Span("a.py", i, 0) for i in range(200)]
    assert distinct_by_id(values) == (None, values)
    assert spread(None, values) is values


def test_repeated_numbers_read_like_the_list_they_stand_for() -> None:
    numbers = Repeated([2, 0, 1, 1, 2, 0], range(10, 13))
    plain = [12, 10, 11, 11, 12, 10]
    assert list(numbers) == plain and len(numbers) == 6
    assert numbers[1] == 10 and numbers[1:4] == plain[1:4]
    table = list(range(100, 120))
    assert lookup(table, numbers) == lookup(table, plain) == [112, 110, 111, 111, 112, 110]


@pytest.mark.parametrize("count", [_LONG_EXPLODE - 1, _LONG_EXPLODE])
def test_long_batches_of_wide_records_explode_as_short_ones_do(count: int) -> None:
    span, param = Span("f.py", 1, 0), MatmulParam()
    ops = [Operator(i, f"op{i}", param, (i, i + 1), (i + 2,), span) for i in range(count)]
    names = [f.name for f in dataclasses.fields(Operator)]
    assert len(names) >= _WIDE_EXPLODE
    columns = attribute_exploder(names)(ops)
    assert columns == [[getattr(op, name) for op in ops] for name in names]
    assert attribute_exploder([])(ops) == []


@pytest.mark.timeout(60)
def test_objects_first_seen_past_the_first_values_keep_identity() -> None:
    early = [Span("early.py", i, 0) for i in range(2)]
    late = [Span("late.py", i, 0) for i in range(40)]
    value = tuple(early[i % 2] for i in range(500)) + tuple(late[i % 40] for i in range(500))
    restored = deserialize(serialize(value))
    assert restored == value
    assert node_counts(serialize(value))["ir.Span"] == 42
    assert restored[0] is restored[2] and restored[500] is restored[540]

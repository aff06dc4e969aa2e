"""Placements, Scalar, Span, Device and the dtype table."""

from __future__ import annotations

import math

import pytest
import torch

from dtorch.errors import MeshError, PlacementError
from dtorch.ir.device import Device
from dtorch.ir.dtypes import CODE_TO_DTYPE, DTYPE_TO_CODE, dtype_code, dtype_from_code
from dtorch.ir.placement import Partial, Replicate, Shard
from dtorch.ir.scalar import Scalar, ScalarKind
from dtorch.ir.span import Span, caller_span


def test_placements_behave_like_the_api_says() -> None:
    assert repr([Shard(0), Replicate(), Partial()]) == "[Shard(dim=0), Replicate(), Partial(sum)]"
    assert str(Shard(2)) == "Shard(dim=2)"
    assert Shard(1) == Shard(1) and Shard(1) != Shard(0) and Replicate() != Partial()
    assert len({Shard(0), Shard(0), Replicate(), Replicate(), Partial()}) == 3
    assert Shard(1).is_shard() and Shard(1).is_shard(1) and not Shard(1).is_shard(0)
    assert Replicate().is_replicate() and Partial().is_partial() and not Partial().is_shard()
    assert Shard(3).get_shard_index() == 3 and Replicate().get_shard_index() == -1
    with pytest.raises(PlacementError):
        Shard("0")  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        Shard(0).dim = 1  # type: ignore[misc]


def test_scalar_tags_and_checks() -> None:
    assert Scalar.of(1).kind is ScalarKind.INT
    assert Scalar.of(2**63).kind is ScalarKind.UINT
    assert Scalar.of(1.0).kind is ScalarKind.FLOAT
    assert Scalar.of(False).kind is ScalarKind.BOOL
    assert Scalar.of(None).kind is ScalarKind.NONE
    assert Scalar.of(math.nan) == Scalar.of(math.nan)
    assert Scalar.of(1) != Scalar.of(1.0)
    with pytest.raises(ValueError, match="not a scalar"):
        Scalar.of("1")
    with pytest.raises(ValueError, match=r"beyond the ints torch takes .*2\*\*64-1"):
        Scalar(ScalarKind.UINT, 2**64)


def test_span_captures_the_callers_line() -> None:
    span = caller_span(("/nonexistent/",))
    assert span.file == __file__ and span.line > 0 and span.column > 0
    assert Span.unknown().is_unknown()


def test_device() -> None:
    assert Device.parse("cuda:2") == Device("cuda", 2)
    assert Device.parse(torch.device("cpu")) == Device("cpu", 0)
    with pytest.raises(MeshError):
        Device("cpu", -1)


def test_every_torch_dtype_has_a_stable_code() -> None:
    torch_dtypes = {v for v in vars(torch).values() if isinstance(v, torch.dtype)}
    assert torch_dtypes <= set(DTYPE_TO_CODE), torch_dtypes - set(DTYPE_TO_CODE)
    assert dtype_code(torch.float32) == 0 and dtype_code(torch.bfloat16) == 3
    for code, dtype in CODE_TO_DTYPE.items():
        assert dtype_from_code(code) is dtype
    with pytest.raises(ValueError, match="not a dtype"):
        dtype_from_code(10_000)

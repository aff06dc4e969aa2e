"""Rules of Matmul, Linear and Outer: shapes and dtypes against torch, placements, messages."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from helpers_rules import MESH22, op
from hypothesis import given, settings
from hypothesis import strategies as st

from dtorch.errors import PlacementError, ShapeError
from dtorch.ir.params import LinearParam, MatmulParam, OuterParam
from dtorch.ir.placement import Partial, Replicate, Shard
from dtorch.ir.rules import DtypeError, infer

pytestmark = pytest.mark.timeout(60)
R, P = Replicate(), Partial()

dims = st.integers(1, 3)
batch = st.lists(st.integers(1, 3), max_size=2).map(tuple)


@settings(max_examples=150, deadline=None)
@given(
    ba=batch, bb=batch, n=dims, k=dims, k2=dims, m=dims, a1=st.booleans(), b1=st.booleans(),
    ta=st.booleans(), tb=st.booleans(),
)  # fmt: skip
def test_matmul_shapes_match_torch(ba, bb, n, k, k2, m, a1, b1, ta, tb) -> None:
    sa = (k,) if a1 else (*ba, *((k, n) if ta else (n, k)))
    sb = (k2,) if b1 else (*bb, *((m, k2) if tb else (k2, m)))
    a, b = torch.ones(sa), torch.ones(sb)
    param = MatmulParam(trans_a=ta, trans_b=tb)
    try:
        want = torch.matmul(a.transpose(-1, -2) if ta and a.ndim > 1 else a,
                            b.transpose(-1, -2) if tb and b.ndim > 1 else b)  # fmt: skip
    except RuntimeError:
        with pytest.raises(ShapeError):
            infer("matmul", param, (op(sa), op(sb, i=2)))
        return
    assert infer("matmul", param, (op(sa), op(sb, i=2))).outputs[0].shape == tuple(want.shape)


def test_matmul_message_lists_the_signature() -> None:
    with pytest.raises(PlacementError) as info:
        infer("matmul", MatmulParam(), (op((4, 6), Shard(0)), op((6, 5), Shard(0), i=2)))
    text = str(info.value)
    assert text.startswith("matmul: got (S(0),) x (S(0),) on mesh (2,); accepted per mesh dim")
    for row in ("R x R -> R", "S(i) x R -> S(i)", "R x S(i) -> S(i)", "S(k) x S(k) -> P",
                "P x R -> P", "R x P -> P", "k: the contracted dim"):  # fmt: skip
        assert row in text


def test_matmul_dtype_mismatch_is_rejected_like_torch() -> None:
    with pytest.raises(DtypeError, match="matmul"):
        infer("matmul", MatmulParam(), (op((2, 2)), op((2, 2), dtype=torch.float64, i=2)))


def test_matmul_placements_on_a_2d_mesh() -> None:
    a = op((4, 6), Shard(0), Shard(1), mesh=MESH22)
    b = op((6, 5), R, Shard(0), mesh=MESH22, i=2)
    assert infer("mm", MatmulParam(), (a, b)).outputs[0].placements == (Shard(0), P)
    x = op((3, 4, 6), Shard(0), R, mesh=MESH22)
    y = op((3, 6, 5), R, Shard(2), mesh=MESH22, i=2)
    inf = infer("bmm", MatmulParam(), (x, y))
    assert inf.outputs[0].placements == (Shard(0), Shard(2))
    assert inf.input_placements == (None, (Shard(0), Shard(2)))


@settings(max_examples=60, deadline=None)
@given(lead=st.lists(st.integers(0, 3), max_size=2).map(tuple), fin=dims, fout=dims,
       bias=st.booleans(), wrong=st.booleans())  # fmt: skip
def test_linear_shapes_match_torch(lead, fin, fout, bias, wrong) -> None:
    x_shape, w_shape = (*lead, fin), (fout, fin + (1 if wrong else 0))
    inputs = [op(x_shape), op(w_shape, i=2), *([op((fout,), i=3)] if bias else [])]
    try:
        want = F.linear(
            torch.ones(x_shape), torch.ones(w_shape), torch.ones(fout) if bias else None
        )
    except RuntimeError:
        with pytest.raises(ShapeError):
            infer("linear", LinearParam(), tuple(inputs))
        return
    assert infer("linear", LinearParam(), tuple(inputs)).outputs[0].shape == tuple(want.shape)


def test_linear_placements() -> None:
    x, w, b = op((8, 6)), op((4, 6), Shard(0), i=2), op((4,), i=3)
    inf = infer("linear", LinearParam(), (x, w, b))
    assert inf.outputs[0].placements == (Shard(1),)
    assert inf.input_placements == (None, None, (Shard(0),))
    row = infer("linear", LinearParam(), (op((8, 6), Shard(1)), op((4, 6), Shard(1), i=2), b))
    assert row.outputs[0].placements == (P,)
    both = infer("linear", LinearParam(), (op((8, 6), P), op((4, 6), i=2), op((4,), P, i=3)))
    assert both.outputs[0].placements == (P,)  # each device adds its piece of the bias
    with pytest.raises(PlacementError, match=r"linear: got \(R,\) x \(R,\) x \(P,\)"):
        infer("linear", LinearParam(), (op((8, 6)), op((4, 6), i=2), op((4,), P, i=3)))
    with pytest.raises(ShapeError, match="bias"):
        infer("linear", LinearParam(), (op((8, 6)), op((4, 6), i=2), op((5,), i=3)))


def test_outer() -> None:
    out = infer("outer", OuterParam(), (op((3,), Shard(0)), op((5,), i=2))).outputs[0]
    assert (out.shape, out.placements) == ((3, 5), (Shard(0),))
    with pytest.raises(PlacementError, match="outer: got"):
        infer("outer", OuterParam(), (op((3,), Shard(0)), op((5,), Shard(0), i=2)))
    with pytest.raises(ShapeError, match="1-D"):
        infer("outer", OuterParam(), (op((3, 1)), op((5,), i=2)))

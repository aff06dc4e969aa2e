"""The recurrent layers (``RNN``, ``LSTM``, ``GRU``) and cells (``RNNCell``, ``LSTMCell``,
``GRUCell``) against torch.nn's: parameters drawn as torch draws them (same seed, same values,
torch's names in torch's order), ``state_dict`` loaded both ways, forward on a batch sharded on
"dp" or not (even, uneven, 2-D and 3-D meshes), batched and unbatched, with and without
``hx``, a sample of every option combination, dropout between layers bit for bit in training,
reprs, the redistribution of other placements, and torch's refusals; thread and process mode.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn as tnn

import dtorch
from dtorch import nn
from dtorch.errors import ParamError, ShapeError
from tests.nn.layer_harness import DP_MESHES, batch_on_dp

pytestmark = pytest.mark.timeout(180)

_G = torch.Generator().manual_seed(5)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(5)


def _mesh(index: int) -> dtorch.DeviceMesh:
    shape, names = DP_MESHES[index % len(DP_MESHES)]
    return dtorch.init_device_mesh("cpu", shape, mesh_dim_names=names)


def _pair(name: str, mesh: dtorch.DeviceMesh, *args: Any, **kw: Any) -> tuple[Any, Any]:
    """torch's layer and dtorch's, made after the same seed: the draws must be equal, the
    names and their order too; then torch's state is loaded into dtorch's."""
    torch.manual_seed(0)
    ref = getattr(tnn, name)(*args, **kw)
    torch.manual_seed(0)
    ours = getattr(nn, name)(*args, **kw, device_mesh=mesh)
    assert list(ours.state_dict()) == list(ref.state_dict())
    for key, value in ref.state_dict().items():
        assert torch.equal(ours.state_dict()[key].to_torch(), value), key
    assert repr(ours) == repr(ref)
    with torch.no_grad():  # then other values, loaded: the oracle does not rest on the seed
        for p in ref.parameters():
            p.uniform_(-0.6, 0.6, generator=_G)
    ours.load_state_dict(ref.state_dict())
    return ref, ours


def _close(got: Any, want: Any, dtype: torch.dtype) -> None:
    tol = 1e-5 if dtype == torch.float32 else 1e-10
    if isinstance(want, tuple):
        for g, w in zip(got, want, strict=True):
            _close(g, w, dtype)
        return
    torch.testing.assert_close(got.to_torch(), want.detach(), atol=tol, rtol=tol)


def _batch_layout(mesh: dtorch.DeviceMesh, dim: int, sharded: bool) -> list[dtorch.Placement]:
    if not sharded:
        return [dtorch.Replicate()] * mesh.ndim
    return [dtorch.Shard(dim) if p.is_shard() else p for p in batch_on_dp(mesh)]


#: name, mode kwargs, bidirectional, num_layers, batch_first, proj_size, bias, dtype, hx given,
#: batch sharded: a sample covering every option, each value of each with the others varied.
_CONFIGS: list[tuple[str, dict[str, Any], bool, int, bool, int, bool, torch.dtype, bool, bool]] = [
    ("RNN", {}, False, 1, False, 0, True, torch.float32, False, True),
    ("RNN", {"nonlinearity": "relu"}, True, 2, True, 0, False, torch.float64, True, True),
    ("LSTM", {}, False, 2, False, 0, True, torch.float32, True, False),
    ("LSTM", {}, True, 1, True, 2, True, torch.float32, False, True),
    ("LSTM", {}, True, 2, False, 3, False, torch.float64, True, True),
    ("LSTM", {}, False, 1, True, 0, False, torch.float32, False, True),
    ("GRU", {}, True, 2, False, 0, True, torch.float32, False, True),
    ("GRU", {}, False, 3, True, 0, False, torch.float64, True, False),
]  # fmt: skip


@pytest.mark.parametrize("index", range(len(_CONFIGS)), ids=[c[0] for c in _CONFIGS])
def test_layers_match_torch(index: int, graph: Any) -> None:
    name, extra, bidir, layers, batch_first, proj, bias, dtype, with_hx, sharded = _CONFIGS[index]
    mesh = _mesh(index)
    kw: dict[str, Any] = dict(extra, num_layers=layers, bias=bias, batch_first=batch_first,
                              bidirectional=bidir, dtype=dtype)  # fmt: skip
    kw |= {"proj_size": proj} if proj else {}
    ref, ours = _pair(name, mesh, 3, 4, **kw)
    batch, steps = 3 + index % 3, 4
    x = torch.randn((batch, steps, 3) if batch_first else (steps, batch, 3), generator=_G)
    x = x.to(dtype)
    args: list[Any] = [x]
    if with_hx:
        rows, hidden = layers * (2 if bidir else 1), proj or 4
        h0 = torch.randn(rows, batch, hidden, generator=_G, dtype=dtype)
        c0 = torch.randn(rows, batch, 4, generator=_G, dtype=dtype)
        args.append((h0, c0) if name == "LSTM" else h0)
    want = ref(*args)
    got = ours(*_on_mesh(args, mesh, graph, 0 if batch_first else 1, sharded))
    _close(got, want, dtype)
    assert got[0].placements == _batch_layout(mesh, 0 if batch_first else 1, sharded)
    ref.load_state_dict({k: v.to_torch() for k, v in ours.state_dict().items()})


def _on_mesh(args: list[Any], mesh: Any, graph: Any, batch_dim: int, sharded: bool) -> list[Any]:
    # the input with its batch dim laid out; hx (batch on dim 1) laid out as it
    def put(t: torch.Tensor, dim: int) -> dtorch.Tensor:
        layout = _batch_layout(mesh, dim, sharded)
        return dtorch.from_torch(t, device_mesh=mesh, placements=layout, graph=graph)

    out: list[Any] = [put(args[0], batch_dim)]
    if len(args) > 1:
        hx = args[1]
        out.append(tuple(put(h, 1) for h in hx) if isinstance(hx, tuple) else put(hx, 1))
    return out


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_unbatched_input(name: str, graph: Any) -> None:
    mesh = _mesh(1)
    ref, ours = _pair(name, mesh, 3, 4, bidirectional=True, batch_first=True)
    x = torch.randn(5, 3, generator=_G)
    h0 = torch.randn(2, 4, generator=_G)
    hx: Any = (h0, torch.randn(2, 4, generator=_G)) if name == "LSTM" else h0
    on = lambda t: dtorch.from_torch(t, device_mesh=mesh, graph=graph)  # noqa: E731
    _close(ours(on(x)), ref(x), torch.float32)
    ours_hx = tuple(on(h) for h in hx) if isinstance(hx, tuple) else on(hx)
    _close(ours(on(x), ours_hx), ref(x, hx), torch.float32)


def test_dropout_between_layers_matches_torch_bit_for_bit(graph: Any) -> None:
    mesh = _mesh(2)
    ref, ours = _pair("LSTM", mesh, 3, 4, num_layers=3, dropout=0.4, bidirectional=True)
    x = torch.randn(4, 6, 3, generator=_G)
    torch.manual_seed(11)
    placed = dtorch.from_torch(x, device_mesh=mesh, placements=_batch_layout(mesh, 1, True),
                               graph=graph)  # fmt: skip
    got, after = ours(placed), torch.rand(2)
    torch.manual_seed(11)
    want, after_torch = ref(x), torch.rand(2)
    _close(got, want, torch.float32)  # a mask drawn otherwise would differ by far more
    assert torch.equal(after, after_torch)  # the default generator advanced as torch's
    ref.eval(), ours.eval()  # eval: no dropout
    _close(ours(dtorch.from_torch(x, device_mesh=mesh, graph=graph)), ref(x), torch.float32)


def test_other_placements_are_gathered_first(graph: Any) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    ref, ours = _pair("GRU", mesh, 4, 3)
    x = torch.randn(3, 5, 4, generator=_G)
    both = [dtorch.Shard(1), dtorch.Shard(2)]  # batch on dp, features on tp
    out, h = ours(dtorch.from_torch(x, device_mesh=mesh, placements=both, graph=graph))
    _close((out, h), ref(x), torch.float32)
    assert out.placements == h.placements == [dtorch.Shard(1), dtorch.Replicate()]
    whole = dtorch.from_torch(x, device_mesh=mesh, graph=graph)
    partial = whole.redistribute(mesh, [dtorch.Replicate(), dtorch.Partial()])
    out, h = ours(partial)
    _close((out, h), ref(x), torch.float32)
    assert out.placements == [dtorch.Replicate()] * 2


_CELLS = [
    ("RNNCell", {"nonlinearity": "relu"}, torch.float64),
    ("LSTMCell", {}, torch.float32),
    ("GRUCell", {"bias": False}, torch.float32),
]


@pytest.mark.parametrize(("name", "kw", "dtype"), _CELLS, ids=[c[0] for c in _CELLS])
def test_cells_match_torch(name: str, kw: dict[str, Any], dtype: torch.dtype, graph: Any) -> None:
    mesh = _mesh(len(name))
    ref, ours = _pair(name, mesh, 3, 4, **kw, dtype=dtype)
    x = torch.randn(5, 3, generator=_G, dtype=dtype)
    h0 = torch.randn(5, 4, generator=_G, dtype=dtype)
    hx: Any = (h0, torch.randn(5, 4, generator=_G, dtype=dtype)) if name == "LSTMCell" else h0
    layout = batch_on_dp(mesh)
    on = lambda t: dtorch.from_torch(t, device_mesh=mesh, placements=layout, graph=graph)  # noqa: E731
    got = ours(on(x))
    _close(got, ref(x), dtype)
    assert (got[0] if isinstance(got, tuple) else got).placements == layout
    ours_hx = tuple(on(h) for h in hx) if isinstance(hx, tuple) else on(hx)
    _close(ours(on(x), ours_hx), ref(x, hx), dtype)
    one = lambda t: dtorch.from_torch(t, device_mesh=mesh, graph=graph)  # noqa: E731
    one_hx = tuple(one(h[0]) for h in hx) if isinstance(hx, tuple) else one(hx[0])
    want_one = ref(x[0], tuple(h[0] for h in hx) if isinstance(hx, tuple) else hx[0])
    _close(ours(one(x[0]), one_hx), want_one, dtype)  # unbatched


#: constructor arguments torch refuses, with the class it raises (ours derive from it)
_BAD_CONFIGS: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("RNN", (3, 4), {"nonlinearity": "sigmoid"}),
    ("RNN", (3, 4), {"proj_size": 2}),
    ("GRU", (3, 4), {"proj_size": 0}),
    ("LSTM", (3, 4), {"proj_size": 4}),
    ("LSTM", (3, 4), {"proj_size": -1}),
    ("LSTM", (3, 0), {}),
    ("GRU", (3.0, 4), {}),
    ("GRU", (3, 4), {"num_layers": 0}),
    ("GRU", (3, 4), {"dropout": 1.5}),
    ("LSTM", (3, 4), {"bias": 1}),
]


@pytest.mark.parametrize(("name", "args", "kw"), _BAD_CONFIGS)
def test_constructor_refusals(name: str, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
    with pytest.raises((ValueError, TypeError)) as theirs:
        getattr(tnn, name)(*args, **kw)
    with pytest.raises(type(theirs.value)):
        getattr(nn, name)(*args, **kw)


def test_dropout_warning_and_cell_nonlinearity() -> None:
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nn.GRU(3, 4, dropout=0.5)
    cell = tnn.RNNCell(3, 4, nonlinearity="gelu")  # torch's refuses at the call
    with pytest.raises(RuntimeError, match="Unknown nonlinearity"):
        cell(torch.randn(2, 3))
    with pytest.raises((RuntimeError, ValueError), match="Select from 'tanh' or 'relu'"):
        nn.RNNCell(3, 4, nonlinearity="gelu")


def test_forward_refusals(graph: Any) -> None:
    lstm, gru, cell = nn.LSTM(3, 4, num_layers=2), nn.GRU(3, 4), nn.GRUCell(3, 4)
    x = dtorch.randn(5, 2, 3, graph=graph)
    packed = tnn.utils.rnn.pack_padded_sequence(torch.randn(5, 2, 3), [5, 3])
    for layer in (lstm, gru, cell):
        with pytest.raises(TypeError, match="PackedSequence is not supported"):
            layer(packed)
        with pytest.raises(TypeError, match="Tensor"):
            layer(torch.randn(2, 3))
    r = lambda *shape: dtorch.randn(*shape, graph=graph)  # noqa: E731
    z = lambda *shape: dtorch.zeros(*shape, graph=graph)  # noqa: E731
    cases: list[tuple[Any, tuple[Any, ...], type[Exception] | None, str]] = [
        (gru, (r(1, 5, 2, 3),), ValueError, "Expected input to be 2D or 3D"),
        (gru, (r(5, 2, 4),), RuntimeError, "must be equal to input_size"),
        (gru, (x.double(),), ValueError, "does not match weight dtype"),
        (gru, (x, z(2, 2, 4)), RuntimeError, r"Expected hx size \(1, 2, 4\)"),
        (gru, (x, z(2, 4)), RuntimeError, "should also be 3-D"),
        (lstm, (x, z(2, 2, 4)), TypeError, "tuple"),
        (lstm, (x, (z(2, 2, 4), z(2, 2, 4))), None, ""),
        (lstm, (x, (z(2, 2, 4), z(2, 2, 4).double())), RuntimeError, "hx.1. dtype"),
        (lstm, (r(0, 2, 3),), RuntimeError, "sequence length to be larger than 0"),
        (lstm, (r(5, 0, 3),), None, ""),  # an empty batch runs, as in torch
        (cell, (r(2, 2, 3),), ValueError, "Expected input to be 1D or 2D"),
        (cell, (r(2, 4),), RuntimeError, "inconsistent input_size"),
        (nn.LSTMCell(3, 4), (r(2, 3), z(2, 4)), TypeError, "tuple"),
        (cell, (r(2, 3), z(3, 4)), RuntimeError, "hx must have shape"),
    ]  # fmt: skip
    for layer, args, error, message in cases:
        if error is None:
            layer(*args)  # accepted: a well-formed case among the refused ones
            continue
        with pytest.raises(error, match=message):
            layer(*args)
    assert issubclass(ShapeError, RuntimeError) and issubclass(ParamError, ValueError)

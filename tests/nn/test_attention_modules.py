"""``MultiheadAttention``, ``F.multi_head_attention_forward`` and the Transformer layers
against torch.nn's with the same weights (a torch module's ``state_dict`` loaded): eval mode
and training mode with ``dropout=0.0``, batch first both ways, bool and float ``attn_mask``,
``key_padding_mask``, ``is_causal``, on meshes with the batch sharded on "dp" (even, uneven,
2-D, 3-D) and unsharded; parameters drawn as torch draws them; torch's refusals. Thread and
process mode (the ``graph`` fixture). torch runs with autograd on (its parameters require
grad), so it takes its plain path, not its inference fast path."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn as tnn

import dtorch
import dtorch.nn.functional as F
from dtorch import Replicate, Shard, nn
from tests.nn.layer_harness import DP_MESHES

pytestmark = pytest.mark.timeout(120)

_G = torch.Generator()


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(5)


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_G)


def _mesh(index: int) -> dtorch.DeviceMesh:
    shape, names = DP_MESHES[index]
    return dtorch.init_device_mesh("cpu", shape, mesh_dim_names=names)


def _batched(x: torch.Tensor, mesh: dtorch.DeviceMesh, dim: int, graph: Any) -> dtorch.Tensor:
    """``x`` with dim ``dim`` sharded on "dp" (Replicate elsewhere)."""
    placements = [Shard(dim) if n == "dp" else Replicate() for n in mesh.dim_names]
    return dtorch.from_torch(x, device_mesh=mesh, placements=placements, graph=graph)


def _loaded(ref: tnn.Module, ours: nn.Module, *, train: bool) -> None:
    """``ref``'s state loaded into ``ours`` (the same keys), both in one mode."""
    assert set(ours.state_dict()) == set(ref.state_dict())
    ours.load_state_dict(ref.state_dict())
    ref.train(train)
    ours.train(train)


def _close(got: dtorch.Tensor, want: torch.Tensor, atol: float = 1e-5) -> None:
    torch.testing.assert_close(got.to_torch(), want.detach(), atol=atol, rtol=1e-4)


def _masks(kind: str, n: int, heads: int, tgt: int, src: int) -> tuple[Any, Any]:
    """(attn_mask, key_padding_mask) of a kind, never masking a whole row."""
    if kind == "none":
        return None, None
    bool_mask = torch.rand(tgt, src, generator=_G) > 0.6
    bool_mask[:, 0] = False
    padding = torch.rand(n, src, generator=_G) > 0.6
    padding[:, 0] = False
    return {
        "bool": (bool_mask, None),
        "padding": (None, padding),
        "bool+padding": (bool_mask, padding),
        "float3d+padding": (_randn(n * heads, tgt, src), padding.float() * -1e4),
    }[kind]


# (mesh index, MHA keywords, mask kind, need_weights, average, train)
_MHA_CASES = [
    (0, {}, "none", True, True, False),
    (1, {"batch_first": True}, "bool+padding", True, False, False),
    (2, {"add_bias_kv": True, "add_zero_attn": True}, "padding", False, True, True),
    (3, {"kdim": 3, "vdim": 5, "batch_first": True}, "float3d+padding", True, True, True),
    (0, {"bias": False, "dropout": 0.3}, "bool", False, True, False),
]


@pytest.mark.parametrize(("mesh_index", "kw", "masks", "need_weights", "average", "train"),
                         _MHA_CASES)  # fmt: skip
def test_multihead_attention_matches_torch(
    mesh_index: int, kw: dict[str, Any], masks: str, need_weights: bool, average: bool,
    train: bool, graph: Any,
) -> None:  # fmt: skip
    mesh = _mesh(mesh_index)
    torch.manual_seed(0)
    ref = tnn.MultiheadAttention(6, 2, **kw)
    torch.manual_seed(0)
    ours = nn.MultiheadAttention(6, 2, **kw, device_mesh=mesh)
    for key, value in ref.state_dict().items():  # drawn as torch draws them
        assert torch.equal(ours.state_dict()[key].to_torch(), value), key
    _loaded(ref, ours, train=train)
    n, tgt, src = 5, 4, 3
    bdim = 0 if kw.get("batch_first") else 1
    shape = (lambda s, e: (n, s, e)) if bdim == 0 else (lambda s, e: (s, n, e))
    q = _randn(*shape(tgt, 6))
    k, v = _randn(*shape(src, kw.get("kdim", 6))), _randn(*shape(src, kw.get("vdim", 6)))
    attn_mask, padding = _masks(masks, n, 2, tgt, src)
    want, want_w = ref(q, k, v, padding, need_weights, attn_mask, average)
    dq, dk, dv = (_batched(t, mesh, bdim, graph) for t in (q, k, v))
    got, got_w = ours(dq, dk, dv, padding, need_weights, attn_mask, average)
    _close(got, want)
    assert got.placements == dq.placements  # the batch stays sharded
    assert (got_w is None) == (want_w is None)
    if got_w is not None:
        _close(got_w, want_w, atol=1e-6)
        assert got_w.placements[mesh.dim_names.index("dp")] == Shard(0)


@pytest.mark.filterwarnings(
    "ignore:Support for mismatched key_padding_mask"
)  # torch's, on its side
def test_self_attention_unbatched_causal_and_dtorch_masks(graph: Any) -> None:
    """Self-attention (``q is k is v``) unbatched; ``is_causal`` with a causal mask (the
    fused path); masks given as dtorch tensors (a bool padding mask sharded like the batch)."""
    mesh = _mesh(0)
    torch.manual_seed(1)
    ref = tnn.MultiheadAttention(4, 2, batch_first=True, dtype=torch.float64)
    ours = nn.MultiheadAttention(4, 2, batch_first=True, dtype=torch.float64, device_mesh=mesh)
    _loaded(ref, ours, train=False)
    x = _randn(3, 4).double()
    want, want_w = ref(x, x, x)
    dx = dtorch.from_torch(x, device_mesh=mesh)
    got, got_w = ours(dx, dx, dx)
    _close(got, want, atol=1e-12)
    _close(got_w, want_w, atol=1e-12)
    xb = _randn(4, 5, 4).double()
    causal = tnn.Transformer.generate_square_subsequent_mask(5, dtype=torch.float64)
    padding = torch.tensor([[False] * 5, [False] * 4 + [True]] * 2)
    want = ref(xb, xb, xb, need_weights=False, attn_mask=causal, is_causal=True)[0]
    dxb = _batched(xb, mesh, 0, graph)
    ours_mask = nn.Transformer.generate_square_subsequent_mask(5, dtype=torch.float64,
                                                               device_mesh=mesh)  # fmt: skip
    got = ours(dxb, dxb, dxb, need_weights=False, attn_mask=ours_mask, is_causal=True)[0]
    _close(got, want, atol=1e-12)
    want, want_w = ref(xb, xb, xb, key_padding_mask=padding, attn_mask=causal, is_causal=True)
    got, got_w = ours(dxb, dxb, dxb, key_padding_mask=_batched(padding, mesh, 0, graph),
                      attn_mask=ours_mask, is_causal=True)  # fmt: skip
    _close(got, want, atol=1e-12)
    _close(got_w, want_w, atol=1e-12)


def test_functional_form_matches_torch(graph: Any) -> None:
    """``F.multi_head_attention_forward`` with separate projection weights, positional as
    torch's signature."""
    mesh = _mesh(2)
    e, heads, n = 4, 2, 4
    weights = [_randn(e, e) for _ in range(4)]
    bias, out_bias = _randn(3 * e), _randn(e)
    q, k = _randn(3, n, e), _randn(5, n, e)
    args = (e, heads, None, bias, None, None, False, 0.0, weights[3], out_bias, True)
    want, want_w = tnn.functional.multi_head_attention_forward(
        q, k, k, *args, None, True, None, True, *weights[:3], average_attn_weights=False
    )
    d = lambda t: dtorch.from_torch(t, device_mesh=mesh)  # noqa: E731
    dargs = tuple(d(a) if isinstance(a, torch.Tensor) else a for a in args)
    dk = _batched(k, mesh, 1, graph)
    got, got_w = F.multi_head_attention_forward(
        _batched(q, mesh, 1, graph), dk, dk, *dargs, None, True, None, True,
        *(d(w) for w in weights[:3]), average_attn_weights=False,
    )  # fmt: skip
    _close(got, want)
    _close(got_w, want_w, atol=1e-6)
    static = [_randn(n * heads, 6, e // heads) for _ in range(2)]  # static_k, static_v
    want = tnn.functional.multi_head_attention_forward(
        q, k, k, *args, None, False, None, True, *weights[:3], *static
    )[0]
    got = F.multi_head_attention_forward(
        _batched(q, mesh, 1, graph), dk, dk, *dargs, None, False, None, True,
        *(d(w) for w in weights[:3]), static[0], d(static[1]),
    )[0]  # fmt: skip
    _close(got, want)


def test_out_projection_is_torchs_class(graph: Any) -> None:
    ours, ref = nn.MultiheadAttention(4, 2), torch.nn.MultiheadAttention(4, 2)
    assert repr(ours) == repr(ref)
    assert isinstance(ours.out_proj, nn.Linear)
    assert type(ours.out_proj).__name__ == "NonDynamicallyQuantizableLinear"


def test_multihead_attention_refusals(graph: Any) -> None:
    with pytest.raises(AssertionError, match="divisible by num_heads"):
        nn.MultiheadAttention(6, 4)
    with pytest.raises(ValueError, match="greater than 0"):
        nn.MultiheadAttention(0, 1)
    m = nn.MultiheadAttention(4, 2)
    x, x2 = dtorch.randn(3, 2, 4), dtorch.randn(3, 4)
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        m(x, x, x, is_causal=True)
    with pytest.raises(RuntimeError, match="2D attn_mask"):
        m(x, x, x, attn_mask=torch.zeros(2, 3))
    with pytest.raises(AssertionError, match="expected key and value to be 3-D"):
        m(x, x2, x2)
    with pytest.raises(AssertionError, match="only bool and floating"):
        m(x, x, x, attn_mask=torch.zeros(3, 3, dtype=torch.int64))
    with pytest.raises(AssertionError, match="key_padding_mask shape"):
        m(x, x, x, key_padding_mask=torch.zeros(2, 4, dtype=torch.bool))
    with pytest.raises(AssertionError, match="expecting embedding dimension of 4"):
        m(dtorch.randn(3, 2, 6), x, x)


# (layer, mesh index, keywords, masks, train)
_LAYER_CASES = [
    ("encoder", 0, {}, "none", False),
    ("encoder", 2, {"norm_first": True, "activation": "gelu", "batch_first": True},
     "bool+padding", True),
    ("decoder", 1, {"batch_first": True}, "padding", False),
    ("decoder", 3, {"norm_first": True, "bias": False}, "bool", True),
]  # fmt: skip


@pytest.mark.parametrize(("layer", "mesh_index", "kw", "masks", "train"), _LAYER_CASES)
def test_transformer_layers_match_torch(
    layer: str, mesh_index: int, kw: dict[str, Any], masks: str, train: bool, graph: Any
) -> None:
    mesh = _mesh(mesh_index)
    name = "TransformerEncoderLayer" if layer == "encoder" else "TransformerDecoderLayer"
    kw = {"dim_feedforward": 12, "dropout": 0.0 if train else 0.2, **kw}
    ref = getattr(tnn, name)(8, 2, **kw)
    ours = getattr(nn, name)(8, 2, **kw, device_mesh=mesh)
    _loaded(ref, ours, train=train)
    n, t, s = 4, 3, 5
    bdim = 0 if kw.get("batch_first") else 1
    shape = (lambda length: (n, length, 8)) if bdim == 0 else (lambda length: (length, n, 8))
    tgt, memory = _randn(*shape(t)), _randn(*shape(s))
    attn_mask, padding = _masks(masks, n, 2, t, t)
    if layer == "encoder":
        want = ref(tgt, attn_mask, padding)
        got = ours(_batched(tgt, mesh, bdim, graph), attn_mask, padding)
    else:
        mem_mask, mem_padding = _masks(masks, n, 2, t, s)
        want = ref(tgt, memory, attn_mask, mem_mask, padding, mem_padding)
        dtgt, dmem = (_batched(x, mesh, bdim, graph) for x in (tgt, memory))
        got = ours(dtgt, dmem, attn_mask, mem_mask, padding, mem_padding)
    _close(got, want)
    assert got.placements[mesh.dim_names.index("dp")] == Shard(bdim)


def test_transformer_matches_torch(graph: Any) -> None:
    """The whole Transformer (stacks of copied layers, final norms, xavier-drawn matrices as
    torch draws them), a causal target mask, padding on source and memory, eval mode."""
    mesh = _mesh(2)
    kw = {"num_encoder_layers": 2, "num_decoder_layers": 1, "dim_feedforward": 12,
          "batch_first": True}  # fmt: skip
    torch.manual_seed(2)
    ref = tnn.Transformer(8, 2, **kw)
    torch.manual_seed(2)
    ours = nn.Transformer(8, 2, **kw, device_mesh=mesh)
    for key, value in ref.state_dict().items():
        assert torch.equal(ours.state_dict()[key].to_torch(), value), key
    _loaded(ref, ours, train=False)
    src, tgt = _randn(4, 5, 8), _randn(4, 3, 8)
    padding = torch.zeros(4, 5, dtype=torch.bool)
    padding[1, 3:] = True
    causal = tnn.Transformer.generate_square_subsequent_mask(3)
    want = ref(src, tgt, tgt_mask=causal, src_key_padding_mask=padding,
               memory_key_padding_mask=padding, tgt_is_causal=True)  # fmt: skip
    got = ours(
        _batched(src, mesh, 0, graph), _batched(tgt, mesh, 0, graph), tgt_mask=causal,
        src_key_padding_mask=padding, memory_key_padding_mask=padding, tgt_is_causal=True,
    )  # fmt: skip
    _close(got, want)
    assert got.placements == [Shard(0), Replicate()]


def test_transformer_stacks_and_refusals(graph: Any) -> None:
    """An encoder stack with a final norm, unsharded; a callable activation; torch's
    refusals of a bad activation and of mismatched inputs."""
    ref_layer = tnn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, activation=tnn.functional.gelu)
    ref = tnn.TransformerEncoder(ref_layer, 2, norm=tnn.LayerNorm(4), enable_nested_tensor=False)
    layer = nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, activation=nn.GELU())
    ours = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(4))
    ours.load_state_dict(ref.state_dict())
    assert ours.layers[0].linear1.weight is not ours.layers[1].linear1.weight
    x = _randn(5, 3, 4)
    _close(ours(dtorch.from_torch(x)), ref(x))
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        nn.TransformerEncoderLayer(4, 2, activation="tanh")
    m = nn.Transformer(4, 2, 1, 1, 8)
    with pytest.raises(RuntimeError, match="batch number of src and tgt"):
        m(dtorch.randn(3, 2, 4), dtorch.randn(3, 1, 4))
    with pytest.raises(RuntimeError, match="feature number"):
        m(dtorch.randn(3, 2, 4), dtorch.randn(3, 2, 5))


def test_attention_dropout_in_training_draws_as_torch(graph: Any) -> None:
    """Dropout on the weights in training mode: the same seed drops the same weights."""
    mesh = _mesh(0)
    ref = tnn.MultiheadAttention(4, 2, dropout=0.5)
    ours = nn.MultiheadAttention(4, 2, dropout=0.5, device_mesh=mesh)
    _loaded(ref, ours, train=True)
    x = _randn(3, 4, 4)
    torch.manual_seed(7)
    want, want_w = ref(x, x, x, average_attn_weights=False)
    dx = _batched(x, mesh, 1, graph)
    torch.manual_seed(7)
    got, got_w = ours(dx, dx, dx, average_attn_weights=False)
    _close(got, want)
    _close(got_w, want_w, atol=1e-6)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [True, False])
def test_transformer_layers_in_training_draw_dropout_as_torch(
    batch_first: bool, norm_first: bool, graph: Any
) -> None:
    """torch's batch-first attention returns a transposed (strided) output, and the dropout
    after it draws its mask in that memory order: the layers draw it so too (with
    ``batch_first`` they differed from torch by about 0.4 in training)."""
    mesh = _mesh(0)
    kw = {"batch_first": batch_first, "norm_first": norm_first}
    torch.manual_seed(0)
    refs = (
        tnn.TransformerEncoderLayer(8, 2, 16, **kw),
        tnn.TransformerDecoderLayer(8, 2, 16, **kw),
    )
    ours = (
        nn.TransformerEncoderLayer(8, 2, 16, device_mesh=mesh, **kw),
        nn.TransformerDecoderLayer(8, 2, 16, device_mesh=mesh, **kw),
    )
    x, memory = _randn(4, 5, 8), _randn(4, 6, 8) if batch_first else _randn(6, 5, 8)
    batch = 0 if batch_first else 1
    for ref, layer in zip(refs, ours, strict=True):
        _loaded(ref, layer, train=True)
        extra = () if isinstance(ref, tnn.TransformerEncoderLayer) else (memory,)
        torch.manual_seed(7)
        want = ref(x, *extra)
        inputs = (
            _batched(x, mesh, batch, graph),
            *(_batched(m, mesh, batch, graph) for m in extra),
        )
        torch.manual_seed(7)
        _close(layer(*inputs), want)


@pytest.mark.parametrize("need_weights", [True, False])
def test_sequence_sharded_query_and_redistributed_inputs(need_weights: bool, graph: Any) -> None:
    """A query sharded on batch and sequence keeps both (output, weights); a key/value with
    the embedding dim sharded or Partial is made Replicate there first (same values)."""
    mesh = _mesh(2)
    ref = tnn.MultiheadAttention(4, 2)
    ours = nn.MultiheadAttention(4, 2, device_mesh=mesh)
    _loaded(ref, ours, train=False)
    q, k = _randn(5, 3, 4), _randn(6, 3, 4)
    attn_mask = torch.rand(5, 6, generator=_G) > 0.5
    attn_mask[:, 0] = False
    want, want_w = ref(q, k, k, attn_mask=attn_mask, need_weights=need_weights)
    dq = dtorch.from_torch(q, device_mesh=mesh, placements=[Shard(1), Shard(0)], graph=graph)
    for kv_placements in ([Shard(2), Shard(0)], [Shard(1), dtorch.Partial()]):
        dk = dtorch.from_torch(k, device_mesh=mesh, placements=kv_placements, graph=graph)
        got, got_w = ours(dq, dk, dk, attn_mask=attn_mask, need_weights=need_weights)
        _close(got, want)
        assert got.placements == [Shard(1), Shard(0)]
        if need_weights:
            _close(got_w, want_w, atol=1e-6)
            assert got_w.placements == [Shard(0), Shard(1)]


def test_causal_hint_with_dropout_keeps_the_mask(graph: Any) -> None:
    """``is_causal`` with dropout in training (torch: its fused kernel's own draws) runs the
    explicit path with the causal mask: the same values as with ``need_weights=True``."""
    mesh = _mesh(1)
    ours = nn.MultiheadAttention(4, 2, dropout=0.5, device_mesh=mesh)
    causal = nn.Transformer.generate_square_subsequent_mask(3, device_mesh=mesh)
    dx = _batched(_randn(3, 4, 4), mesh, 1, graph)
    torch.manual_seed(3)
    fused = ours(dx, dx, dx, need_weights=False, attn_mask=causal, is_causal=True)[0]
    torch.manual_seed(3)
    explicit = ours(dx, dx, dx, attn_mask=causal)[0]
    _close(fused, explicit.to_torch())


def test_review_findings_match_torch(graph: dtorch.Graph) -> None:
    """A differential review's findings: an unbatched query with a 1-D padding mask; the
    transformer layers gather a sharded feature dim and sum a Partial input first; an
    unhashable callable activation, registered last as torch registers it; an integer
    attn_mask refused even where is_causal drops it; the recurrent layers' all_weights."""
    mesh = dtorch.init_device_mesh("cpu", 2)

    def d(t: torch.Tensor, p: Any = None) -> dtorch.Tensor:
        return dtorch.from_torch(t, device_mesh=mesh, placements=[p or Replicate()], graph=graph)

    torch.manual_seed(0)
    ref = torch.nn.MultiheadAttention(4, 2)
    with graph.as_default():
        m = dtorch.nn.MultiheadAttention(4, 2, device_mesh=mesh)
        layer = dtorch.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, device_mesh=mesh).eval()
    m.load_state_dict(ref.state_dict())
    x, kpm = torch.randn(3, 4), torch.tensor([False, True, False])
    want, got = ref(x, x, x, key_padding_mask=kpm), m(d(x), d(x), d(x), key_padding_mask=kpm)
    torch.testing.assert_close(got[0].to_torch(), want[0])
    torch.testing.assert_close(got[1].to_torch(), want[1])
    torch_layer = torch.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0).eval()
    layer.load_state_dict(torch_layer.state_dict())
    src = torch.randn(3, 2, 4)
    with torch.no_grad():
        expected = torch_layer(src)
    for placed in (d(src, dtorch.Shard(2)), d(src, dtorch.Partial())):
        torch.testing.assert_close(layer(placed).to_torch(), expected, atol=1e-5, rtol=1e-5)

    class Act:  # unhashable, as torch allows
        __hash__ = None  # type: ignore[assignment]

        def __call__(self, t: Any) -> Any:
            return t.relu()

    assert dtorch.nn.TransformerEncoderLayer(4, 2, 8, activation=Act()) is not None
    prelu = dtorch.nn.TransformerEncoderLayer(4, 2, 8, activation=dtorch.nn.PReLU())
    theirs = torch.nn.TransformerEncoderLayer(4, 2, 8, activation=torch.nn.PReLU())
    names = [n for n, _ in theirs.named_parameters()]
    assert [n for n, _ in prelu.named_parameters()] == names
    q = d(torch.randn(3, 2, 4))
    with pytest.raises(AssertionError, match="bool and floating"):
        m(
            q,
            q,
            q,
            attn_mask=torch.zeros(3, 3, dtype=torch.long),
            is_causal=True,
            need_weights=False,
        )
    lstm, torch_lstm = (
        dtorch.nn.LSTM(3, 4, 2, bidirectional=True),
        torch.nn.LSTM(3, 4, 2, bidirectional=True),
    )
    shapes = [[tuple(w.shape) for w in ws] for ws in lstm.all_weights]
    assert shapes == [[tuple(w.shape) for w in ws] for ws in torch_lstm.all_weights]

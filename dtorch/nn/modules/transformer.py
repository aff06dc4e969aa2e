"""Transformer layers: ``TransformerEncoderLayer``, ``TransformerDecoderLayer``,
``TransformerEncoder``, ``TransformerDecoder`` and ``Transformer``, as torch.nn's.

torch's constructors (``d_model, nhead, dim_feedforward, dropout, activation`` ("relu",
"gelu", or a callable on dtorch tensors: a dtorch function or module; torch's own
``F.relu``/``F.gelu`` are read as dtorch's), ``layer_norm_eps, batch_first, norm_first, bias,
device, dtype``) plus ``device_mesh=``; the submodules have torch's names (``self_attn``,
``multihead_attn``, ``linear1``, ``linear2``, ``norm1``..``norm3``, ``dropout1``..,
``layers.0``.., ``encoder``, ``decoder``, ``norm``), so a torch module's ``state_dict`` loads
and, in eval mode (or with ``dropout=0.0``), the outputs are torch's. Built from
``MultiheadAttention``, ``Linear``, ``LayerNorm`` and ``Dropout``: the placements are theirs
(a batch sharded on a ``dp`` mesh dim stays sharded). The stacks copy their layer
(``copy.deepcopy``, as torch). torch's inference fast path and nested tensors (used by torch
only without autograd) are not reproduced: padded positions hold what the plain path computes.
A mask equal to the causal one is not detected (torch only uses it to pick a kernel): pass
``is_causal=True`` to say so.

Example:
    >>> import torch, dtorch
    >>> ref = torch.nn.TransformerEncoderLayer(4, 2, dim_feedforward=8, batch_first=True).eval()
    >>> m = dtorch.nn.TransformerEncoderLayer(4, 2, dim_feedforward=8, batch_first=True).eval()
    >>> m.load_state_dict(ref.state_dict())
    <All keys matched successfully>
    >>> x = torch.randn(2, 3, 4)
    >>> torch.allclose(m(dtorch.from_torch(x)).to_torch(), ref(x), atol=1e-5)
    True
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from dtorch.api.creation import full
from dtorch.api.ops.activations import gelu
from dtorch.api.tensor import Tensor
from dtorch.errors import ParamError
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.placement import Placement, Replicate, Shard
from dtorch.nn import init
from dtorch.nn.functional import relu
from dtorch.nn.modules.attention import MultiheadAttention
from dtorch.nn.modules.container import ModuleList
from dtorch.nn.modules.dropout import Dropout
from dtorch.nn.modules.linear import Device, Linear, resolve_mesh
from dtorch.nn.modules.module import Module
from dtorch.nn.modules.normalization import LayerNorm

#: torch's activation names and functions, read as dtorch's.
_ACTIVATIONS: dict[str, Callable[..., Tensor]] = {"relu": relu, "gelu": gelu}
#: torch's functions of those names, by identity (a callable given need not be hashable)
_TORCH_ACTIVATIONS = ((torch.nn.functional.relu, relu), (torch.nn.functional.gelu, gelu))


def _activation(activation: Any) -> Callable[..., Tensor]:
    """A name or torch function -> dtorch's; any other callable as it is."""
    if isinstance(activation, str):
        if activation not in _ACTIVATIONS:
            raise ParamError(f"activation should be relu/gelu, not {activation}")
        return _ACTIVATIONS[activation]
    for theirs, ours in _TORCH_ACTIVATIONS:
        if activation is theirs:
            return ours
    if not callable(activation):
        raise TypeError(f"activation must be 'relu', 'gelu' or a callable, got {activation!r}")
    return activation


class _Block(Module):
    """What both layers share: the feed-forward block and the residual arrangement."""

    def _feed_forward_parts(
        self, d_model: int, dim_ff: int, dropout: float, kw: dict[str, Any]
    ) -> None:
        # the feed-forward block's layers; the activation is set last, in torch's order
        self.linear1 = Linear(d_model, dim_ff, bias=kw.pop("bias"), **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_ff, d_model, bias=self.linear1.bias is not None, **kw)

    def _ff_block(self, x: Tensor) -> Tensor:
        return self.linear2(self.dropout(self.activation(self.linear1(x))))

    def _residual(
        self,
        x: Tensor,
        norm: Module,
        drop: Callable[[Tensor], Tensor],
        block: Callable[..., Tensor],
    ) -> Tensor:
        """``x + block(norm(x))`` (norm_first) or ``norm(x + block(x))``, the block dropped
        out; ``x`` with its features whole first (see ``_whole_features``)."""
        x = _whole_features(x)
        if self.norm_first:
            return x + drop(block(norm(x)))
        return norm(x + drop(block(x)))


def _whole_features(x: Tensor) -> Tensor:
    """``x`` with its feature dim (the last) gathered and a Partial summed, where it has them:
    the layer norm and the residual sum read every feature of a row (its other shards stay)."""
    last = x.ndim - 1
    want = [
        Replicate() if p.is_partial() or (isinstance(p, Shard) and p.dim % x.ndim == last) else p
        for p in x.placements
    ]
    return x if want == list(x.placements) else x.redistribute(placements=want)


def _attend(
    attn: MultiheadAttention,
    memory: Tensor | None,
    mask: Any,
    padding: Any,
    causal: bool,
    x: Tensor,
) -> Tensor:
    """``attn`` over ``memory`` (None: ``x`` itself), without the weights (torch's blocks)."""
    kv = x if memory is None else memory
    return attn(x, kv, kv, padding, False, mask, is_causal=causal)[0]


def _sequence_first_dropout(drop: Module, batch_first: bool, y: Tensor) -> Tensor:
    """``drop`` of an attention output as torch draws it: torch's batch-first attention
    returns its (L, N, E) result transposed (a strided view) and dropout draws its mask in
    that memory order, so the mask is drawn on the (L, N, E) layout here and transposed back
    (dtorch draws in row-major order: drawn on (N, L, E), the layer's masks differed)."""
    if not (batch_first and y.ndim == 3):  # unbatched or sequence-first: no transpose
        return drop(y)
    return drop(y.transpose(0, 1)).transpose(0, 1)


def _layer_kw(bias: bool, device: Device, dtype: Any, mesh: DeviceMesh | None) -> dict[str, Any]:
    # the keywords every sublayer takes (the mesh resolved once, as the layer's)
    return {"bias": bias, "dtype": dtype, "device_mesh": resolve_mesh("Transformer", mesh, device)}


class TransformerEncoderLayer(_Block):
    """Self-attention then feed-forward, each with a residual and a LayerNorm.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.TransformerEncoderLayer(4, 2, dim_feedforward=8, activation="gelu")
        >>> m(dtorch.randn(3, 2, 4)).shape
        torch.Size([3, 2, 4])
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: Any = "relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: Device = None,
        dtype: torch.dtype | None = None,
        *,
        device_mesh: DeviceMesh | None = None,
    ) -> None:
        super().__init__()
        kw = _layer_kw(bias, device, dtype, device_mesh)
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, batch_first=batch_first, **kw
        )
        self._feed_forward_parts(d_model, dim_feedforward, dropout, dict(kw))
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, **kw)
        self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout)
        self.activation = _activation(activation)  # last, as torch registers a module given

    def forward(
        self,
        src: Tensor,
        src_mask: Any = None,
        src_key_padding_mask: Any = None,
        is_causal: bool = False,
    ) -> Tensor:
        """torch's forward: ``src`` (S, N, E), or (N, S, E) with ``batch_first``."""
        attend = partial(_attend, self.self_attn, None, src_mask, src_key_padding_mask, is_causal)
        drop = partial(_sequence_first_dropout, self.dropout1, self.self_attn.batch_first)
        x = self._residual(src, self.norm1, drop, attend)
        return self._residual(x, self.norm2, self.dropout2, self._ff_block)


class TransformerDecoderLayer(_Block):
    """Self-attention, attention over ``memory``, then feed-forward, each with a residual and
    a LayerNorm.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.TransformerDecoderLayer(4, 2, dim_feedforward=8, batch_first=True)
        >>> m(dtorch.randn(2, 3, 4), dtorch.randn(2, 5, 4)).shape
        torch.Size([2, 3, 4])
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: Any = "relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: Device = None,
        dtype: torch.dtype | None = None,
        *,
        device_mesh: DeviceMesh | None = None,
    ) -> None:
        super().__init__()
        kw = _layer_kw(bias, device, dtype, device_mesh)
        self.self_attn, self.multihead_attn = (
            MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first, **kw)
            for _ in range(2)
        )
        self._feed_forward_parts(d_model, dim_feedforward, dropout, dict(kw))
        self.norm_first = norm_first
        self.norm1, self.norm2, self.norm3 = (
            LayerNorm(d_model, eps=layer_norm_eps, **kw) for _ in range(3)
        )
        self.dropout1, self.dropout2, self.dropout3 = (Dropout(dropout) for _ in range(3))
        self.activation = _activation(activation)  # last, as torch registers a module given

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Any = None,
        memory_mask: Any = None,
        tgt_key_padding_mask: Any = None,
        memory_key_padding_mask: Any = None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ) -> Tensor:
        """torch's forward: ``tgt`` (T, N, E), ``memory`` (S, N, E) (batch first with
        ``batch_first``)."""
        attend = partial(
            _attend, self.self_attn, None, tgt_mask, tgt_key_padding_mask, tgt_is_causal
        )
        cross = partial(
            _attend,
            self.multihead_attn,
            memory,
            memory_mask,
            memory_key_padding_mask,
            memory_is_causal,
        )
        first = self.self_attn.batch_first
        drop1 = partial(_sequence_first_dropout, self.dropout1, first)
        drop2 = partial(_sequence_first_dropout, self.dropout2, first)
        x = self._residual(tgt, self.norm1, drop1, attend)
        x = self._residual(x, self.norm2, drop2, cross)
        return self._residual(x, self.norm3, self.dropout3, self._ff_block)


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer`` (``layers``), then ``norm`` if given.
    ``enable_nested_tensor`` and ``mask_check`` are accepted and kept (no nested tensors).

    Example:
        >>> import dtorch
        >>> layer = dtorch.nn.TransformerEncoderLayer(4, 2, dim_feedforward=8)
        >>> dtorch.nn.TransformerEncoder(layer, 2)(dtorch.randn(3, 2, 4)).shape
        torch.Size([3, 2, 4])
    """

    def __init__(
        self,
        encoder_layer: Module,
        num_layers: int,
        norm: Module | None = None,
        enable_nested_tensor: bool = True,
        mask_check: bool = True,
    ) -> None:
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers, self.norm = num_layers, norm
        self.enable_nested_tensor, self.mask_check = enable_nested_tensor, mask_check

    def forward(
        self,
        src: Tensor,
        mask: Any = None,
        src_key_padding_mask: Any = None,
        is_causal: bool | None = None,
    ) -> Tensor:
        """Each layer in turn (``is_causal=None`` is False: see the module docstring)."""
        out = src
        for layer in self.layers:
            out = layer(
                out,
                src_mask=mask,
                src_key_padding_mask=src_key_padding_mask,
                is_causal=bool(is_causal),
            )
        return out if self.norm is None else self.norm(out)


class TransformerDecoder(Module):
    """``num_layers`` copies of ``decoder_layer`` (``layers``), then ``norm`` if given.

    Example:
        >>> import dtorch
        >>> layer = dtorch.nn.TransformerDecoderLayer(4, 2, dim_feedforward=8)
        >>> m = dtorch.nn.TransformerDecoder(layer, 2)
        >>> m(dtorch.randn(3, 2, 4), dtorch.randn(5, 2, 4)).shape
        torch.Size([3, 2, 4])
    """

    def __init__(self, decoder_layer: Module, num_layers: int, norm: Module | None = None) -> None:
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
        self.num_layers, self.norm = num_layers, norm

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Any = None,
        memory_mask: Any = None,
        tgt_key_padding_mask: Any = None,
        memory_key_padding_mask: Any = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        """Each layer in turn over ``memory`` (``tgt_is_causal=None`` is False)."""
        out = tgt
        for layer in self.layers:
            out = layer(
                out,
                memory,
                tgt_mask=tgt_mask,
                memory_mask=memory_mask,
                tgt_key_padding_mask=tgt_key_padding_mask,
                memory_key_padding_mask=memory_key_padding_mask,
                tgt_is_causal=bool(tgt_is_causal),
                memory_is_causal=memory_is_causal,
            )
        return out if self.norm is None else self.norm(out)


class Transformer(Module):
    """torch.nn.Transformer: an encoder and a decoder stack, each ending in a LayerNorm
    (or ``custom_encoder``/``custom_decoder``); matrices drawn xavier-uniform as torch.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.Transformer(8, 2, 1, 1, dim_feedforward=16, batch_first=True)
        >>> m(dtorch.randn(2, 5, 8), dtorch.randn(2, 3, 8)).shape
        torch.Size([2, 3, 8])
    """

    def __init__(
        self,
        d_model: int = 512,
        nhead: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: Any = "relu",
        custom_encoder: Module | None = None,
        custom_decoder: Module | None = None,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: Device = None,
        dtype: torch.dtype | None = None,
        *,
        device_mesh: DeviceMesh | None = None,
    ) -> None:
        super().__init__()
        kw = _layer_kw(bias, device, dtype, device_mesh)
        layer = dict(
            dim_feedforward=dim_feedforward,
            dropout=dropout,
            activation=activation,
            layer_norm_eps=layer_norm_eps,
            batch_first=batch_first,
            norm_first=norm_first,
            **kw,
        )
        norm = partial(LayerNorm, d_model, eps=layer_norm_eps, **kw)
        self.encoder: Module = (
            TransformerEncoder(
                TransformerEncoderLayer(d_model, nhead, **layer), num_encoder_layers, norm()
            )
            if custom_encoder is None
            else custom_encoder
        )
        self.decoder: Module = (
            TransformerDecoder(
                TransformerDecoderLayer(d_model, nhead, **layer), num_decoder_layers, norm()
            )
            if custom_decoder is None
            else custom_decoder
        )
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        # torch's: every matrix xavier-uniform, in parameter order
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        src_mask: Any = None,
        tgt_mask: Any = None,
        memory_mask: Any = None,
        src_key_padding_mask: Any = None,
        tgt_key_padding_mask: Any = None,
        memory_key_padding_mask: Any = None,
        src_is_causal: bool | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        """torch's forward: the encoder over ``src``, the decoder over ``tgt`` and it."""
        self._check_inputs(src, tgt)
        memory = self.encoder(
            src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal
        )
        return self.decoder(
            tgt,
            memory,
            tgt_mask=tgt_mask,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
            tgt_is_causal=tgt_is_causal,
            memory_is_causal=memory_is_causal,
        )

    def _check_inputs(self, src: Tensor, tgt: Tensor) -> None:
        # torch's checks and messages (RuntimeError: a ParamError is one)
        batch = 0 if self.batch_first else 1
        if src.ndim == 3 and src.shape[batch] != tgt.shape[batch]:
            raise ParamError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ParamError("the feature number of src and tgt must be equal to d_model")

    @staticmethod
    def generate_square_subsequent_mask(
        sz: int,
        device: Device = None,
        dtype: torch.dtype | None = None,
        *,
        device_mesh: DeviceMesh | None = None,
    ) -> Tensor:
        """torch's causal mask (0 on and below the diagonal, -inf above), ``(sz, sz)``,
        Replicate on the mesh (``device_mesh=``, ``device=`` or the default one).

        Example:
            >>> import dtorch
            >>> dtorch.nn.Transformer.generate_square_subsequent_mask(2).tolist()
            [[0.0, -inf], [0.0, 0.0]]
        """
        mesh = resolve_mesh("generate_square_subsequent_mask", device_mesh, device)
        placements: list[Placement] = [Replicate()] * mesh.ndim
        return full((sz, sz), -math.inf, dtype=dtype, device_mesh=mesh, placements=placements).triu(
            1
        )


__all__ = [
    "Transformer",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
]

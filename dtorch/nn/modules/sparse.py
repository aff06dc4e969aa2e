"""Embedding layers: ``Embedding``, ``EmbeddingBag`` and the vocab-parallel
``EmbeddingWithReplicateOutput``.

``Embedding`` has torch.nn.Embedding's constructor (``device=`` and ``dtype=`` among them) plus
``device_mesh=``: a Replicate ``weight`` (num_embeddings, embedding_dim) drawn from torch's
default generator as torch draws it (standard normal, the ``padding_idx`` row zeroed), so the
same seed gives the same weight, and a torch layer's ``state_dict`` loads. Ids sharded on
``dp`` give an output sharded alike. A given weight (``_weight``,
``Embedding.from_pretrained``), torch or dtorch, is placed as the layer places its own, on the
given mesh (a dtorch one's own by default). The mesh is ``device_mesh=``, or ``device=``
(``"cpu"``, ``"cuda:1"``, a ``torch.device``: a one-device mesh), not both; neither is a given
dtorch weight's mesh, else the default graph's default mesh.
``max_norm`` renormalises the rows each forward looks up, in place, as torch's
(``dtorch.nn.functional.embedding``); the weight keeps its placements.

``EmbeddingWithReplicateOutput(..., tp_dim="tp")`` splits the weight's vocab dim over the tp
mesh dim (Shard(0)): the ids are made Replicate there, each device looks up its own rows
(zeros for the others, a Partial output) and the output is all-reduced to Replicate. A mesh
without the tp dim holds a Replicate weight (a plain Embedding): the default mesh, and the
one-device mesh ``device=`` names.

Example:
    >>> import torch, dtorch
    >>> mesh = dtorch.init_device_mesh("cpu", 2, mesh_dim_names=("tp",))
    >>> m = dtorch.nn.EmbeddingWithReplicateOutput(10, 4, device_mesh=mesh)
    >>> m.weight.placements
    [Shard(dim=0)]
    >>> ids = torch.tensor([[1, 9]])
    >>> out = m(dtorch.from_torch(ids, device_mesh=mesh))
    >>> out.placements, torch.equal(out.to_torch(), m.weight.to_torch()[ids])
    ([Replicate()], True)
"""

from __future__ import annotations

from typing import Any, TypeVar

import torch

from dtorch.api.creation import from_torch, randn
from dtorch.api.ops.embedding import check_max_norm, embedding
from dtorch.api.ops.embedding_bag import embedding_bag
from dtorch.api.tensor import Tensor
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.placement import Placement, Replicate, Shard
from dtorch.nn.modules.linear import (
    Device,
    check_features,
    check_float,
    check_tp_dim,
    resolve_mesh,
)
from dtorch.nn.modules.module import Module
from dtorch.nn.parameter import Parameter

_Layer = TypeVar("_Layer", bound="Embedding")


class _Table(Module):
    """The weight of ``Embedding`` and ``EmbeddingBag`` (torch.nn.Embedding's constructor):
    drawn, given, or loaded, placed by the layer; ``max_norm`` and the gradient flags kept."""

    #: The vocab dim's placement on the tp mesh dim (None: Replicate everywhere).
    tp_weight: Placement | None = None
    tp_dim: str | None = None

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
        _weight: Tensor | torch.Tensor | None = None,
        _freeze: bool = False,
        device: Device = None,
        dtype: torch.dtype | None = None,
        *,
        device_mesh: DeviceMesh | None = None,
    ) -> None:
        super().__init__()
        layer = type(self).__name__
        num_embeddings, embedding_dim = check_features(
            layer, num_embeddings=num_embeddings, embedding_dim=embedding_dim
        )
        dtype = check_float(layer, dtype)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = _padding(layer, padding_idx, num_embeddings)
        check_max_norm(layer, max_norm, norm_type)  # at construction, not at the first forward
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if device_mesh is None and device is None and isinstance(_weight, Tensor):
            device_mesh = _weight.device_mesh  # a dtorch weight stays on its mesh
        mesh = resolve_mesh(layer, device_mesh, device)
        self.weight = Parameter(self._initial(mesh, dtype, _weight), requires_grad=not _freeze)

    def _placements(self, mesh: DeviceMesh) -> list[Placement]:
        placements: list[Placement] = [Replicate()] * mesh.ndim
        tp = None if self.tp_dim is None else mesh.dim_name_index(self.tp_dim)
        if tp is not None and self.tp_weight is not None:
            placements[tp] = self.tp_weight
        return placements

    def _initial(
        self, mesh: DeviceMesh, dtype: torch.dtype | None, weight: Tensor | torch.Tensor | None
    ) -> Tensor:
        """The weight: ``_weight`` placed as the layer's if given, else torch's draw with the
        padding row zeroed."""
        placements = self._placements(mesh)
        shape = (self.num_embeddings, self.embedding_dim)
        if weight is not None:
            return _given(type(self).__name__, weight, shape, mesh, placements, dtype)
        drawn = randn(shape, dtype=dtype, device_mesh=mesh, placements=placements)
        self._zero_padding(drawn)
        return drawn

    def _zero_padding(self, weight: Tensor) -> None:
        # torch's _fill_padding_idx_with_zero (a +0.0 row, as fill_ writes)
        if self.padding_idx is not None:
            weight[self.padding_idx] = 0

    def reset_parameters(self) -> None:
        """torch's: the weight drawn again from torch's default generator (standard normal,
        the values ``torch.nn.init.normal_`` draws), the ``padding_idx`` row zeroed.

        Example:
            >>> import torch, dtorch
            >>> m = dtorch.nn.Embedding(4, 2, padding_idx=1)
            >>> _ = torch.manual_seed(0); m.reset_parameters()
            >>> _ = torch.manual_seed(0); ref = torch.nn.Embedding(4, 2, padding_idx=1)
            >>> torch.equal(m.weight.to_torch(), ref.weight.detach())
            True
        """
        weight = self.weight
        drawn = randn(weight.shape, dtype=weight.dtype, graph=weight.graph,
                      device_mesh=weight.device_mesh, placements=weight.placements)  # fmt: skip
        self._zero_padding(drawn)
        weight.copy_(drawn)


class Embedding(_Table):
    """torch.nn.Embedding: ``forward(ids)`` is ``weight[ids]``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.Embedding(5, 3, padding_idx=0)
        Embedding(5, 3, padding_idx=0)
    """

    @classmethod
    def from_pretrained(
        cls: type[_Layer],
        embeddings: Tensor | torch.Tensor,
        freeze: bool = True,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
        **layer: Any,
    ) -> _Layer:
        """torch.nn.Embedding.from_pretrained: a layer whose weight holds ``embeddings`` (a
        2-D torch or dtorch tensor; ``freeze``: ``requires_grad`` False), placed as the layer
        places its weight on its mesh. ``layer`` takes the constructor's keywords
        (``device_mesh=`` or ``device=``, by default a dtorch tensor's own mesh; ``dtype=``;
        ``tp_dim=``).

        Example:
            >>> import torch, dtorch
            >>> m = dtorch.nn.Embedding.from_pretrained(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
            >>> m(torch.tensor([1])).tolist(), m.weight.requires_grad
            ([[3.0, 4.0]], False)
            >>> dtorch.nn.Embedding.from_pretrained(m.weight, device="cpu:1").weight.device_mesh
            DeviceMesh('cpu', [1])
        """
        rows, cols = _pretrained_shape(cls.__name__, embeddings)
        return cls(
            rows, cols, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
            embeddings, freeze, **layer,
        )  # fmt: skip

    def forward(self, input: Tensor) -> Tensor:
        return embedding(
            input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
            self.scale_grad_by_freq, self.sparse,
        )  # fmt: skip

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            text += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            text += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq is not False:
            text += f", scale_grad_by_freq={self.scale_grad_by_freq}"
        if self.sparse is not False:
            text += ", sparse=True"
        return text


_Bag = TypeVar("_Bag", bound="EmbeddingBag")


class EmbeddingBag(_Table):
    """torch.nn.EmbeddingBag: ``forward(ids, offsets=None, per_sample_weights=None)`` sums,
    averages or maximises (``mode``) each bag's rows (``dtorch.nn.functional.embedding_bag``:
    bags of 2-D ids shard alike, and a weight placed on the vocab by the caller gives a
    Partial for sum and mean). The weight is drawn as torch draws it, so one seed gives
    torch's weight, and a torch layer's ``state_dict`` loads.

    Example:
        >>> import torch, dtorch
        >>> bag = dtorch.nn.EmbeddingBag(10, 3, mode="sum")
        >>> bag
        EmbeddingBag(10, 3, mode='sum')
        >>> bag(torch.tensor([1, 2, 4]), torch.tensor([0, 2])).shape
        torch.Size([2, 3])
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        mode: str = "mean",
        sparse: bool = False,
        _weight: Tensor | torch.Tensor | None = None,
        include_last_offset: bool = False,
        padding_idx: int | None = None,
        device: Device = None,
        dtype: torch.dtype | None = None,
        *,
        device_mesh: DeviceMesh | None = None,
    ) -> None:
        super().__init__(
            num_embeddings, embedding_dim, padding_idx, max_norm, norm_type,
            scale_grad_by_freq, sparse, _weight, device=device, dtype=dtype,
            device_mesh=device_mesh,
        )  # fmt: skip
        self.mode, self.include_last_offset = mode, include_last_offset

    @classmethod
    def from_pretrained(
        cls: type[_Bag],
        embeddings: Tensor | torch.Tensor,
        freeze: bool = True,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        mode: str = "mean",
        sparse: bool = False,
        include_last_offset: bool = False,
        padding_idx: int | None = None,
        **layer: Any,
    ) -> _Bag:
        """torch.nn.EmbeddingBag.from_pretrained: a layer whose weight holds ``embeddings``
        (2-D, torch or dtorch; ``freeze``: ``requires_grad`` False); ``layer`` takes the
        constructor's keywords (``device_mesh=`` or ``device=``, ``dtype=``).

        Example:
            >>> import torch, dtorch
            >>> w = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
            >>> dtorch.nn.EmbeddingBag.from_pretrained(w)(torch.tensor([[0, 1]])).tolist()
            [[2.0, 3.0]]
        """
        rows, cols = _pretrained_shape(cls.__name__, embeddings)
        layer_ = cls(
            rows, cols, max_norm, norm_type, scale_grad_by_freq, mode, sparse, embeddings,
            include_last_offset, padding_idx, **layer,
        )  # fmt: skip
        layer_.weight.requires_grad = not freeze
        return layer_

    def forward(self, input: Any, offsets: Any = None, per_sample_weights: Any = None) -> Tensor:
        return embedding_bag(
            input, self.weight, offsets, self.max_norm, self.norm_type,
            self.scale_grad_by_freq, self.mode, self.sparse, per_sample_weights,
            self.include_last_offset, self.padding_idx,
        )  # fmt: skip

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            text += f", max_norm={self.max_norm!r}"
        if self.norm_type != 2:
            text += f", norm_type={self.norm_type!r}"
        if self.scale_grad_by_freq is not False:
            text += f", scale_grad_by_freq={self.scale_grad_by_freq!r}"
        text += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx!r}"
        return text


def _pretrained_shape(layer: str, embeddings: Tensor | torch.Tensor) -> tuple[int, int]:
    # from_pretrained's (num_embeddings, embedding_dim), of a 2-D tensor only
    if embeddings.dim() != 2:
        raise ValueError(
            f"{layer}.from_pretrained: embeddings must be 2-D (num_embeddings, embedding_dim); "
            f"got shape {list(embeddings.shape)}"
        )
    rows, cols = embeddings.shape
    return rows, cols


def _given(
    layer: str,
    weight: Tensor | torch.Tensor,
    shape: tuple[int, ...],
    mesh: DeviceMesh,
    placements: list[Placement],
    dtype: torch.dtype | None,
) -> Tensor:
    """A given weight of the layer's shape on ``mesh`` and ``placements`` (in ``dtype`` when
    one is given); a dtorch tensor already there is shared, as torch shares ``_weight``."""
    if tuple(weight.shape) != shape:
        raise ValueError(
            f"{layer}: _weight has shape {list(weight.shape)}; expected {list(shape)} "
            f"(num_embeddings, embedding_dim)"
        )
    if isinstance(weight, torch.Tensor):
        return from_torch(weight, dtype=dtype, device_mesh=mesh, placements=placements)
    if dtype is not None and weight.dtype != dtype:
        weight = weight.to(dtype)
    return weight.redistribute(mesh, placements)


def _padding(layer: str, padding_idx: int | None, rows: int) -> int | None:
    # torch's check and normalisation of a negative padding_idx
    if padding_idx is None:
        return None
    if not -rows <= padding_idx < rows:
        raise ValueError(f"{layer}: padding_idx must be within num_embeddings, got {padding_idx}")
    return padding_idx % rows


class EmbeddingWithReplicateOutput(Embedding):
    """Vocab-parallel Embedding on the ``tp_dim`` mesh dim (see the module).

    Example:
        >>> import dtorch
        >>> mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
        >>> dtorch.nn.EmbeddingWithReplicateOutput(6, 2, device_mesh=mesh).weight.placements
        [Replicate(), Shard(dim=0)]
        >>> dtorch.nn.EmbeddingWithReplicateOutput(6, 2, device="cpu").weight.placements
        [Replicate()]
    """

    tp_weight: Placement | None = Shard(0)

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
        _weight: Tensor | torch.Tensor | None = None,
        _freeze: bool = False,
        device: Device = None,
        dtype: torch.dtype | None = None,
        *,
        device_mesh: DeviceMesh | None = None,
        tp_dim: str = "tp",
    ) -> None:
        # before Embedding.__init__, which places the weight by it
        self.tp_dim = check_tp_dim(type(self).__name__, tp_dim)
        super().__init__(
            num_embeddings, embedding_dim, padding_idx, max_norm, norm_type,
            scale_grad_by_freq, sparse, _weight, _freeze, device, dtype, device_mesh=device_mesh,
        )  # fmt: skip
        if self.weight.device_mesh.dim_name_index(tp_dim) is not None:
            self.input_placements = {tp_dim: Replicate()}
            self.output_placements = {tp_dim: Replicate()}

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, tp_dim={self.tp_dim!r}"


__all__ = ["Embedding", "EmbeddingBag", "EmbeddingWithReplicateOutput"]

"""Normalisations with torch.nn.functional's signatures: ``layer_norm``, ``rms_norm``,
``group_norm``, ``batch_norm``.

Layer, RMS and group norm are one Normalization operator each: the normalised dims must not be
sharded, the others shard freely (``dtorch.ir.rules.norm``). ``batch_norm`` in eval mode is one
BatchNorm operator, a per-channel affine that keeps batch, channel and spatial shards (the per-
channel vectors are made Replicate where they are Partial, or sharded on a mesh dim that does
not split x's channels). In training mode its statistics are over the FULL batch however x is
sharded: they are the mean and the biased variance over every dim but the channels, computed
with the reduce operators (a shard of a reduced dim gives Partial sums, made Replicate with one
all-reduce), then x is normalised by the BatchNorm operator with them;
``running_mean``/``running_var`` are updated in place as torch does (``(1 - momentum) * running
+ momentum * batch``, the variance unbiased).

Example:
    >>> import torch, dtorch
    >>> import dtorch.nn.functional as F
    >>> x = torch.arange(8.0).view(2, 4)
    >>> out = F.layer_norm(dtorch.tensor(x), [4]).to_torch()
    >>> torch.allclose(out, torch.nn.functional.layer_norm(x, [4]))
    True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from dtorch.api.dims import as_flag, as_int
from dtorch.api.handle import TensorBase
from dtorch.api.ops.scalars import as_real
from dtorch.api.record import not_a_tensor, record_one, tensor_arg, with_inputs
from dtorch.api.redistribute import sum_partials
from dtorch.errors import ParamError, PlacementError, ShapeError
from dtorch.ir.opkind import NormKind
from dtorch.ir.params import BatchNormParam, NormalizationParam
from dtorch.ir.placement import Partial, Placement, Replicate, Shard, format_placements
from dtorch.ir.rules.norm import check_input_dtype, check_param_dtypes
from dtorch.ir.rules.registry import raise_meshes

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def normalized_dims(name: str, normalized_shape: int | Sequence[int]) -> tuple[int, ...]:
    """``normalized_shape`` as a tuple: an int or an iterable of ints (numpy integers and
    arrays too), as torch takes it; a float, a bool or a string is a TypeError (torch's), not
    truncated.

    Example:
        >>> normalized_dims("LayerNorm", 4), normalized_dims("layer_norm", [2, 3])
        ((4,), (2, 3))
    """
    if isinstance(normalized_shape, (bool, str, bytes)):
        raise _not_a_shape(name, normalized_shape)
    if hasattr(normalized_shape, "__index__") and getattr(normalized_shape, "ndim", 0) == 0:
        return (as_int(name, "normalized_shape", normalized_shape),)
    try:  # torch takes any iterable of ints (a list, a numpy array, a generator)
        items = tuple(normalized_shape)  # type: ignore[arg-type]
    except TypeError:
        raise _not_a_shape(name, normalized_shape) from None
    return tuple(as_int(name, "each size of normalized_shape", s) for s in items)


def _not_a_shape(name: str, normalized_shape: object) -> TypeError:
    return TypeError(
        f"{name}: normalized_shape must be an int or a sequence of ints, got "
        f"{normalized_shape!r} ({type(normalized_shape).__name__})"
    )


def _present(*tensors: Tensor | None) -> tuple[Tensor, ...]:
    # the optional vectors that were given; the param's flags say which they are
    return tuple(t for t in tensors if t is not None)


def layer_norm(
    input: Tensor,
    normalized_shape: int | Sequence[int],
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """``torch.nn.functional.layer_norm`` over the trailing ``normalized_shape`` dims.

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([[1.0, 3.0]])
        >>> out = dtorch.nn.functional.layer_norm(x, 2, bias=dtorch.ones(2))
        >>> out.to_torch().round(decimals=3).tolist()
        [[0.0, 2.0]]
    """
    shape = normalized_dims("layer_norm", normalized_shape)
    param = NormalizationParam(
        NormKind.LAYER,
        shape,
        as_real("layer_norm: eps", eps),
        1,
        weight is not None,
        bias is not None,
    )
    return record_one("layer_norm", param, (input, *_present(weight, bias)))


def rms_norm(
    input: Tensor,
    normalized_shape: int | Sequence[int],
    weight: Tensor | None = None,
    eps: float | None = None,
) -> Tensor:
    """``torch.nn.functional.rms_norm``; ``eps=None`` is torch's default (the dtype's eps).

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.rms_norm(dtorch.tensor([[2.0, 2.0]]), [2]).tolist()
        [[1.0, 1.0]]
    """
    eps = None if eps is None else as_real("rms_norm: eps", eps)
    shape = normalized_dims("rms_norm", normalized_shape)
    param = NormalizationParam(NormKind.RMS, shape, eps, 1, weight is not None)
    return record_one("rms_norm", param, (input, *_present(weight)))


def group_norm(
    input: Tensor,
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """``torch.nn.functional.group_norm`` of an (N, C, *) input; the batch dim shards, and
    the channels where every device holds whole groups (the statistics span the spatial dims:
    those must not be sharded).

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([[[1.0], [3.0]]])
        >>> dtorch.nn.functional.group_norm(x, 1).flatten().to_torch().round(decimals=3).tolist()
        [-1.0, 1.0]
    """
    groups = as_int("group_norm", "num_groups", num_groups)  # torch: an int (1.5 is refused)
    param = NormalizationParam(
        NormKind.GROUP,
        (),
        as_real("group_norm: eps", eps),
        groups,
        weight is not None,
        bias is not None,
    )
    tensor_arg("group_norm", input)
    _check_values_per_group(input, groups)
    return record_one("group_norm", param, (input, *_present(weight, bias)))


def _check_values_per_group(input: Tensor, groups: int) -> None:
    """torch's check, on the full shape (a device's shard of a sharded batch may hold one
    value per group where the tensor holds more)."""
    if input.ndim < 2 or groups <= 0:
        return  # the rule refuses these with its own words
    values = input.shape[0] * input.shape[1] // groups * math.prod(input.shape[2:])
    if values == 1:
        raise ParamError(
            "group_norm: Expected more than 1 value per channel when training, got input size "
            f"{list(input.shape)}"
        )


@with_inputs
def batch_norm(
    input: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float | Tensor = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """``torch.nn.functional.batch_norm`` of an (N, C, *) input (see the module: training
    mode uses the full batch's statistics and updates the running ones in place).
    ``momentum`` may also be a 0-d dtorch tensor on the input's mesh, read on the devices
    (``BatchNorm2d(momentum=None)``'s cumulative average: 1 / num_batches_tracked).

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([[1.0], [3.0]])
        >>> mean, var = dtorch.zeros(1), dtorch.ones(1)
        >>> y = dtorch.nn.functional.batch_norm(x, mean, var, training=True, eps=1e-12)
        >>> y.tolist()
        [[-1.0], [1.0]]
        >>> mean.to_torch(), var.to_torch()  # momentum 0.1: batch mean 2, unbiased variance 2
        (tensor([0.2000]), tensor([1.1000]))
    """
    _check_handles(input=input, running_mean=running_mean, running_var=running_var,
                   weight=weight, bias=bias)  # fmt: skip
    eps = as_real("batch_norm: eps", eps)
    training = as_flag(training, "batch_norm", "training")
    if eps < 0:  # torch's check, made here: on the devices it failed only at the fetch
        raise ParamError(f"batch_norm: eps must be non-negative, but got {eps}")
    if training and not eps > 0:  # torch's: a constant channel would divide by zero
        raise ValueError(f"batch_norm: eps must be positive during training, but got {eps}")
    given = {"running_mean": running_mean, "running_var": running_var, "weight": weight,
             "bias": bias}  # fmt: skip
    present = {k: v for k, v in given.items() if v is not None}
    _check_alike(input, present)
    factor = momentum if isinstance(momentum, TensorBase) else as_real("batch_norm: momentum",
                                                                       momentum)  # fmt: skip
    if training:  # checked before the statistics and the running ones are recorded
        check_input_dtype("batch_norm", input.dtype)  # the statistics would refuse it otherwise
        if (running_mean is None) != (running_var is None):
            raise ValueError(
                "batch_norm: running_mean and running_var must either both be None or neither "
                "be None"
            )
        _check_channels(input, **given)
        stats_of = _in_dtype_of(input, list(present.values()))
        mean, var = _batch_statistics(stats_of, running_mean, running_var, factor)
    elif running_mean is None or running_var is None:
        raise ValueError("batch_norm: running_mean and running_var must be given when not training")
    else:
        mean, var = running_mean, running_var
    recorded = factor if isinstance(factor, float) else 0.0  # the operator's param only
    param = BatchNormParam(float(eps), recorded, False, weight is not None, bias is not None)
    vectors = [_aligned(v, input) for v in (mean, var, *_present(weight, bias))]
    return record_one("batch_norm", param, (input, *vectors))


def _check_alike(x: Tensor, vectors: dict[str, Tensor]) -> None:
    """One mesh and dtypes torch takes together: checked before training mode changes the
    running statistics (the rule checks them again; a non-float x is its to refuse)."""
    if any(v.device_mesh != x.device_mesh for v in vectors.values()):
        raise_meshes("batch_norm", (x._operand, *(v._operand for v in vectors.values())))
    if x.dtype.is_floating_point:
        dtypes = {k: v.dtype for k, v in vectors.items()}
        check_param_dtypes("batch_norm", x.dtype, dtypes, together=True)


def _in_dtype_of(x: Tensor, vectors: list[Tensor]) -> Tensor:
    """``x`` in its parameters' dtype: a 16-bit x beside float32 ones (torch's mixed form)
    has its statistics computed in float32, as the kernel then takes them."""
    dtype = vectors[0].dtype if vectors else x.dtype
    return x if x.dtype == dtype else x.to(dtype)


def _check_handles(**tensors: object) -> None:
    # batch_norm reads placements before it records: a torch tensor would fail unclearly there
    for label, t in tensors.items():
        if t is not None and not isinstance(t, TensorBase):
            raise not_a_tensor("batch_norm", label, t)


def _check_channels(x: Tensor, **vectors: Tensor | None) -> None:
    """An (N, C, *) x and per-channel vectors of shape (C,): the eval rule's checks, made
    before training mode's arithmetic would fail less clearly on them."""
    if x.ndim < 2:
        raise ValueError(f"batch_norm: needs an (N, C, *) input; got shape {list(x.shape)}")
    for role, vector in vectors.items():
        if vector is not None and tuple(vector.shape) != (x.shape[1],):
            raise ShapeError(
                f"batch_norm: {role} has shape {list(vector.shape)}; expected [{x.shape[1]}] "
                f"(the channels of x {list(x.shape)})"
            )


def _aligned(vector: Tensor, x: Tensor) -> Tensor:
    """A per-channel vector made Replicate on the mesh dims where it is Partial, or sharded
    while x's channels are not (it is small; the rule would refuse the mix)."""
    if any(isinstance(p, Partial) for p in x.placements):  # refused: name the vectors as given
        return vector
    placements: list[Placement] = [
        p if _keeps(p, px) else Replicate()
        for p, px in zip(vector.placements, x.placements, strict=True)
    ]  # fmt: skip
    return (
        vector
        if placements == list(vector.placements)
        else vector.redistribute(placements=placements)
    )


def _keeps(p: Placement, px: Placement) -> bool:
    return isinstance(p, Replicate) or (
        isinstance(p, Shard) and isinstance(px, Shard) and px.dim == 1
    )


def _batch_statistics(
    x: Tensor, running_mean: Tensor | None, running_var: Tensor | None, momentum: float | Tensor
) -> tuple[Tensor, Tensor]:
    """Mean and biased variance per channel over the full batch; the running ones updated."""
    if any(isinstance(p, Partial) for p in x.placements):
        raise PlacementError(
            f"batch_norm: got {format_placements(x.placements)} for x in training mode; "
            f"accepted: Replicate or any Shard on each mesh dim. Redistribute Partial first"
        )
    count = math.prod(x.shape[:1] + x.shape[2:])
    if count == 0:  # torch's empty batch: an empty result, the running statistics unchanged
        mean = x.new_zeros(x.shape[1]) if running_mean is None else running_mean
        return mean, x.new_ones(x.shape[1]) if running_var is None else running_var
    if count == 1:
        raise ValueError(
            f"batch_norm: expected more than 1 value per channel when training, got input size "
            f"{list(x.shape)}"
        )
    dims = (0, *range(2, x.ndim))
    mean = sum_partials(x.mean(dims, keepdim=True))
    centered = x - mean
    var = sum_partials((centered * centered).mean(dims, keepdim=True))
    mean, var = mean.squeeze(dims), var.squeeze(dims)  # (C,): a channel shard stays one
    updates = []
    if running_mean is not None:
        updates.append((running_mean, _updated(running_mean, mean, momentum, x)))
    if running_var is not None:
        unbiased = var * (count / (count - 1))
        updates.append((running_var, _updated(running_var, unbiased, momentum, x)))
    for running, new in updates:  # both made first: a refused one leaves neither changed
        running.copy_(new)
    return mean, var


def _updated(running: Tensor, batch: Tensor, momentum: float | Tensor, x: Tensor) -> Tensor:
    """``(1 - momentum) * running + momentum * batch``, laid out as ``running`` is (aligned
    with the batch's statistics first, as eval mode aligns them: a Partial one summed)."""
    new = _aligned(running, x) * (1 - momentum) + batch * momentum
    if list(new.placements) != list(running.placements):
        new = new.redistribute(placements=list(running.placements))
    return new

"""Rules of Normalization (layer, RMS and group norm) and BatchNorm (with given statistics).

A normalisation keeps, per mesh dim, a shard of any dim it does not normalise (it is computed
independently there) and rejects a shard of a normalised dim and Partial (it is not linear):

* layer and RMS norm normalise the trailing ``normalized_shape`` dims; the leading dims
  (batch, sequence, ...) shard freely; weight and bias (shaped ``normalized_shape``) must be
  Replicate, or all Partial beside a Replicate x (``x_hat * w + b`` is linear in them: each
  device adds its pieces, and the output is Partial);
* group norm of (N, C, *) normalises each group of channels over its channels and the spatial
  dims: the batch dim shards, and the channel dim too when every device's channels are whole
  groups (weight and bias, shape (C,), then follow the channels as BatchNorm's vectors do);
  a channel split that cuts a group is refused;
* BatchNorm here is the per-channel affine of eval mode, ``(x - mean) / sqrt(var + eps) * w +
  b`` with ``mean``/``var`` given (the running statistics, or the batch statistics that
  ``dtorch.nn.functional.batch_norm`` computes with the reduce operators in training mode):
  every dim of x shards; the per-channel vectors follow a channel shard (a Replicate vector
  is chunked like the channels, and a Shard(0) vector chunks Replicate channels alike).

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.opkind import NormKind
    >>> from dtorch.ir.params import NormalizationParam
    >>> from dtorch.ir.placement import Shard
    >>> x = Operand(1, (4, 6), torch.float32, init_device_mesh("cpu", 2), (Shard(0),))
    >>> param = NormalizationParam(NormKind.LAYER, (6,), 1e-5)
    >>> normalization_rule("layer_norm", param, (x,)).outputs[0].placements
    (Shard(dim=0),)
"""

from __future__ import annotations

import itertools

import torch

from dtorch.errors import DtypeError, ParamError, ShapeError, UnsupportedDtypeError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import NormKind, OpKind
from dtorch.ir.params import BatchNormParam, NormalizationParam, OpParam
from dtorch.ir.placement import Partial, Placement, Replicate, Shard
from dtorch.ir.rules.base import Inference, Rule, all_replicate, replicated
from dtorch.ir.rules.signature import Labels, elementwise, identity, one_output, variadic
from dtorch.ir.sharding import local_shape_and_offset

_NORM_LEGEND = (
    "i: a dim that is not normalised (group norm: or channels holding whole groups); weight "
    "and bias are Replicate (group norm: or split like whole groups of channels), or both "
    "Partial beside a Replicate x (the output is affine in them)"
)
_NORM_HINT = "redistribute the normalised dims, the weight and the bias to Replicate first"
#: (has weight, has bias) -> signature: any R/Si mix, and Partial vectors beside an R x where
#: a weight is Partial (a Partial bias alone would need x_hat added once: refused)
_NORM = {
    (weight, bias): elementwise(1 + weight + bias, partial, legend=_NORM_LEGEND, hint=_NORM_HINT)
    for weight, bias, partial in (
        (False, False, ()), (True, False, ("R P -> P",)), (False, True, ()),
        (True, True, ("R P P -> P",)),
    )
}  # fmt: skip
_AFFINE = variadic(
    "R -> R", "Si -> Si", "R Si -> Si",
    legend="i: any dim of x; a channel shard of x goes with Shard(0) statistics, weight, bias",
    hint="redistribute Partial inputs to Replicate first",
)  # fmt: skip


def normalization_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``layer_norm``, ``rms_norm``, ``group_norm`` of x with optional weight and bias."""
    assert isinstance(param, NormalizationParam)
    x = inputs[0]
    _check_inputs(name, param, inputs)
    whole = param.norm is NormKind.GROUP and _whole_groups(param.num_groups, inputs)
    labels = (
        _x_labels(name, param, x, whole),
        *(_vector_labels(param, x, whole),) * (len(inputs) - 1),
    )
    if all_replicate(inputs):
        return replicated(x.shape, x.dtype, len(x.placements))
    sig = _NORM[param.has_weight, param.has_bias]
    return one_output(name, sig, inputs, labels, identity(x.ndim), x.shape, x.dtype)


def _check_inputs(name: str, param: NormalizationParam, inputs: tuple[Operand, ...]) -> None:
    # x floating (or complex, for rms_norm: torch's kernel takes it); as many inputs as the
    # flags say; weight and bias shaped as torch wants
    x = inputs[0]
    check_input_dtype(name, x.dtype, complex_ok=param.norm is NormKind.RMS)
    count = 1 + param.has_weight + param.has_bias
    if len(inputs) != count:
        raise ParamError(f"{name}: expected {count} inputs (x, weight, bias); got {len(inputs)}")
    want = _vector_shape(name, param, x)
    for role, operand in zip(_roles(param), inputs[1:], strict=True):
        if operand.shape != want:
            raise ShapeError(
                f"{name}: {role} has shape {list(operand.shape)}; expected {list(want)}"
            )
    if param.norm is not NormKind.RMS:
        roles = zip(_roles(param), inputs[1:], strict=True)
        check_param_dtypes(name, x.dtype, {role: o.dtype for role, o in roles})


def check_input_dtype(name: str, dtype: torch.dtype, complex_ok: bool = False) -> None:
    """A normalisation's input must be floating (or complex, where ``complex_ok``: rms_norm):
    torch's kernels have no other version, so an UnsupportedDtypeError (NotImplementedError).

    Example:
        >>> try:
        ...     check_input_dtype("layer_norm", torch.int64)
        ... except NotImplementedError as error:
        ...     print(type(error).__name__, error)
        UnsupportedDtypeError layer_norm: needs a floating-point input; got torch.int64
    """
    if not (dtype.is_floating_point or (dtype.is_complex and complex_ok)):
        accepted = "floating-point or complex" if complex_ok else "floating-point"
        raise UnsupportedDtypeError(f"{name}: needs a {accepted} input; got {dtype}")


def check_param_dtypes(
    name: str, x: torch.dtype, params: dict[str, torch.dtype], together: bool = False
) -> None:
    """torch's dtype check of a norm's parameters (weight, bias, running statistics): x's
    dtype, or float32 beside a 16-bit x (torch's mixed form); rms_norm takes any.
    ``together``: all of one dtype (batch_norm's mixed form is all float32 or none)."""
    if together and len(set(params.values())) > 1:
        listed = ", ".join(f"{role} {dtype}" for role, dtype in params.items())
        raise DtypeError(
            f"{name}: the parameters have dtypes {listed} (input {x}); accepted: one dtype "
            "for all: the input's, or float32 for a bfloat16 or float16 input"
        )
    for role, dtype in params.items():
        if dtype != x and not (dtype == torch.float32 and x in (torch.bfloat16, torch.float16)):
            raise DtypeError(
                f"{name}: {role} is {dtype} and the input {x}; accepted: parameters of the "
                "input's dtype, or float32 ones for a bfloat16 or float16 input"
            )


def _roles(param: NormalizationParam) -> list[str]:
    return ["weight"] * param.has_weight + ["bias"] * param.has_bias


def _vector_shape(name: str, param: NormalizationParam, x: Operand) -> tuple[int, ...]:
    """Shape of weight and bias: ``normalized_shape``, or (C,) for group norm."""
    if param.norm is not NormKind.GROUP:
        return tuple(param.normalized_shape)
    if x.ndim < 2:
        raise ShapeError(f"{name}: needs an (N, C, *) input; got shape {list(x.shape)}")
    groups = param.num_groups
    if groups < 1 or x.shape[1] % groups:
        raise ParamError(
            f"{name}: {x.shape[1]} channels do not divide into num_groups={groups}; accepted: "
            f"a positive divisor of the channel count"
        )
    return (x.shape[1],)


def _whole_groups(groups: int, inputs: tuple[Operand, ...]) -> bool:
    """True when x's channels are split (by x or by a Shard(0) weight or bias it would be
    chunked like) and every device holds whole groups of them."""
    x = inputs[0]
    chunked = [any(_is_shard(o.placements[m], 0) for o in inputs[1:]) for m in range(x.mesh.ndim)]
    split = [
        Shard(1) if c and isinstance(px, Replicate) else px
        for c, px in zip(chunked, x.placements, strict=True)
    ]
    if not any(_is_shard(p, 1) for p in split) or any(isinstance(p, Partial) for p in split):
        return False
    size = x.shape[1] // groups
    for coordinate in itertools.product(*(range(n) for n in x.mesh.shape)):
        local, offset = local_shape_and_offset(x.shape, x.mesh.shape, split, coordinate)
        if local[1] % size or offset[1] % size:
            return False
    return True


def _is_shard(p: Placement, dim: int) -> bool:
    return isinstance(p, Shard) and p.dim == dim


def _x_labels(name: str, param: NormalizationParam, x: Operand, whole: bool = False) -> Labels:
    """x's labels: the dims that are not normalised keep theirs, the others are contracted
    (group norm's channels are kept where every device holds whole groups)."""
    if param.norm is NormKind.GROUP:
        return (0, 1 if whole else -2, *(-1 - d for d in range(2, x.ndim)))
    k = len(param.normalized_shape)
    if not 0 < k <= x.ndim or x.shape[x.ndim - k :] != tuple(param.normalized_shape):
        raise ShapeError(
            f"{name}: normalized_shape {list(param.normalized_shape)} is not a non-empty list of "
            f"x's trailing sizes; x has shape {list(x.shape)}"
        )
    return tuple(d if d < x.ndim - k else -1 - d for d in range(x.ndim))


def _vector_labels(param: NormalizationParam, x: Operand, whole: bool = False) -> Labels:
    if param.norm is NormKind.GROUP:
        return (1 if whole else -2,)
    k = len(param.normalized_shape)
    return tuple(-1 - d for d in range(x.ndim - k, x.ndim))


def batch_norm_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """Eval-form ``batch_norm(x, mean, var, weight?, bias?)`` of an (N, C, *) input."""
    assert isinstance(param, BatchNormParam)
    x = inputs[0]
    if param.training or not param.has_running_stats:
        raise ParamError(
            f"{name}: the BatchNorm operator normalises with given statistics (training=False, "
            f"has_running_stats=True); got training={param.training}, has_running_stats="
            f"{param.has_running_stats}. dtorch.nn.functional.batch_norm computes batch statistics"
        )
    _check_batch_norm(name, param, inputs)
    labels: tuple[Labels, ...] = (identity(x.ndim), *((1,),) * (len(inputs) - 1))
    if all_replicate(inputs):
        return replicated(x.shape, x.dtype, len(x.placements))
    return one_output(name, _AFFINE, inputs, labels, identity(x.ndim), x.shape, x.dtype)


def _check_batch_norm(name: str, param: BatchNormParam, inputs: tuple[Operand, ...]) -> None:
    # (N, C, *) floating x; mean, var, weight?, bias? all of shape (C,)
    x = inputs[0]
    check_input_dtype(name, x.dtype)
    if x.ndim < 2:
        raise ShapeError(f"{name}: needs an (N, C, *) input; got shape {list(x.shape)}")
    roles = ["running_mean", "running_var"] + ["weight"] * param.has_weight
    roles += ["bias"] * param.has_bias
    if len(inputs) != 1 + len(roles):
        raise ParamError(f"{name}: expected inputs x, {', '.join(roles)}; got {len(inputs)}")
    for role, operand in zip(roles, inputs[1:], strict=True):
        if operand.shape != (x.shape[1],):
            raise ShapeError(
                f"{name}: {role} has shape {list(operand.shape)}; expected [{x.shape[1]}] "
                f"(the channels of x {list(x.shape)})"
            )
    params = {r: o.dtype for r, o in zip(roles, inputs[1:], strict=True)}
    check_param_dtypes(name, x.dtype, params, together=True)


RULES: dict[OpKind, Rule] = {
    OpKind.Normalization: normalization_rule,
    OpKind.BatchNorm: batch_norm_rule,
}

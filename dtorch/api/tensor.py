"""dtorch.Tensor: a handle to one (distributed) tensor value of a graph, with its operators.

A Tensor holds metadata only (shape, dtype, mesh, placements); the shards live on the devices.
Metadata never waits; values (``to_torch``, ``item``, ...) wait for the devices. Operators are
methods and Python operators with torch semantics; they record and return at once. When the
last handle of a value is garbage collected, the devices free its shards.

Example:
    >>> import torch, dtorch
    >>> mesh = dtorch.init_device_mesh("cpu", 2)
    >>> t = dtorch.Tensor(torch.arange(6.0).reshape(3, 2), device_mesh=mesh,
    ...                   placements=[dtorch.Shard(0)])
    >>> t.shape, t.placements, t.is_dtensor
    (torch.Size([3, 2]), [Shard(dim=0)], True)
    >>> (t * 2 + 1).to_torch().tolist()
    [[1.0, 3.0], [5.0, 7.0], [9.0, 11.0]]

The handle itself (metadata, values, release) is ``dtorch.api.handle.TensorBase``; this class
adds the operators, where the behaviour lives in ``dtorch.api.ops``: a function of ``ops``
whose signature is the method's is the method itself (``sum = _rd.sum``), operator methods
are made from their kind (``exp = _mk.unary(M.EXP, "exp")``, ``dtorch.api.ops.methods``),
and the rest are a line calling ``ops``. The shape and conversion methods are the mixins
``dtorch.api.tensor_shape.TensorShapes`` and ``dtorch.api.tensor_convert.TensorConversions``,
the in-place arithmetic (``t += x``, ``add_``, ``clamp_``, ...) the mixin
``dtorch.api.tensor_in_place.TensorInPlace``,
the selection, ordering and scatter methods the mixin ``dtorch.api.tensor_index.TensorIndexing``,
more elementwise math (``lgamma``, ``fmod``, ``gcd``, ...) the mixin
``dtorch.api.tensor_math.TensorMath``, the order statistics, running extremes and shifts
(``median``, ``cummax``, ``bitwise_left_shift``, ...) the mixin
``dtorch.api.tensor_order.TensorOrder``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from dtorch.api import redistribute as _redistribute
from dtorch.api import torch_function as _tf
from dtorch.api.create import construct
from dtorch.api.functions import nonzero, nonzero_static
from dtorch.api.handle import TensorBase
from dtorch.api.ops import activations_more as _am
from dtorch.api.ops import basic_index as _bi
from dtorch.api.ops import clamp as _clamp
from dtorch.api.ops import closeness as _close
from dtorch.api.ops import composite as _cm
from dtorch.api.ops import convert as _cv
from dtorch.api.ops import elementwise as _ew
from dtorch.api.ops import fill as _fl
from dtorch.api.ops import linalg as _la
from dtorch.api.ops import masked as _ma
from dtorch.api.ops import methods as _mk
from dtorch.api.ops import reduce as _rd
from dtorch.api.ops import statistics as _st
from dtorch.api.ops.scalars import is_scalar
from dtorch.api.tensor_convert import TensorConversions
from dtorch.api.tensor_grad import TensorGrad
from dtorch.api.tensor_in_place import TensorInPlace
from dtorch.api.tensor_index import TensorIndexing
from dtorch.api.tensor_math import TensorMath
from dtorch.api.tensor_more import TensorMore
from dtorch.api.tensor_order import TensorOrder
from dtorch.api.tensor_shape import TensorShapes
from dtorch.errors import NotIterableError, PlacementError
from dtorch.ir.opkind import ActivationKind
from dtorch.ir.opkind import BinaryKind as B
from dtorch.ir.opkind import MathKind as M
from dtorch.ir.placement import Placement


class Tensor(
    TensorBase,
    TensorShapes,
    TensorConversions,
    TensorIndexing,
    TensorInPlace,
    TensorGrad,
    TensorMath,
    TensorOrder,
    TensorMore,
):
    """A (distributed) tensor of a dtorch graph; see the module docstring.

    ``dtorch.Tensor(torch_tensor, device_mesh=None, placements=None, dtype=None, graph=None,
    device=None)`` distributes a full torch tensor, like ``dtorch.from_torch``.
    """

    __slots__ = ()

    _DTYPE: torch.dtype | None = None  # the typed aliases' dtype (FloatTensor, ...)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """torch-style construction, see ``dtorch.api.create.construct``."""
        made = construct(Tensor, type(self)._DTYPE, args, kwargs)
        self._name = None
        self._share(made)

    @classmethod
    def __torch_function__(
        cls,
        func: Any,
        types: tuple[type, ...],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        """torch's functions take dtorch tensors: ``torch.add(t, 1)`` is ``dtorch.add(t, 1)``
        (``dtorch.api.torch_function``)."""
        return _tf.dispatch(Tensor, func, types, args, kwargs)

    @staticmethod
    def parser_tensor_to_function_arg(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The arguments of ``to`` parsed as ``(target, dtype)``: see
        ``dtorch.api.ops.convert.parse_to_args``.

        Example:
            >>> import torch, dtorch
            >>> dtorch.Tensor.parser_tensor_to_function_arg(("cpu",), {"dtype": torch.int8})
            (device(type='cpu'), torch.int8)
        """
        return _cv.parse_to_args(tuple(args), dict(kwargs))

    def check_placement(
        self, dim: Any, expected: Placement, skip_when_dim_size_equal_one: bool = True
    ) -> None:
        """Raise a PlacementError unless the placement on mesh dim ``dim`` (int or name) is
        ``expected``; a mesh dim of size 1 passes when ``skip_when_dim_size_equal_one``.

        Example:
            >>> import dtorch
            >>> mesh = dtorch.init_device_mesh("cpu", 2, mesh_dim_names=("tp",))
            >>> t = dtorch.zeros(4, device_mesh=mesh, placements=[dtorch.Shard(0)])
            >>> t.check_placement("tp", dtorch.Shard(0))  # passes: returns None
            >>> t.check_placement(0, dtorch.Replicate())
            Traceback (most recent call last):
            dtorch.errors.PlacementError: check_placement: mesh dim 'tp' ...; expected Replicate()
        """
        _redistribute.check_placement(self, dim, expected, skip_when_dim_size_equal_one)

    def __contains__(self, element: Any) -> bool:
        """torch's ``element in t``: some entry equals ``element`` (a number or a tensor)."""
        if not _comparable(element):
            raise RuntimeError(
                "Tensor.__contains__ only supports Tensor or scalar, but you passed in a "
                f"{type(element)}."
            )
        # a count, not any(): a sum takes every layout (sharded dims give Partial)
        return bool((self == element).sum().item())

    def __iter__(self) -> Iterator[Tensor]:
        if not self._operand.shape:
            raise TypeError("iteration over a 0-d tensor")
        try:
            return iter(self.unbind(0))
        except PlacementError as error:  # name what the user wrote: a loop, not unbind
            raise NotIterableError(f"iterating over a tensor's dim 0: {error}") from None

    # --- arithmetic -------------------------------------------------------------------------
    __add__ = _mk.binary(B.ADD, "add")
    __radd__ = _mk.binary(B.ADD, "add", reflected=True)
    __sub__ = _mk.binary(B.SUB, "sub")
    __rsub__ = _mk.binary(B.SUB, "sub", reflected=True)
    __mul__ = _mk.binary(B.MUL, "mul")
    __rmul__ = _mk.binary(B.MUL, "mul", reflected=True)
    __truediv__ = _mk.binary(B.DIV, "div")
    __rtruediv__ = _mk.binary(B.DIV, "div", reflected=True)
    __floordiv__ = _mk.binary(B.FLOOR_DIV, "floor_divide")
    __rfloordiv__ = _mk.binary(B.FLOOR_DIV, "floor_divide", reflected=True)
    __mod__ = _mk.binary(B.REMAINDER, "remainder")
    __rmod__ = _mk.binary(B.REMAINDER, "remainder", reflected=True)
    __pow__ = _mk.binary(B.POW, "pow")
    __rpow__ = _mk.binary(B.POW, "pow", reflected=True)

    def __matmul__(self, o: Tensor) -> Tensor:
        return _la.matmul(self, o)

    def __rmatmul__(self, o: Tensor) -> Tensor:
        return _la.matmul(o, self)

    __neg__ = _mk.unary(M.NEG, "neg")

    def __pos__(self) -> Tensor:
        return self

    __abs__ = _mk.unary(M.ABS, "abs")

    # bitwise on integers, logical on bools, refused on floats: torch's ``& | ^ ~``
    __invert__ = _ew.bitwise_not
    __and__ = _mk.binary(B.BITWISE_AND, "bitwise_and")
    __rand__ = _mk.binary(B.BITWISE_AND, "bitwise_and", reflected=True)
    __or__ = _mk.binary(B.BITWISE_OR, "bitwise_or")
    __ror__ = _mk.binary(B.BITWISE_OR, "bitwise_or", reflected=True)
    __xor__ = _mk.binary(B.BITWISE_XOR, "bitwise_xor")
    __rxor__ = _mk.binary(B.BITWISE_XOR, "bitwise_xor", reflected=True)
    # shifts of integers (floats refused), torch's ``<< >>``
    __lshift__ = _mk.binary(B.LEFT_SHIFT, "bitwise_left_shift")
    __rlshift__ = _mk.binary(B.LEFT_SHIFT, "bitwise_left_shift", reflected=True)
    __rshift__ = _mk.binary(B.RIGHT_SHIFT, "bitwise_right_shift")
    __rrshift__ = _mk.binary(B.RIGHT_SHIFT, "bitwise_right_shift", reflected=True)

    # --- comparisons ------------------------------------------------------------------------
    # Anything torch does not compare elementwise: NotImplemented, so ``t == None`` is False.
    def __eq__(self, o: Any) -> Any:
        return _ew.binary(B.EQ, "eq", self, o) if _comparable(o) else NotImplemented

    def __ne__(self, o: Any) -> Any:
        return _ew.binary(B.NE, "ne", self, o) if _comparable(o) else NotImplemented

    __hash__ = TensorBase.__hash__  # identity, like torch.Tensor (a class with __eq__ needs it)

    __gt__ = _mk.binary(B.GT, "gt")
    __lt__ = _mk.binary(B.LT, "lt")
    __ge__ = _mk.binary(B.GE, "ge")
    __le__ = _mk.binary(B.LE, "le")

    # --- indexing ---------------------------------------------------------------------------
    __getitem__ = _bi.getitem

    def __setitem__(self, index: Any, value: Any) -> None:
        _bi.setitem(self, index, value)

    # --- named binary operators -------------------------------------------------------------
    add = _ew.add
    sub = _ew.sub
    mul = _ew.mul
    div = _ew.div
    pow = _ew.pow
    eq = _ew.eq
    ne = _ew.ne
    greater = _ew.gt
    gt = greater

    less = _ew.lt
    lt = less

    greater_equal = _ew.ge
    ge = greater_equal

    less_equal = _ew.le
    le = less_equal

    logical_and = _ew.logical_and
    logical_or = _ew.logical_or
    bitwise_and = _ew.bitwise_and
    bitwise_or = _ew.bitwise_or
    bitwise_xor = _ew.bitwise_xor
    bitwise_not = _ew.bitwise_not
    logical_not = _mk.unary(M.LOGICAL_NOT, "logical_not")
    maximum = _ew.maximum
    minimum = _ew.minimum
    atan2 = _ew.atan2
    arctan2 = atan2

    hypot = _ew.hypot
    xlogy = _cm.xlogy
    logaddexp = _cm.logaddexp
    lerp = _cm.lerp
    isclose = _close.isclose
    allclose = _close.allclose
    addcmul = _cm.addcmul
    addcdiv = _cm.addcdiv
    addmm = _cm.addmm
    nan_to_num = _cm.nan_to_num
    frac = _cm.frac

    # --- unary math and activations ---------------------------------------------------------
    neg = _mk.unary(M.NEG, "neg")
    reciprocal = _mk.unary(M.RECIPROCAL, "reciprocal")
    exp = _mk.unary(M.EXP, "exp")
    log = _mk.unary(M.LOG, "log")
    log2 = _mk.unary(M.LOG2, "log2")
    log10 = _mk.unary(M.LOG10, "log10")
    sqrt = _mk.unary(M.SQRT, "sqrt")
    rsqrt = _mk.unary(M.RSQRT, "rsqrt")
    square = _mk.unary(M.SQUARE, "square")
    abs = _mk.unary(M.ABS, "abs")
    round = _ew.round
    floor = _mk.unary(M.FLOOR, "floor")
    ceil = _mk.unary(M.CEIL, "ceil")
    sin = _mk.unary(M.SIN, "sin")
    cos = _mk.unary(M.COS, "cos")
    asin = _mk.unary(M.ASIN, "asin")
    isinf = _mk.unary(M.ISINF, "isinf")
    isnan = _mk.unary(M.ISNAN, "isnan")
    isfinite = _mk.unary(M.ISFINITE, "isfinite")
    isposinf = _mk.unary(M.ISPOSINF, "isposinf")
    isneginf = _mk.unary(M.ISNEGINF, "isneginf")
    sign = _mk.unary(M.SIGN, "sign")
    sgn = _mk.unary(M.SGN, "sgn")
    trunc = _mk.unary(M.TRUNC, "trunc")
    fix = trunc

    erf = _mk.unary(M.ERF, "erf")
    erfc = _mk.unary(M.ERFC, "erfc")
    expm1 = _mk.unary(M.EXPM1, "expm1")
    exp2 = _mk.unary(M.EXP2, "exp2")
    log1p = _mk.unary(M.LOG1P, "log1p")
    tan = _mk.unary(M.TAN, "tan")
    acos = _mk.unary(M.ACOS, "acos")
    arccos = acos

    atan = _mk.unary(M.ATAN, "atan")
    arctan = atan

    sinh = _mk.unary(M.SINH, "sinh")
    cosh = _mk.unary(M.COSH, "cosh")
    relu = _ew.relu
    sigmoid = _ew.sigmoid
    tanh = _ew.tanh
    hardshrink = _am.hardshrink

    # --- in place: the operator above, its result written back as ``add_`` writes it --------
    neg_ = _mk.in_place("neg_", neg)
    reciprocal_ = _mk.in_place("reciprocal_", reciprocal)
    exp_ = _mk.in_place("exp_", exp)
    exp2_ = _mk.in_place("exp2_", exp2)
    expm1_ = _mk.in_place("expm1_", expm1)
    log_ = _mk.in_place("log_", log)
    log2_ = _mk.in_place("log2_", log2)
    log10_ = _mk.in_place("log10_", log10)
    log1p_ = _mk.in_place("log1p_", log1p)
    sqrt_ = _mk.in_place("sqrt_", sqrt)
    rsqrt_ = _mk.in_place("rsqrt_", rsqrt)
    square_ = _mk.in_place("square_", square)
    abs_ = _mk.in_place("abs_", abs)
    sign_ = _mk.in_place("sign_", sign)
    sgn_ = _mk.in_place("sgn_", sgn)
    round_ = _mk.in_place("round_", round)
    floor_ = _mk.in_place("floor_", floor)
    ceil_ = _mk.in_place("ceil_", ceil)
    trunc_ = _mk.in_place("trunc_", trunc)
    fix_ = _mk.in_place("fix_", trunc)
    sin_ = _mk.in_place("sin_", sin)
    cos_ = _mk.in_place("cos_", cos)
    tan_ = _mk.in_place("tan_", tan)
    asin_ = _mk.in_place("asin_", asin)
    acos_ = _mk.in_place("acos_", acos)
    arccos_ = _mk.in_place("arccos_", acos)
    atan_ = _mk.in_place("atan_", atan)
    arctan_ = _mk.in_place("arctan_", atan)
    sinh_ = _mk.in_place("sinh_", sinh)
    cosh_ = _mk.in_place("cosh_", cosh)
    erf_ = _mk.in_place("erf_", erf)
    erfc_ = _mk.in_place("erfc_", erfc)
    relu_ = _mk.activation_in_place("relu_", ActivationKind.RELU, relu)
    sigmoid_ = _mk.activation_in_place("sigmoid_", ActivationKind.SIGMOID, sigmoid)
    tanh_ = _mk.activation_in_place("tanh_", ActivationKind.TANH, tanh)
    logical_not_ = _mk.in_place("logical_not_", logical_not)
    bitwise_not_ = _mk.in_place("bitwise_not_", bitwise_not)
    atan2_ = _mk.in_place("atan2_", atan2)
    arctan2_ = _mk.in_place("arctan2_", atan2)
    hypot_ = _mk.in_place("hypot_", hypot)
    xlogy_ = _mk.in_place("xlogy_", xlogy)
    lerp_ = _mk.in_place("lerp_", lerp)
    addcmul_ = _mk.in_place("addcmul_", addcmul)
    addcdiv_ = _mk.in_place("addcdiv_", addcdiv)
    addmm_ = _mk.in_place("addmm_", addmm, elementwise=False)
    nan_to_num_ = _mk.in_place("nan_to_num_", nan_to_num)

    softmax = _rd.softmax
    log_softmax = _rd.log_softmax
    clamp = _clamp.clamp
    clip = clamp

    masked_fill = _ma.masked_fill
    masked_fill_ = _ma.masked_fill_
    masked_scatter = _ma.masked_scatter
    masked_scatter_ = _ma.masked_scatter_

    def where(self, condition: Tensor, other: Any) -> Tensor:
        """torch's ``Tensor.where``: ``self`` where ``condition`` holds, else ``other`` (a
        tensor or a number), as ``dtorch.where(condition, self, other)``; the result keeps the
        shards of its operands as the elementwise operators do.

        Example:
            >>> import dtorch
            >>> dtorch.arange(3.0).where(dtorch.tensor([True, False, True]), -1.0).tolist()
            [0.0, -1.0, 2.0]
        """
        return _ma.where(condition, self, other)

    tril = _fl.tril
    triu = _fl.triu

    # --- linear algebra and reductions ------------------------------------------------------
    matmul = _la.matmul
    mm = _la.mm
    bmm = _la.bmm
    outer = _la.outer
    sum = _rd.sum
    mean = _rd.mean
    prod = _rd.prod
    any = _rd.any
    all = _rd.all
    max = _rd.max
    min = _rd.min
    argmax = _rd.argmax
    argmin = _rd.argmin
    amax = _rd.amax
    amin = _rd.amin
    cumsum = _rd.cumsum
    cumprod = _rd.cumprod
    var = _st.var
    std = _st.std
    logsumexp = _st.logsumexp
    count_nonzero = _st.count_nonzero
    nansum = _st.nansum
    nanmean = _st.nanmean
    nonzero = nonzero
    nonzero_static = nonzero_static

    # --- redistribution ---------------------------------------------------------------------
    redistribute = _redistribute.redistribute
    redistribute_like = _redistribute.redistribute_like
    redistribute_by_dict = _redistribute.redistribute_by_dict


# Operators on any handle (this class, a typed alias, a Parameter) return a plain Tensor, as
# torch's do: the recorder makes results with the input's ``_result`` (see TensorBase).
Tensor._result = Tensor._wrap


# ``==``/``!=`` record an operator only against tensors and numbers (torch's rule).
def _comparable(o: Any) -> bool:
    # what torch compares elementwise: tensors, numbers, numpy arrays and complex numbers
    # (the last two are refused by the operator, saying so, rather than equal to nothing)
    # (a Fraction or a Decimal is not compared: False, as torch's)
    return isinstance(o, (Tensor, torch.Tensor, np.ndarray, complex, np.complexfloating)) or (
        is_scalar(o)
    )


class _TypedTensorType(type):
    """The class of the typed aliases: as with torch's ``torch.FloatTensor``, ``isinstance``
    asks for the dtype, so ``isinstance(dtorch.ones(2), dtorch.FloatTensor)`` holds however the
    tensor was made, and a float64 ``FloatTensor``-built tensor is not one any more."""

    _DTYPE: torch.dtype

    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, Tensor) and obj.dtype == cls._DTYPE


def _typed(name: str, dtype: torch.dtype) -> type[Tensor]:
    """torch's typed constructor ``name``: ``dtorch.LongTensor(2, 3)`` is ``dtorch.Tensor(2, 3,
    dtype=torch.int64)``.

    Example:
        >>> import dtorch, torch
        >>> isinstance(dtorch.ones(2), dtorch.FloatTensor), isinstance(dtorch.ones(2), LongTensor)
        (True, False)
    """
    namespace = {"__slots__": (), "_DTYPE": dtype, "__module__": __name__}
    typed: type[Tensor] = _TypedTensorType(name, (Tensor,), namespace)  # type: ignore[assignment]
    return typed


FloatTensor = _typed("FloatTensor", torch.float32)
DoubleTensor = _typed("DoubleTensor", torch.float64)
HalfTensor = _typed("HalfTensor", torch.float16)
BFloat16Tensor = _typed("BFloat16Tensor", torch.bfloat16)
ByteTensor = _typed("ByteTensor", torch.uint8)
CharTensor = _typed("CharTensor", torch.int8)
ShortTensor = _typed("ShortTensor", torch.int16)
IntTensor = _typed("IntTensor", torch.int32)
LongTensor = _typed("LongTensor", torch.int64)
BoolTensor = _typed("BoolTensor", torch.bool)

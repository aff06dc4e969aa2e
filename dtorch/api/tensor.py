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
adds the operators, each one line calling ``dtorch.api.ops``, where the behaviour lives.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api import redistribute as _redistribute
from dtorch.api.create import construct
from dtorch.api.functions import nonzero
from dtorch.api.handle import TensorBase
from dtorch.api.ops import composite as _cm
from dtorch.api.ops import convert as _cv
from dtorch.api.ops import elementwise as _ew
from dtorch.api.ops import fill as _fl
from dtorch.api.ops import linalg as _la
from dtorch.api.ops import order as _od
from dtorch.api.ops import reduce as _rd
from dtorch.api.ops import shape as _sh
from dtorch.api.ops import statistics as _st
from dtorch.api.ops.scalars import is_scalar
from dtorch.api.ops.take import index_select
from dtorch.errors import ShapeError
from dtorch.ir.opkind import BinaryKind as B
from dtorch.ir.opkind import CreateKind as C
from dtorch.ir.opkind import MathKind as M
from dtorch.ir.placement import Placement

if TYPE_CHECKING:
    from dtorch.ir.mesh import DeviceMesh


class Tensor(TensorBase):
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
        self._graph, self._operand, self._base = made._graph, made._operand, made._owner()
        # the owner keeps the value alive; this handle releases nothing itself.

    @staticmethod
    def parser_tensor_to_function_arg(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The arguments of ``to`` parsed as ``(target, dtype)``: see
        ``dtorch.api.ops.convert.parse_to_args``."""
        return _cv.parse_to_args(tuple(args), dict(kwargs))

    def check_placement(
        self, dim: Any, expected: Placement, skip_when_dim_size_equal_one: bool = True
    ) -> None:
        """Raise a PlacementError unless the placement on mesh dim ``dim`` (int or name) is
        ``expected``; a mesh dim of size 1 passes when ``skip_when_dim_size_equal_one``."""
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
        return iter(self.unbind(0))

    # --- arithmetic -------------------------------------------------------------------------
    def __add__(self, o: Any) -> Tensor:
        return _ew.binary(B.ADD, "add", self, o)

    def __radd__(self, o: Any) -> Tensor:
        return _ew.binary(B.ADD, "add", o, self)

    def __sub__(self, o: Any) -> Tensor:
        return _ew.binary(B.SUB, "sub", self, o)

    def __rsub__(self, o: Any) -> Tensor:
        return _ew.binary(B.SUB, "sub", o, self)

    def __mul__(self, o: Any) -> Tensor:
        return _ew.binary(B.MUL, "mul", self, o)

    def __rmul__(self, o: Any) -> Tensor:
        return _ew.binary(B.MUL, "mul", o, self)

    def __truediv__(self, o: Any) -> Tensor:
        return _ew.binary(B.DIV, "div", self, o)

    def __rtruediv__(self, o: Any) -> Tensor:
        return _ew.binary(B.DIV, "div", o, self)

    def __floordiv__(self, o: Any) -> Tensor:
        return _ew.binary(B.FLOOR_DIV, "floor_divide", self, o)

    def __rfloordiv__(self, o: Any) -> Tensor:
        return _ew.binary(B.FLOOR_DIV, "floor_divide", o, self)

    def __mod__(self, o: Any) -> Tensor:
        return _ew.binary(B.REMAINDER, "remainder", self, o)

    def __rmod__(self, o: Any) -> Tensor:
        return _ew.binary(B.REMAINDER, "remainder", o, self)

    def __pow__(self, o: Any) -> Tensor:
        return _ew.binary(B.POW, "pow", self, o)

    def __rpow__(self, o: Any) -> Tensor:
        return _ew.binary(B.POW, "pow", o, self)

    def __matmul__(self, o: Tensor) -> Tensor:
        return _la.matmul(self, o)

    def __rmatmul__(self, o: Tensor) -> Tensor:
        return _la.matmul(o, self)

    def __neg__(self) -> Tensor:
        return _ew.unary(M.NEG, "neg", self)

    def __pos__(self) -> Tensor:
        return self

    def __abs__(self) -> Tensor:
        return _ew.unary(M.ABS, "abs", self)

    # bitwise on integers, logical on bools, refused on floats: torch's ``& | ^ ~``
    def __invert__(self) -> Tensor:
        return _ew.bitwise_not(self)

    def __and__(self, o: Any) -> Tensor:
        return _ew.binary(B.BITWISE_AND, "bitwise_and", self, o)

    def __rand__(self, o: Any) -> Tensor:
        return _ew.binary(B.BITWISE_AND, "bitwise_and", o, self)

    def __or__(self, o: Any) -> Tensor:
        return _ew.binary(B.BITWISE_OR, "bitwise_or", self, o)

    def __ror__(self, o: Any) -> Tensor:
        return _ew.binary(B.BITWISE_OR, "bitwise_or", o, self)

    def __xor__(self, o: Any) -> Tensor:
        return _ew.binary(B.BITWISE_XOR, "bitwise_xor", self, o)

    def __rxor__(self, o: Any) -> Tensor:
        return _ew.binary(B.BITWISE_XOR, "bitwise_xor", o, self)

    # --- in place: ``t += x`` changes t's values, seen by every alias and view of t ----------
    def __iadd__(self, o: Any) -> Tensor:
        return self.add_(o)

    def __isub__(self, o: Any) -> Tensor:
        return self.sub_(o)

    def __imul__(self, o: Any) -> Tensor:
        return self.mul_(o)

    def __itruediv__(self, o: Any) -> Tensor:
        return self.div_(o)

    def __ifloordiv__(self, o: Any) -> Tensor:
        return self.floor_divide_(o)

    def __imod__(self, o: Any) -> Tensor:
        return self.remainder_(o)

    def __ipow__(self, o: Any) -> Tensor:
        return self.pow_(o)

    def __iand__(self, o: Any) -> Tensor:
        return self.bitwise_and_(o)

    def __ior__(self, o: Any) -> Tensor:
        return self.bitwise_or_(o)

    def __ixor__(self, o: Any) -> Tensor:
        return self.bitwise_xor_(o)

    def add_(self, other: Any, *, alpha: Any = 1) -> Tensor:
        return _cv.assign("add_", self, _ew.add(self, other, alpha=alpha))

    def sub_(self, other: Any, *, alpha: Any = 1) -> Tensor:
        return _cv.assign("sub_", self, _ew.sub(self, other, alpha=alpha))

    def mul_(self, other: Any) -> Tensor:
        return _cv.assign("mul_", self, _ew.mul(self, other))

    def div_(self, other: Any, *, rounding_mode: str | None = None) -> Tensor:
        return _cv.assign("div_", self, _ew.div(self, other, rounding_mode=rounding_mode))

    def floor_divide_(self, other: Any) -> Tensor:
        return _cv.assign("floor_divide_", self, _ew.floor_divide(self, other))

    def remainder_(self, other: Any) -> Tensor:
        return _cv.assign("remainder_", self, _ew.remainder(self, other))

    def pow_(self, exponent: Any) -> Tensor:
        return _cv.assign("pow_", self, _ew.pow(self, exponent))

    def bitwise_and_(self, other: Any) -> Tensor:
        return _cv.assign("bitwise_and_", self, _ew.bitwise_and(self, other))

    def bitwise_or_(self, other: Any) -> Tensor:
        return _cv.assign("bitwise_or_", self, _ew.bitwise_or(self, other))

    def bitwise_xor_(self, other: Any) -> Tensor:
        return _cv.assign("bitwise_xor_", self, _ew.bitwise_xor(self, other))

    def clamp_(self, min: Any = None, max: Any = None) -> Tensor:
        return _cv.assign("clamp_", self, _ew.clamp(self, min, max))

    clip_ = clamp_

    def fill_(self, value: Any) -> Tensor:
        return _fl.fill_(self, value)

    def zero_(self) -> Tensor:
        return _fl.zero_(self)

    # --- comparisons ------------------------------------------------------------------------
    # Anything that is not a tensor or a number: NotImplemented, so ``t == None`` is False.
    def __eq__(self, o: Any) -> Any:
        return _ew.binary(B.EQ, "eq", self, o) if _comparable(o) else NotImplemented

    def __ne__(self, o: Any) -> Any:
        return _ew.binary(B.NE, "ne", self, o) if _comparable(o) else NotImplemented

    __hash__ = TensorBase.__hash__  # identity, like torch.Tensor (a class with __eq__ needs it)

    def __gt__(self, o: Any) -> Tensor:
        return _ew.binary(B.GT, "gt", self, o)

    def __lt__(self, o: Any) -> Tensor:
        return _ew.binary(B.LT, "lt", self, o)

    def __ge__(self, o: Any) -> Tensor:
        return _ew.binary(B.GE, "ge", self, o)

    def __le__(self, o: Any) -> Tensor:
        return _ew.binary(B.LE, "le", self, o)

    # --- indexing ---------------------------------------------------------------------------
    def __getitem__(self, index: Any) -> Tensor:
        return _sh.getitem(self, index)

    def __setitem__(self, index: Any, value: Any) -> None:
        _sh.setitem(self, index, value)

    # --- named binary operators -------------------------------------------------------------
    def add(self, other: Any, *, alpha: Any = 1) -> Tensor:
        return _ew.add(self, other, alpha=alpha)

    def sub(self, other: Any, *, alpha: Any = 1) -> Tensor:
        return _ew.sub(self, other, alpha=alpha)

    def mul(self, other: Any) -> Tensor:
        return _ew.mul(self, other)

    def div(self, other: Any, *, rounding_mode: str | None = None) -> Tensor:
        return _ew.div(self, other, rounding_mode=rounding_mode)

    def pow(self, exponent: Any) -> Tensor:
        return _ew.pow(self, exponent)

    def eq(self, other: Any) -> Tensor:
        return _ew.eq(self, other)

    def ne(self, other: Any) -> Tensor:
        return _ew.ne(self, other)

    def greater(self, other: Any) -> Tensor:
        return _ew.gt(self, other)

    gt = greater

    def less(self, other: Any) -> Tensor:
        return _ew.lt(self, other)

    lt = less

    def greater_equal(self, other: Any) -> Tensor:
        return _ew.ge(self, other)

    ge = greater_equal

    def less_equal(self, other: Any) -> Tensor:
        return _ew.le(self, other)

    le = less_equal

    def logical_and(self, other: Any) -> Tensor:
        return _ew.logical_and(self, other)

    def logical_or(self, other: Any) -> Tensor:
        return _ew.logical_or(self, other)

    def bitwise_and(self, other: Any) -> Tensor:
        return _ew.bitwise_and(self, other)

    def bitwise_or(self, other: Any) -> Tensor:
        return _ew.bitwise_or(self, other)

    def bitwise_xor(self, other: Any) -> Tensor:
        return _ew.bitwise_xor(self, other)

    def bitwise_not(self) -> Tensor:
        return _ew.bitwise_not(self)

    def logical_not(self) -> Tensor:
        return _ew.unary(M.LOGICAL_NOT, "logical_not", self)

    def maximum(self, other: Tensor) -> Tensor:
        return _ew.maximum(self, other)

    def minimum(self, other: Tensor) -> Tensor:
        return _ew.minimum(self, other)

    def atan2(self, other: Any) -> Tensor:
        return _ew.atan2(self, other)

    arctan2 = atan2

    def hypot(self, other: Any) -> Tensor:
        return _ew.hypot(self, other)

    def xlogy(self, other: Any) -> Tensor:
        return _cm.xlogy(self, other)

    def logaddexp(self, other: Any) -> Tensor:
        return _cm.logaddexp(self, other)

    def lerp(self, end: Tensor, weight: Any) -> Tensor:
        return _cm.lerp(self, end, weight)

    def addcmul(self, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
        return _cm.addcmul(self, tensor1, tensor2, value=value)

    def addcdiv(self, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
        return _cm.addcdiv(self, tensor1, tensor2, value=value)

    def addmm(self, mat1: Tensor, mat2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
        return _cm.addmm(self, mat1, mat2, beta=beta, alpha=alpha)

    def nan_to_num(self, nan: Any = 0.0, posinf: Any = None, neginf: Any = None) -> Tensor:
        return _cm.nan_to_num(self, nan, posinf, neginf)

    # --- unary math and activations ---------------------------------------------------------
    def neg(self) -> Tensor:
        return _ew.unary(M.NEG, "neg", self)

    def reciprocal(self) -> Tensor:
        return _ew.unary(M.RECIPROCAL, "reciprocal", self)

    def exp(self) -> Tensor:
        return _ew.unary(M.EXP, "exp", self)

    def log(self) -> Tensor:
        return _ew.unary(M.LOG, "log", self)

    def log2(self) -> Tensor:
        return _ew.unary(M.LOG2, "log2", self)

    def log10(self) -> Tensor:
        return _ew.unary(M.LOG10, "log10", self)

    def sqrt(self) -> Tensor:
        return _ew.unary(M.SQRT, "sqrt", self)

    def rsqrt(self) -> Tensor:
        return _ew.unary(M.RSQRT, "rsqrt", self)

    def square(self) -> Tensor:
        return _ew.unary(M.SQUARE, "square", self)

    def abs(self) -> Tensor:
        return _ew.unary(M.ABS, "abs", self)

    def round(self, *, decimals: int = 0) -> Tensor:
        return _ew.round(self, decimals=decimals)

    def floor(self) -> Tensor:
        return _ew.unary(M.FLOOR, "floor", self)

    def ceil(self) -> Tensor:
        return _ew.unary(M.CEIL, "ceil", self)

    def sin(self) -> Tensor:
        return _ew.unary(M.SIN, "sin", self)

    def cos(self) -> Tensor:
        return _ew.unary(M.COS, "cos", self)

    def asin(self) -> Tensor:
        return _ew.unary(M.ASIN, "asin", self)

    def isinf(self) -> Tensor:
        return _ew.unary(M.ISINF, "isinf", self)

    def isnan(self) -> Tensor:
        return _ew.unary(M.ISNAN, "isnan", self)

    def isfinite(self) -> Tensor:
        return _ew.unary(M.ISFINITE, "isfinite", self)

    def isposinf(self) -> Tensor:
        return _ew.unary(M.ISPOSINF, "isposinf", self)

    def isneginf(self) -> Tensor:
        return _ew.unary(M.ISNEGINF, "isneginf", self)

    def sign(self) -> Tensor:
        return _ew.unary(M.SIGN, "sign", self)

    def sgn(self) -> Tensor:
        return _ew.unary(M.SGN, "sgn", self)

    def trunc(self) -> Tensor:
        return _ew.unary(M.TRUNC, "trunc", self)

    fix = trunc

    def erf(self) -> Tensor:
        return _ew.unary(M.ERF, "erf", self)

    def erfc(self) -> Tensor:
        return _ew.unary(M.ERFC, "erfc", self)

    def expm1(self) -> Tensor:
        return _ew.unary(M.EXPM1, "expm1", self)

    def exp2(self) -> Tensor:
        return _ew.unary(M.EXP2, "exp2", self)

    def log1p(self) -> Tensor:
        return _ew.unary(M.LOG1P, "log1p", self)

    def tan(self) -> Tensor:
        return _ew.unary(M.TAN, "tan", self)

    def acos(self) -> Tensor:
        return _ew.unary(M.ACOS, "acos", self)

    arccos = acos

    def atan(self) -> Tensor:
        return _ew.unary(M.ATAN, "atan", self)

    arctan = atan

    def sinh(self) -> Tensor:
        return _ew.unary(M.SINH, "sinh", self)

    def cosh(self) -> Tensor:
        return _ew.unary(M.COSH, "cosh", self)

    def relu(self) -> Tensor:
        return _ew.relu(self)

    def sigmoid(self) -> Tensor:
        return _ew.sigmoid(self)

    def tanh(self) -> Tensor:
        return _ew.tanh(self)

    # --- in place: the operator above, its result written back as ``add_`` writes it --------
    neg_ = _cm.in_place("neg_", neg)
    reciprocal_ = _cm.in_place("reciprocal_", reciprocal)
    exp_ = _cm.in_place("exp_", exp)
    exp2_ = _cm.in_place("exp2_", exp2)
    expm1_ = _cm.in_place("expm1_", expm1)
    log_ = _cm.in_place("log_", log)
    log2_ = _cm.in_place("log2_", log2)
    log10_ = _cm.in_place("log10_", log10)
    log1p_ = _cm.in_place("log1p_", log1p)
    sqrt_ = _cm.in_place("sqrt_", sqrt)
    rsqrt_ = _cm.in_place("rsqrt_", rsqrt)
    square_ = _cm.in_place("square_", square)
    abs_ = _cm.in_place("abs_", abs)
    sign_ = _cm.in_place("sign_", sign)
    sgn_ = _cm.in_place("sgn_", sgn)
    round_ = _cm.in_place("round_", round)
    floor_ = _cm.in_place("floor_", floor)
    ceil_ = _cm.in_place("ceil_", ceil)
    trunc_ = _cm.in_place("trunc_", trunc)
    fix_ = _cm.in_place("fix_", trunc)
    sin_ = _cm.in_place("sin_", sin)
    cos_ = _cm.in_place("cos_", cos)
    tan_ = _cm.in_place("tan_", tan)
    asin_ = _cm.in_place("asin_", asin)
    acos_ = _cm.in_place("acos_", acos)
    arccos_ = _cm.in_place("arccos_", acos)
    atan_ = _cm.in_place("atan_", atan)
    arctan_ = _cm.in_place("arctan_", atan)
    sinh_ = _cm.in_place("sinh_", sinh)
    cosh_ = _cm.in_place("cosh_", cosh)
    erf_ = _cm.in_place("erf_", erf)
    erfc_ = _cm.in_place("erfc_", erfc)
    relu_ = _cm.in_place("relu_", relu)
    sigmoid_ = _cm.in_place("sigmoid_", sigmoid)
    tanh_ = _cm.in_place("tanh_", tanh)
    logical_not_ = _cm.in_place("logical_not_", logical_not)
    bitwise_not_ = _cm.in_place("bitwise_not_", bitwise_not)
    atan2_ = _cm.in_place("atan2_", atan2)
    arctan2_ = _cm.in_place("arctan2_", atan2)
    hypot_ = _cm.in_place("hypot_", hypot)
    xlogy_ = _cm.in_place("xlogy_", xlogy)
    lerp_ = _cm.in_place("lerp_", lerp)
    addcmul_ = _cm.in_place("addcmul_", addcmul)
    addcdiv_ = _cm.in_place("addcdiv_", addcdiv)
    addmm_ = _cm.in_place("addmm_", addmm)
    nan_to_num_ = _cm.in_place("nan_to_num_", nan_to_num)

    def softmax(self, dim: int | None = None, dtype: torch.dtype | None = None) -> Tensor:
        return _rd.softmax(self, dim, dtype)

    def log_softmax(self, dim: int, dtype: torch.dtype | None = None) -> Tensor:
        return _rd.log_softmax(self, dim, dtype)

    def clamp(self, min: Any = None, max: Any = None) -> Tensor:
        return _ew.clamp(self, min, max)

    clip = clamp

    def masked_fill(self, mask: Tensor, value: Any) -> Tensor:
        return _ew.masked_fill(self, mask, value)

    def masked_fill_(self, mask: Tensor, value: Any) -> Tensor:
        return _ew.masked_fill_(self, mask, value)

    def masked_scatter(self, mask: Tensor, source: Tensor) -> Tensor:
        return _ew.masked_scatter(self, mask, source)

    def masked_scatter_(self, mask: Tensor, source: Tensor) -> Tensor:
        return _ew.masked_scatter_(self, mask, source)

    def where(self, condition: Tensor, other: Any) -> Tensor:
        return _ew.where(condition, self, other)

    def tril(self, diagonal: int = 0) -> Tensor:
        return _fl.tril(self, diagonal)

    def triu(self, diagonal: int = 0) -> Tensor:
        return _fl.triu(self, diagonal)

    # --- linear algebra and reductions ------------------------------------------------------
    def matmul(self, other: Tensor) -> Tensor:
        return _la.matmul(self, other)

    def outer(self, vec2: Tensor) -> Tensor:
        return _la.outer(self, vec2)

    def sum(
        self: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: torch.dtype | None = None
    ) -> Tensor:
        return _rd.sum(self, dim, keepdim, dtype=dtype)

    def mean(
        self: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: torch.dtype | None = None
    ) -> Tensor:
        return _rd.mean(self, dim, keepdim, dtype=dtype)

    def prod(
        self: Tensor,
        dim: int | None = None,
        keepdim: bool = False,
        *,
        dtype: torch.dtype | None = None,
    ) -> Tensor:
        return _rd.prod(self, dim, keepdim, dtype=dtype)

    def any(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        return _rd.any(self, dim, keepdim)

    def all(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        return _rd.all(self, dim, keepdim)

    def max(self, dim: Any = None, keepdim: bool = False, *, other: Any = None) -> Any:
        return _rd.max(self, dim, keepdim, other=other)

    def min(self, dim: Any = None, keepdim: bool = False, *, other: Any = None) -> Any:
        return _rd.min(self, dim, keepdim, other=other)

    def argmax(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        return _rd.argmax(self, dim, keepdim)

    def argmin(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        return _rd.argmin(self, dim, keepdim)

    def amax(self, dim: Any = (), keepdim: bool = False) -> Tensor:
        return _rd.amax(self, dim, keepdim)

    def amin(self, dim: Any = (), keepdim: bool = False) -> Tensor:
        return _rd.amin(self, dim, keepdim)

    def cumsum(self, dim: int, *, dtype: torch.dtype | None = None) -> Tensor:
        return _rd.cumsum(self, dim, dtype=dtype)

    def cumprod(self, dim: int, *, dtype: torch.dtype | None = None) -> Tensor:
        return _rd.cumprod(self, dim, dtype=dtype)

    def var(self, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
            correction: Any = None) -> Tensor:  # fmt: skip
        return _st.var(self, dim, unbiased, keepdim, correction=correction)

    def std(self, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
            correction: Any = None) -> Tensor:  # fmt: skip
        return _st.std(self, dim, unbiased, keepdim, correction=correction)

    def logsumexp(self, dim: Any, keepdim: bool = False) -> Tensor:
        return _st.logsumexp(self, dim, keepdim)

    def norm(self, p: Any = "fro", dim: Any = None, keepdim: bool = False,
             dtype: torch.dtype | None = None) -> Tensor:  # fmt: skip
        return _st.norm(self, p, dim, keepdim, dtype)

    def count_nonzero(self, dim: Any = None) -> Tensor:
        return _st.count_nonzero(self, dim)

    def nansum(self, dim: Any = None, keepdim: bool = False, *,
               dtype: torch.dtype | None = None) -> Tensor:  # fmt: skip
        return _st.nansum(self, dim, keepdim, dtype=dtype)

    def nanmean(self, dim: Any = None, keepdim: bool = False, *,
                dtype: torch.dtype | None = None) -> Tensor:  # fmt: skip
        return _st.nanmean(self, dim, keepdim, dtype=dtype)

    def nonzero(self, *, as_tuple: bool = False) -> Any:
        return nonzero(self, as_tuple=as_tuple)

    def index_select(self, dim: int, index: Any) -> Tensor:
        return index_select(self, dim, index)

    def gather(self, dim: int, index: Any, *, sparse_grad: bool = False) -> Tensor:
        return _od.gather(self, dim, index, sparse_grad=sparse_grad)

    # --- ordering ---------------------------------------------------------------------------
    def sort(self, dim: int = -1, descending: bool = False, stable: bool = False) -> Any:
        return _od.sort(self, dim, descending, stable)

    def argsort(self, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
        return _od.argsort(self, dim, descending, stable)

    def msort(self) -> Tensor:
        return _od.msort(self)

    def topk(self, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> Any:
        return _od.topk(self, k, dim, largest, sorted)

    def flip(self, *order: Any, dims: Any = None) -> Tensor:
        return _od.flip(self, *order, dims=dims)

    def fliplr(self) -> Tensor:
        return _od.fliplr(self)

    def flipud(self) -> Tensor:
        return _od.flipud(self)

    def roll(self, shifts: Any, dims: Any = None) -> Tensor:
        return _sh.roll(self, shifts, dims)

    # --- shapes -----------------------------------------------------------------------------
    def view(self, *shape: Any, placements: Any = None) -> Tensor:
        if placements is not None:
            if shape:
                raise TypeError("view: give sizes or placements=, not both")
            return _redistribute.view_placements(self, placements)
        if _placements(shape):
            return _redistribute.view_placements(self, shape[0])
        return _sh.view(self, *shape)

    def reshape(self, *sizes: Any, shape: Any = None) -> Tensor:
        return _sh.reshape(self, *sizes, shape=shape)

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        return _sh.flatten(self, start_dim, end_dim)

    def squeeze(self, dim: Any = None) -> Tensor:
        return _sh.squeeze(self, dim)

    def unsqueeze(self, dim: int) -> Tensor:
        return _sh.unsqueeze(self, dim)

    def transpose(self, dim0: int, dim1: int) -> Tensor:
        return _sh.transpose(self, dim0, dim1)

    @property
    def T(self) -> Tensor:
        return _sh.permute(self, *reversed(range(self.ndim)))

    @property
    def mT(self) -> Tensor:
        return _sh.matrix_transpose(self, "mT")

    @property
    def mH(self) -> Tensor:
        return _sh.matrix_transpose(self, "mH")

    def permute(self, *order: Any, dims: Any = None) -> Tensor:
        return _sh.permute(self, *order, dims=dims)

    def expand(self, *sizes: Any, size: Any = None) -> Tensor:
        return _sh.expand(self, *(sizes if size is None else (size,)))

    def view_as(self, other: Tensor) -> Tensor:
        return _sh.view(self, other.shape)

    def reshape_as(self, other: Tensor) -> Tensor:
        return _sh.reshape(self, other.shape)

    def t(self) -> Tensor:
        """torch's ``t()``: a 0-D or 1-D tensor as it is, a 2-D one transposed."""
        if self.ndim > 2:
            raise ShapeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
        return _sh.transpose(self, 0, -1) if self.ndim == 2 else self

    def expand_as(self, other: Tensor) -> Tensor:
        return _sh.expand(self, other.shape)

    def contiguous(self) -> Tensor:
        return _sh.contiguous(self)

    def chunk(self, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
        return _sh.chunk(self, chunks, dim)

    def unbind(self, dim: int = 0) -> tuple[Tensor, ...]:
        return _sh.unbind(self, dim)

    def split(self, split_size: Any, dim: int = 0) -> tuple[Tensor, ...]:
        return _sh.split(self, split_size, dim)

    def narrow(self, dim: int, start: Any, length: int) -> Tensor:
        return _sh.narrow(self, dim, start, length)

    def repeat(self, *repeats: Any, **kwargs: Any) -> Tensor:
        if "repeats" in kwargs:
            repeats = (kwargs.pop("repeats"),)
        if kwargs:
            raise TypeError(f"repeat: unexpected keyword(s) {sorted(kwargs)}; accepted: repeats")
        return _sh.repeat(self, *repeats)

    def repeat_interleave(
        self, repeats: Any = None, dim: int | None = None, *, output_size: int | None = None
    ) -> Tensor:
        return _sh.repeat_interleave(self, repeats, dim, output_size=output_size)

    def tile(self, *dims: Any) -> Tensor:
        return _sh.tile(self, *dims)

    def movedim(self, source: Any, destination: Any) -> Tensor:
        return _sh.movedim(self, source, destination)

    def moveaxis(self, source: Any, destination: Any) -> Tensor:
        return _sh.movedim(self, source, destination)

    def unflatten(self, dim: int, sizes: Any) -> Tensor:
        return _sh.unflatten(self, dim, sizes)

    # --- new tensors on this one's mesh, every mesh dim Replicate, in its dtype by default ---
    def new_zeros(self, *size: Any, dtype: torch.dtype | None = None) -> Tensor:
        return _fl.new(self, C.ZEROS, size, dtype)

    def new_ones(self, *size: Any, dtype: torch.dtype | None = None) -> Tensor:
        return _fl.new(self, C.ONES, size, dtype)

    def new_empty(self, *size: Any, dtype: torch.dtype | None = None) -> Tensor:
        return _fl.new(self, C.EMPTY, size, dtype)

    def new_full(self, size: Any, fill_value: Any, *, dtype: torch.dtype | None = None) -> Tensor:
        return _fl.new_full(self, size, fill_value, dtype)

    def new_tensor(self, data: Any, *, dtype: torch.dtype | None = None) -> Tensor:
        return _fl.new_tensor(self, data, dtype)

    # --- copies and conversions -------------------------------------------------------------
    def clone(self) -> Tensor:
        return _cv.clone(self)

    def copy_(self, src: Tensor) -> Tensor:
        return _cv.copy_(self, src)

    def detach(self) -> Tensor:
        return _cv.detach(self)

    def to(self, *args: Any, **kwargs: Any) -> Tensor:
        return _cv.to(self, *args, **kwargs)

    def type_as(self, other: Tensor) -> Tensor:
        return _cv.type_as(self, other)

    def type(self, dtype: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
        return _cv.to_type(self, dtype, non_blocking, **kwargs)

    def cpu(self) -> Tensor:
        return _cv.to(self, "cpu")

    def cuda(self, device: int | None = None) -> Tensor:
        return _cv.to(self, "cuda" if device is None else f"cuda:{device}")

    # --- redistribution ---------------------------------------------------------------------
    def redistribute(
        self, device_mesh: DeviceMesh | None = None, placements: list[Placement] | None = None
    ) -> Tensor:
        return _redistribute.redistribute(self, device_mesh, placements)

    def redistribute_like(self, other: Tensor) -> Tensor:
        return _redistribute.redistribute_like(self, other)

    def redistribute_by_dict(
        self,
        device_mesh: DeviceMesh | None = None,
        placements_dict: dict[Any, Placement] | None = None,
        *,
        default_placement_mode: str = "raise_error",
        convert_shard_size_one_to_replicate: bool = True,
    ) -> Tensor:
        return _redistribute.redistribute_by_dict(
            self,
            device_mesh,
            placements_dict,
            default_placement_mode=default_placement_mode,
            convert_shard_size_one_to_replicate=convert_shard_size_one_to_replicate,
        )

    # --- dtype casts (last: their names shadow builtins in the class body) ------------
    def half(self) -> Tensor:
        return _cv.cast(self, torch.float16)

    def bfloat16(self) -> Tensor:
        return _cv.cast(self, torch.bfloat16)

    def float(self) -> Tensor:
        return _cv.cast(self, torch.float32)

    def double(self) -> Tensor:
        return _cv.cast(self, torch.float64)

    def bool(self) -> Tensor:
        return _cv.cast(self, torch.bool)

    def byte(self) -> Tensor:
        return _cv.cast(self, torch.uint8)

    def char(self) -> Tensor:
        return _cv.cast(self, torch.int8)

    def short(self) -> Tensor:
        return _cv.cast(self, torch.int16)

    def int(self) -> Tensor:
        return _cv.cast(self, torch.int32)

    def long(self) -> Tensor:
        return _cv.cast(self, torch.int64)


# Operators on any handle (this class, a typed alias, a Parameter) return a plain Tensor, as
# torch's do: the recorder makes results with the input's ``_result`` (see TensorBase).
Tensor._result = Tensor._wrap


# ``==``/``!=`` record an operator only against tensors and numbers (torch's rule).
def _comparable(o: Any) -> bool:
    return isinstance(o, (Tensor, torch.Tensor)) or is_scalar(o)


# ``view([Shard(0), ...])``: a list of placements, not sizes.
def _placements(shape: tuple[Any, ...]) -> bool:
    first = shape[0] if len(shape) == 1 else None
    return (
        isinstance(first, (list, tuple))
        and bool(first)
        and any(isinstance(p, Placement) for p in first)
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

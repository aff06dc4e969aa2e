"""Tensor methods made from an operator's description, so that ``dtorch.api.tensor`` states
each in one line (``exp = unary(MathKind.EXP, "exp")``, ``exp_ = in_place("exp_", exp)``);
the functions they make carry the name torch gives the method.

Example:
    >>> import dtorch
    >>> from dtorch.ir.opkind import BinaryKind, MathKind
    >>> exp, rsub = unary(MathKind.EXP, "exp"), binary(BinaryKind.SUB, "sub", reflected=True)
    >>> exp.__name__, rsub(dtorch.tensor([1.0]), 3).tolist()
    ('exp', [2.0])
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import torch

from dtorch.api.handle import TensorBase
from dtorch.api.ops.convert import activated, assign, cast_in, fits, writer
from dtorch.api.ops.elementwise import binary as _binary
from dtorch.api.ops.elementwise import unary as _unary
from dtorch.api.record import named_as
from dtorch.errors import DtypeError
from dtorch.ir.opkind import ActivationKind, BinaryKind, MathKind
from dtorch.ir.params import ActivationParam

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

_F = Callable[..., Any]
_P = ParamSpec("_P")
_T = TypeVar("_T", bound=TensorBase)


def _named(method: _F, name: str) -> None:
    method.__name__ = method.__qualname__ = name


#: What each ``unary`` method computes, for its docstring: name -> (the first line, an example
#: input, torch's result of it: ``torch.<name>(torch.tensor(input)).tolist()``).
_UNARY_DOCS: dict[str, tuple[str, str, str]] = {
    "abs": ("The absolute value", "[-1.5, 0.0, 2.0]", "[1.5, 0.0, 2.0]"),
    "neg": ("The negation, ``-x``", "[1.0, -2.0]", "[-1.0, 2.0]"),
    "reciprocal": ("``1 / x``", "[2.0, -0.5]", "[0.5, -2.0]"),
    "exp": ("``e ** x``", "[0.0, 1.0]", "[1.0, 2.7182817459106445]"),
    "exp2": ("``2 ** x``", "[-1.0, 3.0]", "[0.5, 8.0]"),
    "expm1": (
        "``exp(x) - 1``, exact for small ``x``",
        "[0.0, 1e-08]",
        "[0.0, 9.99999993922529e-09]",
    ),
    "log": ("The natural logarithm", "[1.0, 0.0]", "[0.0, -inf]"),
    "log2": ("The base-2 logarithm", "[0.5, 8.0]", "[-1.0, 3.0]"),
    "log10": ("The base-10 logarithm", "[0.1, 1000.0]", "[-1.0, 3.0]"),
    "log1p": (
        "``log(1 + x)``, exact for small ``x``",
        "[0.0, 1e-08]",
        "[0.0, 9.99999993922529e-09]",
    ),
    "sqrt": ("The square root", "[4.0, 2.25]", "[2.0, 1.5]"),
    "rsqrt": ("``1 / sqrt(x)``", "[4.0, 0.25]", "[0.5, 2.0]"),
    "square": ("``x * x`` (integers stay integers)", "[-3, 2]", "[9, 4]"),
    "floor": ("Rounded down", "[-1.5, 2.5]", "[-2.0, 2.0]"),
    "ceil": ("Rounded up", "[-1.5, 2.5]", "[-1.0, 3.0]"),
    "trunc": ("Rounded towards zero (also ``fix``)", "[-1.5, 2.5]", "[-1.0, 2.0]"),
    "sin": ("The sine (radians)", "[0.0, 0.5]", "[0.0, 0.4794255495071411]"),
    "cos": ("The cosine (radians)", "[0.0, 0.5]", "[1.0, 0.8775825500488281]"),
    "tan": ("The tangent (radians)", "[0.0, 0.5]", "[0.0, 0.5463024973869324]"),
    "asin": ("The arcsine", "[0.0, 1.0]", "[0.0, 1.5707963705062866]"),
    "acos": ("The arccosine (also ``arccos``)", "[1.0, 0.0]", "[0.0, 1.5707963705062866]"),
    "atan": ("The arctangent (also ``arctan``)", "[0.0, 1.0]", "[0.0, 0.7853981852531433]"),
    "sinh": ("The hyperbolic sine", "[0.0, 1.0]", "[0.0, 1.175201177597046]"),
    "cosh": ("The hyperbolic cosine", "[0.0, 1.0]", "[1.0, 1.5430805683135986]"),
    "erf": ("The error function", "[0.0, 1.0]", "[0.0, 0.8427007794380188]"),
    "erfc": ("``1 - erf(x)``", "[0.0, 1.0]", "[1.0, 0.15729920566082]"),
    "isinf": ("True where infinite", '[1.0, float("inf"), float("-inf")]', "[False, True, True]"),
    "isnan": ("True where NaN", '[1.0, float("nan")]', "[False, True]"),
    "isfinite": (
        "True where neither infinite nor NaN",
        '[1.0, float("inf"), float("nan")]',
        "[True, False, False]",
    ),
    "isposinf": (
        "True where ``+inf``",
        '[1.0, float("inf"), float("-inf")]',
        "[False, True, False]",
    ),
    "isneginf": (
        "True where ``-inf``",
        '[1.0, float("inf"), float("-inf")]',
        "[False, False, True]",
    ),
    "sign": ("The sign: -1, 0 or 1", "[-2.5, 0.0, 3.0]", "[-1.0, 0.0, 1.0]"),
    "sgn": ("The sign; of a complex number ``x / abs(x)``", "[-2.5, 0.0, 3.0]", "[-1.0, 0.0, 1.0]"),
    "logical_not": ("True where zero (a bool tensor)", "[0, 1, 2]", "[True, False, False]"),
    "lgamma": (
        "The log of the gamma function's absolute value",
        "[0.5, 3.0]",
        "[0.5723649263381958, 0.6931471824645996]",
    ),
    "digamma": (
        "The derivative of ``lgamma`` (``-inf`` at 0)",
        "[1.0, 0.5]",
        "[-0.5772159099578857, -1.9635108709335327]",
    ),
    "erfinv": ("The inverse error function", "[0.0, 0.5]", "[0.0, 0.4769362807273865]"),
    "i0": (
        "The modified Bessel function of order 0",
        "[1.0, 2.0]",
        "[1.2660659551620483, 2.279585123062134]",
    ),
    "sinc": ("``sin(pi x) / (pi x)``, 1 at 0", "[0.0, 0.5]", "[1.0, 0.6366197466850281]"),
    "deg2rad": (
        "Degrees to radians, ``x * pi / 180``",
        "[180.0, -90.0]",
        "[3.1415927410125732, -1.5707963705062866]",
    ),
    "rad2deg": (
        "Radians to degrees, ``x * 180 / pi``",
        "[3.141592653589793, 1.0]",
        "[180.0, 57.295780181884766]",
    ),
    "signbit": (
        "True where the sign bit is set (``-0.0`` too)",
        "[-1.0, 0.0, -0.0]",
        "[True, False, True]",
    ),
    "asinh": ("The inverse hyperbolic sine", "[0.0, 1.0]", "[0.0, 0.8813735842704773]"),
    "acosh": ("The inverse hyperbolic cosine", "[1.0, 2.0]", "[0.0, 1.316957950592041]"),
    "atanh": ("The inverse hyperbolic tangent", "[0.0, 0.5]", "[0.0, 0.5493061542510986]"),
    "negative": ("The negation, ``-x`` (``neg``)", "[1.0, -2.0]", "[-1.0, 2.0]"),
    # torch.special's (dtorch.special)
    "entr": (
        "``-x * log(x)`` (0 at 0, -inf below)",
        "[0.0, 0.5, -1.0]",
        "[0.0, 0.3465735912322998, -inf]",
    ),
    "ndtr": (
        "The standard normal distribution function",
        "[0.0, 1.0]",
        "[0.5, 0.8413447141647339]",
    ),
    "ndtri": ("The inverse of ``ndtr``", "[0.5, 0.975]", "[0.0, 1.959964394569397]"),
    "log_ndtr": (
        "``log(ndtr(x))``, accurate far in the lower tail",
        "[0.0, -30.0]",
        "[-0.6931471824645996, -454.3212585449219]",
    ),
    "i0e": (
        "The exponentially scaled modified Bessel function of order 0",
        "[0.0, 1.0]",
        "[0.9999999403953552, 0.46575963497161865]",
    ),
    "i1": (
        "The modified Bessel function of the first kind, order 1",
        "[0.0, 1.0]",
        "[0.0, 0.5651590824127197]",
    ),
    "i1e": ("``i1`` exponentially scaled", "[0.0, 1.0]", "[0.0, 0.207910418510437]"),
    "erfcx": (
        "The scaled complementary error function ``exp(x**2) * erfc(x)``",
        "[0.0, 1.0]",
        "[1.0, 0.42758357524871826]",
    ),
    "bessel_j0": (
        "The Bessel function of the first kind, order 0",
        "[0.0, 2.5]",
        "[1.0, -0.04838377982378006]",
    ),
    "bessel_j1": (
        "The Bessel function of the first kind, order 1",
        "[0.0, 2.5]",
        "[0.0, 0.4970940947532654]",
    ),
    "bessel_y0": (
        "The Bessel function of the second kind, order 0",
        "[1.0, 2.5]",
        "[0.08825694769620895, 0.4980703890323639]",
    ),
    "bessel_y1": (
        "The Bessel function of the second kind, order 1",
        "[1.0, 2.5]",
        "[-0.7812128067016602, 0.1459181010723114]",
    ),
    "modified_bessel_i0": (
        "The modified Bessel function of the first kind, order 0",
        "[0.0, 1.0]",
        "[0.9999999403953552, 1.2660659551620483]",
    ),
    "modified_bessel_i1": (
        "The modified Bessel function of the first kind, order 1",
        "[0.0, 1.0]",
        "[0.0, 0.5651590824127197]",
    ),
    "modified_bessel_k0": (
        "The modified Bessel function of the second kind, order 0",
        "[0.5, 1.0]",
        "[0.9244191646575928, 0.42102447152137756]",
    ),
    "modified_bessel_k1": (
        "The modified Bessel function of the second kind, order 1",
        "[0.5, 1.0]",
        "[1.6564409732818604, 0.6019073128700256]",
    ),
    "scaled_modified_bessel_k0": (
        "``modified_bessel_k0`` scaled by ``exp(x)``",
        "[0.5, 1.0]",
        "[1.5241094827651978, 1.1444631814956665]",
    ),
    "scaled_modified_bessel_k1": (
        "``modified_bessel_k1`` scaled by ``exp(x)``",
        "[0.5, 1.0]",
        "[2.7310094833374023, 1.6361536979675293]",
    ),
    "spherical_bessel_j0": (
        "The spherical Bessel function of the first kind, order 0",
        "[0.0, 1.0]",
        "[1.0, 0.8414709568023682]",
    ),
    "airy_ai": ("The Airy function Ai", "[0.0, 1.0]", "[0.35502806305885315, 0.13529238104820251]"),
}

#: The linear ``unary`` kinds, which keep a Partial: why each is linear.
_LINEAR = {
    MathKind.NEG: "``-x``",
    MathKind.DEG2RAD: "a scaling",
    MathKind.RAD2DEG: "a scaling",
    MathKind.CONJ: "the conjugate",
    MathKind.REAL: "the real part",
    MathKind.IMAG: "the imaginary part",
}

#: The ``unary`` methods with an example, collected by doctest from here (their functions are
#: attributes of ``Tensor``, in ``dtorch.api.tensor``, where doctest does not look for them).
__test__: dict[str, Callable[..., Any]] = {}


def _unary_doc(kind: MathKind, name: str, namespace: str = "") -> str:
    """The docstring of the ``unary`` method ``name`` (of torch's ``namespace``, such as
    ``special``): a summary, the placements, an example."""
    if name not in _UNARY_DOCS:
        return f"The method ``{name}``: one ``{kind.name}`` operator on the tensor."
    summary, example, result = _UNARY_DOCS[name]
    where = f"{namespace}.{name}" if namespace else name
    partial = (
        f"a Partial input stays Partial ({_LINEAR[kind]} is linear)"
        if kind in _LINEAR
        else "a Partial input is refused (redistribute it first)"
    )
    placements = f"The result keeps the input's shards; {partial}."
    return (
        f"{summary}, elementwise, as ``torch.{where}``.\n{placements}\n\n"
        "Example:\n"
        "    >>> import dtorch\n"
        f"    >>> dtorch.{where}(dtorch.tensor({example})).tolist()\n"
        f"    {result}\n"
    )


def unary(kind: MathKind, name: str, namespace: str = "") -> Callable[[Tensor], Tensor]:
    """The method ``name``: one ``kind`` operator on the tensor, its docstring from
    ``_UNARY_DOCS``; ``namespace``: torch's namespace of the function (``special``), where
    the docstring's example calls it."""

    def method(input: Tensor) -> Tensor:  # torch's name: dtorch.exp(input=t) as torch.exp
        return _unary(kind, name, input)

    _named(method, name)
    method.__doc__ = _unary_doc(kind, name, namespace)
    if name in _UNARY_DOCS:
        __test__[f"{namespace}.{name}" if namespace else name] = method
    return method


def binary(
    kind: BinaryKind, name: str, *, reflected: bool = False
) -> Callable[[Tensor, Any], Tensor]:
    """The operator method of ``kind`` (``__add__``); ``reflected``: the tensor is the right
    operand (``__radd__``: ``2 + t``)."""

    def method(self: Tensor, other: Any) -> Tensor:
        return _binary(kind, name, self, other)

    def reflected_method(self: Tensor, other: Any) -> Tensor:
        return _binary(kind, name, other, self)

    made = reflected_method if reflected else method
    _named(made, f"r{name}" if reflected else name)  # the operator's name: "add", "radd"
    return made


#: Each cast method's example: name -> (an input, torch's result of it:
#: ``torch.tensor(input).<name>().tolist()``).
_CAST_DOCS: dict[str, tuple[str, str]] = {
    "half": ("[1 / 3]", "[0.333251953125]"),
    "bfloat16": ("[1 / 3]", "[0.333984375]"),
    "float": ("[1, 2]", "[1.0, 2.0]"),
    "double": ("[0.1]", "[0.10000000149011612]"),
    "bool": ("[0, 2]", "[False, True]"),
    "byte": ("[300, -1]", "[44, 255]"),
    "char": ("[200, -1]", "[-56, -1]"),
    "short": ("[70000, -1]", "[4464, -1]"),
    "int": ("[1.5, -2.7]", "[1, -2]"),
    "long": ("[True, False]", "[1, 0]"),
}


def _cast_doc(dtype: torch.dtype, name: str) -> str:
    """The docstring of the cast method ``name``: a summary, the placements, an example."""
    doc = (
        f"The tensor as ``{dtype}``, as ``torch.Tensor.{name}``: ``to({dtype})``,\n"
        "the tensor itself when it already has that dtype. Every shard is cast where it is, so\n"
        "the placements are kept; a Partial only to a floating dtype or from one integer dtype\n"
        "to another, never to or from bool (else a PlacementError: redistribute first).\n"
    )
    if name not in _CAST_DOCS:
        return doc
    example, result = _CAST_DOCS[name]
    return (
        f"{doc}\nExample:\n"
        "    >>> import dtorch\n"
        f"    >>> dtorch.tensor({example}).{name}().tolist()\n"
        f"    {result}\n"
    )


def cast(dtype: torch.dtype, name: str) -> Callable[[Tensor], Tensor]:
    """The cast method ``name`` (``float``, ``long``, ...): the tensor in ``dtype``, its
    docstring from ``_CAST_DOCS``."""

    def method(self: Tensor, *, memory_format: Any = torch.preserve_format) -> Tensor:
        return cast_in(name, self, dtype, memory_format)

    _named(method, name)
    method.__doc__ = _cast_doc(dtype, name)
    if name in _CAST_DOCS:
        __test__[name] = method
    return method


#: The in-place examples that ``_UNARY_DOCS`` does not give: the operator's name -> (an
#: input, the arguments, torch's ``t = torch.tensor(input); t.<name>_(arguments); t.tolist()``).
_IN_PLACE_DOCS: dict[str, tuple[str, str, str]] = {
    "logical_not": ("[0, 1, 2]", "", "[1, 0, 0]"),  # the bools cast back to int64
    "bitwise_not": ("[0, 5]", "", "[-1, -6]"),
    "round": ("[0.5, 1.5, -2.7]", "", "[0.0, 2.0, -3.0]"),
    "relu": ("[-1.0, 2.0]", "", "[0.0, 2.0]"),
    "sigmoid": ("[0.0, 2.0]", "", "[0.5, 0.8807970285415649]"),
    "tanh": ("[0.0, 1.0]", "", "[0.0, 0.7615941762924194]"),
    "atan2": ("[1.0, -1.0]", "dtorch.ones(2)", "[0.7853981852531433, -0.7853981852531433]"),
    "hypot": ("[3.0, 5.0]", "dtorch.tensor([4.0, 12.0])", "[5.0, 13.0]"),
    "xlogy": ("[0.0, 2.0]", "dtorch.tensor([0.0, 4.0])", "[0.0, 2.7725887298583984]"),
    "lerp": ("[0.0, 10.0]", "dtorch.tensor([10.0, 20.0]), 0.5", "[5.0, 15.0]"),
    "addcmul": ("[1.0, 2.0]", "dtorch.ones(2), dtorch.tensor([4.0, 5.0])", "[5.0, 7.0]"),
    "addcdiv": ("[1.0, 2.0]", "dtorch.ones(2), dtorch.tensor([4.0, 0.5])", "[1.25, 4.0]"),
    "addmm": ("[[1.0, 0.0]]", "dtorch.ones(1, 3), dtorch.ones(3, 2)", "[[4.0, 3.0]]"),
    "nan_to_num": ('[float("nan"), float("inf"), 1.0]', "posinf=9.0", "[0.0, 9.0, 1.0]"),
    "frac": ("[1.5, -2.25]", "", "[0.5, -0.25]"),
    "logit": ("[0.0, 0.5]", "eps=0.25", "[-1.0986123085021973, 0.0]"),
    "fmod": ("[-7.0, 7.0]", "3", "[-1.0, 1.0]"),
    "copysign": ("[1.0, -2.0]", "-1.0", "[-1.0, -2.0]"),
    "heaviside": ("[-1.0, 0.0, 2.0]", "dtorch.tensor(0.5)", "[0.0, 0.5, 1.0]"),
    "true_divide": ("[7.0, -7.0]", "2", "[3.5, -3.5]"),
    "gcd": ("[12, 18]", "8", "[4, 2]"),
    "lcm": ("[4, 6]", "10", "[20, 30]"),
    "logical_xor": ("[0, 1, 2]", "dtorch.tensor([1, 1, 0])", "[1, 0, 1]"),
    "nextafter": ("[0.0, 1.0]", "dtorch.tensor([1.0, 1.0])", "[1.401298464324817e-45, 1.0]"),
    "ldexp": ("[1.0, 3.0]", "dtorch.tensor([2, -1])", "[4.0, 1.5]"),
    "clamp_min": ("[-2.0, 3.0]", "0", "[0.0, 3.0]"),
    "clamp_max": ("[-2.0, 3.0]", "dtorch.tensor([0.0, 5.0])", "[-2.0, 3.0]"),
}


def _in_place_doc(name: str, base: str) -> str:
    """The docstring of the in-place method ``name`` of the operator ``base``: what it writes
    and an in-place example (from ``_IN_PLACE_DOCS``, else ``_UNARY_DOCS``)."""
    doc = (
        f"``{base}`` in place, as ``torch.Tensor.{name}``: the result, with the\n"
        "operator's placement rules, is written back into the tensor in its own placements;\n"
        "every alias and view sees it, and a result dtype that does not cast back is refused.\n"
        "Returns the tensor.\n"
    )
    if base in _IN_PLACE_DOCS:
        example, args, result = _IN_PLACE_DOCS[base]
    elif base in _UNARY_DOCS:
        _, example, result = _UNARY_DOCS[base]
        args = ""
    else:
        return doc
    return (
        f"{doc}\nExample:\n"
        "    >>> import dtorch\n"
        f"    >>> t = dtorch.tensor({example})\n"
        f"    >>> t.{name}({args}) is t, t.tolist()\n"
        f"    (True, {result})\n"
    )


#: The in-place forms torch refuses for a complex tensor (whose operator makes a real result
#: from it), with torch's words.
_COMPLEX_REFUSED: dict[str, str] = {"abs_": "In-place abs is not supported for complex tensors."}


def in_place(
    name: str, method: Callable[Concatenate[_T, _P], Any], elementwise: bool = True
) -> Callable[Concatenate[_T, _P], _T]:
    """torch's in-place ``name`` of an operator ``method``: its result written back into the
    tensor with ``assign``, as ``add_`` does (every alias and view sees it; a result dtype
    that does not cast back, ``exp_`` of an integer tensor, is refused); returns the tensor.
    ``elementwise``: its tensor operands must broadcast to the tensor's shape (checked first,
    a ShapeError as torch's; ``addmm_``'s matrices need not).

    Example:
        >>> import dtorch
        >>> t = dtorch.tensor([1.0, 4.0])
        >>> sqrt_ = in_place("sqrt_", dtorch.Tensor.sqrt)
        >>> sqrt_(t) is t, t.tolist()
        (True, [1.0, 2.0])
    """

    @functools.wraps(method)
    @writer
    def run(self: _T, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        if elementwise:  # each tensor operand broadcasts to the tensor (addmm_'s do not)
            fits(name, self, *args)  # type: ignore[arg-type]
        if name in _COMPLEX_REFUSED and self.dtype.is_complex:  # a real result would cast back
            raise DtypeError(f"{name}: {_COMPLEX_REFUSED[name]}")
        with named_as(name, method.__name__):  # named as the user called it
            result = method(self, *args, **kwargs)
        assign(name, self, result)  # type: ignore[arg-type]
        return self

    run.__name__, run.__qualname__ = name, f"Tensor.{name}"
    run.__doc__ = _in_place_doc(name, method.__name__)  # not the copy from ``wraps``
    if method.__name__ in _IN_PLACE_DOCS or method.__name__ in _UNARY_DOCS:
        __test__[name] = run
    return run


def activation_in_place(
    name: str, kind: ActivationKind, method: Callable[Concatenate[_T, _P], Any]
) -> Callable[[_T], _T]:
    """torch's in-place ``name`` of the activation ``method`` (of ``kind``): one operator whose
    devices write the tensor's shards (``convert.activated``), not ``in_place``'s operator and
    write-back copy; torch's refusals, named ``name``; returns the tensor.

    Example:
        >>> import dtorch
        >>> from dtorch.ir.opkind import ActivationKind
        >>> t = dtorch.tensor([-1.0, 4.0])
        >>> relu_ = activation_in_place("relu_", ActivationKind.RELU, dtorch.Tensor.relu)
        >>> relu_(t) is t, t.tolist()
        (True, [0.0, 4.0])
    """
    param = ActivationParam(kind)

    @functools.wraps(method)
    def run(self: _T, /) -> _T:
        return activated(name, param, self, True, 1)  # type: ignore[arg-type, return-value]

    run.__name__, run.__qualname__ = name, f"Tensor.{name}"
    run.__doc__ = _in_place_doc(name, method.__name__)
    if method.__name__ in _IN_PLACE_DOCS or method.__name__ in _UNARY_DOCS:
        __test__[name] = run
    return run

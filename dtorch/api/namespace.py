"""The ``dtorch`` namespace as one table: every public name -> where it lives.

``NAMESPACE`` is the only list of ``dtorch``'s public names. ``dtorch/__init__.py`` holds the
import block ``render()`` makes from it, between its ``<namespace>`` markers, with a literal
``__all__``: written out rather than built at import time, so that mypy, IDEs and readers see
every name statically (a module filled in a loop is opaque to them). The surface test checks
the block is what the table renders; ``python dtorch/api/namespace.py`` rewrites it (this
module imports nothing of dtorch, so it runs even while the block is stale).

A new public alias is one line here, e.g. ``"conv2d": "dtorch.nn.functional",``, then
``python dtorch/api/namespace.py``.

Example:
    >>> NAMESPACE["zeros"], NAMESPACE["abs"], NAMESPACE["clip"]
    ('dtorch.api.creation', 'dtorch.api.tensor:Tensor.abs', 'dtorch.api.ops.elementwise:clamp')
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

#: name -> ``module`` (the module's attribute of that name) or ``module:path``, where ``path``
#: starts with another public name of that module (a method used as a function, ``Tensor.abs``;
#: another name, ``clamp`` for ``clip``). ``dtorch`` itself stands for its submodules.
NAMESPACE: dict[str, str] = {
    "compiled_op": "dtorch",
    "cuda": "dtorch",
    "distributed_spec": "dtorch",
    "global_option": "dtorch",
    "graph": "dtorch",
    "memory_stats": "dtorch",
    "linalg": "dtorch",
    "nn": "dtorch",
    "tensor": "dtorch",
    "type": "dtorch",
    "arange": "dtorch.api.creation",
    "eye": "dtorch.api.creation",
    "linspace": "dtorch.api.creation",
    "empty": "dtorch.api.creation",
    "empty_like": "dtorch.api.creation",
    "from_numpy": "dtorch.api.creation",
    "from_torch": "dtorch.api.creation",
    "full": "dtorch.api.creation",
    "full_like": "dtorch.api.creation",
    "ones": "dtorch.api.creation",
    "ones_like": "dtorch.api.creation",
    "rand": "dtorch.api.creation",
    "rand_like": "dtorch.api.creation",
    "randint": "dtorch.api.creation",
    "randn": "dtorch.api.creation",
    "randn_like": "dtorch.api.creation",
    "zeros": "dtorch.api.creation",
    "zeros_like": "dtorch.api.creation",
    "concat": "dtorch.api.functions",
    "equal": "dtorch.api.functions",
    "nonzero": "dtorch.api.functions",
    "is_tensor": "dtorch.api.functions",
    "manual_seed": "dtorch.api.functions",
    "TensorFuture": "dtorch.api.future",
    "VoidFutureCollect": "dtorch.api.future",
    "default_graph": "dtorch.api.graph",
    "Graph": "dtorch.api.graph",
    "GraphOption": "dtorch.api.graph",
    "Profile": "dtorch.api.profile",
    "profile": "dtorch.api.profile",
    "add": "dtorch.api.ops.elementwise",
    "bitwise_and": "dtorch.api.ops.elementwise",
    "bitwise_not": "dtorch.api.ops.elementwise",
    "bitwise_or": "dtorch.api.ops.elementwise",
    "bitwise_xor": "dtorch.api.ops.elementwise",
    "bitwise_left_shift": "dtorch.api.ops.elementwise",
    "bitwise_right_shift": "dtorch.api.ops.elementwise",
    "clamp": "dtorch.api.ops.elementwise",
    "clip": "dtorch.api.ops.elementwise:clamp",
    "div": "dtorch.api.ops.elementwise",
    "eq": "dtorch.api.ops.elementwise",
    "ge": "dtorch.api.ops.elementwise",
    "greater": "dtorch.api.ops.elementwise:gt",
    "greater_equal": "dtorch.api.ops.elementwise:ge",
    "gt": "dtorch.api.ops.elementwise",
    "le": "dtorch.api.ops.elementwise",
    "less": "dtorch.api.ops.elementwise:lt",
    "less_equal": "dtorch.api.ops.elementwise:le",
    "logical_and": "dtorch.api.ops.elementwise",
    "logical_or": "dtorch.api.ops.elementwise",
    "lt": "dtorch.api.ops.elementwise",
    "masked_fill": "dtorch.api.ops.masked",
    "masked_scatter": "dtorch.api.ops.masked",
    "maximum": "dtorch.api.ops.elementwise",
    "minimum": "dtorch.api.ops.elementwise",
    "mul": "dtorch.api.ops.elementwise",
    "ne": "dtorch.api.ops.elementwise",
    "pow": "dtorch.api.ops.elementwise",
    "relu": "dtorch.api.ops.elementwise",
    "sigmoid": "dtorch.api.ops.elementwise",
    "sub": "dtorch.api.ops.elementwise",
    "remainder": "dtorch.api.ops.elementwise",
    "tanh": "dtorch.api.ops.elementwise",
    "where": "dtorch.api.ops.masked",
    "arctan2": "dtorch.api.ops.elementwise:atan2",
    "atan2": "dtorch.api.ops.elementwise",
    "hypot": "dtorch.api.ops.elementwise",
    "addcdiv": "dtorch.api.ops.composite",
    "addcmul": "dtorch.api.ops.composite",
    "addmm": "dtorch.api.ops.composite",
    "lerp": "dtorch.api.ops.composite",
    "logaddexp": "dtorch.api.ops.composite",
    "nan_to_num": "dtorch.api.ops.composite",
    "xlogy": "dtorch.api.ops.composite",
    "clamp_max": "dtorch.api.ops.math_more",
    "clamp_min": "dtorch.api.ops.math_more",
    "copysign": "dtorch.api.ops.math_more",
    "float_power": "dtorch.api.ops.math_more",
    "fmod": "dtorch.api.ops.math_more",
    "gcd": "dtorch.api.ops.math_more",
    "heaviside": "dtorch.api.ops.math_more",
    "lcm": "dtorch.api.ops.math_more",
    "ldexp": "dtorch.api.ops.math_more",
    "logical_xor": "dtorch.api.ops.math_more",
    "logit": "dtorch.api.ops.math_more",
    "nextafter": "dtorch.api.ops.math_more",
    "positive": "dtorch.api.ops.math_more",
    "true_divide": "dtorch.api.ops.math_more",
    "allclose": "dtorch.api.ops.closeness",
    "isclose": "dtorch.api.ops.closeness",
    "celu": "dtorch.api.ops.activations_more",
    "hardshrink": "dtorch.api.ops.activations_more",
    "selu": "dtorch.api.ops.activations_more",
    "threshold": "dtorch.api.ops.activations_more",
    "SdpaOption": "dtorch.api.ops.attention",
    "conv2d": "dtorch.api.ops.conv",
    "max_pool2d": "dtorch.api.ops.spatial",
    "adaptive_avg_pool1d": "dtorch.api.ops.spatial_1d",
    "avg_pool1d": "dtorch.api.ops.spatial_1d",
    "conv1d": "dtorch.api.ops.spatial_1d",
    "max_pool1d": "dtorch.api.ops.spatial_1d",
    "conv_transpose1d": "dtorch.api.ops.conv_transpose",
    "conv_transpose2d": "dtorch.api.ops.conv_transpose",
    "pixel_shuffle": "dtorch.api.ops.nn_more",
    "pixel_unshuffle": "dtorch.api.ops.nn_more",
    "prelu": "dtorch.api.ops.nn_more",
    "pairwise_distance": "dtorch.api.ops.nn_more_losses",
    "cosine_similarity": "dtorch.api.ops.vector_norms",
    "rms_norm": "dtorch.api.ops.norm",
    "batch_norm": "dtorch.api.torch_forms",
    "dropout": "dtorch.api.torch_forms",
    "embedding": "dtorch.api.torch_forms",
    "group_norm": "dtorch.api.torch_forms",
    "layer_norm": "dtorch.api.torch_forms",
    "einsum": "dtorch.api.ops.linalg",
    "addbmm": "dtorch.api.ops.linalg_more",
    "addmv": "dtorch.api.ops.linalg_more",
    "baddbmm": "dtorch.api.ops.linalg_more",
    "dot": "dtorch.api.ops.linalg_more",
    "inner": "dtorch.api.ops.linalg_more",
    "kron": "dtorch.api.ops.linalg_more",
    "mv": "dtorch.api.ops.linalg_more",
    "tensordot": "dtorch.api.ops.linalg_more",
    "vdot": "dtorch.api.ops.linalg_more",
    "aminmax": "dtorch.api.ops.index_more",
    "diag": "dtorch.api.ops.index_more",
    "diag_embed": "dtorch.api.ops.index_more",
    "diagonal": "dtorch.api.ops.index_more",
    "det": "dtorch.linalg.aliases",
    "inverse": "dtorch.linalg.aliases",
    "logdet": "dtorch.linalg.aliases",
    "slogdet": "dtorch.linalg.aliases",
    "index_copy": "dtorch.api.ops.index_more",
    "index_fill": "dtorch.api.ops.index_more",
    "take": "dtorch.api.ops.index_more",
    "bincount": "dtorch.api.ops.search",
    "bucketize": "dtorch.api.ops.search",
    "histc": "dtorch.api.ops.search",
    "isin": "dtorch.api.ops.search",
    "searchsorted": "dtorch.api.ops.search",
    "unique": "dtorch.api.ops.search",
    "unique_consecutive": "dtorch.api.ops.search",
    "atleast_1d": "dtorch.api.ops.grid",
    "atleast_2d": "dtorch.api.ops.grid",
    "atleast_3d": "dtorch.api.ops.grid",
    "block_diag": "dtorch.api.ops.grid",
    "broadcast_tensors": "dtorch.api.ops.grid",
    "cartesian_prod": "dtorch.api.ops.grid",
    "cdist": "dtorch.api.ops.grid_more",
    "corrcoef": "dtorch.api.ops.grid_more",
    "cov": "dtorch.api.ops.grid_more",
    "cross": "dtorch.api.ops.grid_more",
    "diagonal_scatter": "dtorch.api.ops.grid_more",
    "dsplit": "dtorch.api.ops.grid",
    "hsplit": "dtorch.api.ops.grid",
    "meshgrid": "dtorch.api.ops.grid",
    "ravel": "dtorch.api.ops.grid",
    "rot90": "dtorch.api.ops.grid",
    "select_scatter": "dtorch.api.ops.grid_more",
    "slice_scatter": "dtorch.api.ops.grid_more",
    "tril_indices": "dtorch.api.ops.grid",
    "triu_indices": "dtorch.api.ops.grid",
    "vsplit": "dtorch.api.ops.grid",
    "masked_select": "dtorch.api.ops.index_more",
    "index_put": "dtorch.api.ops.index",
    "index_put_": "dtorch.api.ops.index",
    "matmul": "dtorch.api.ops.linalg",
    "outer": "dtorch.api.ops.linalg",
    "all": "dtorch.api.ops.reduce",
    "amax": "dtorch.api.ops.reduce",
    "amin": "dtorch.api.ops.reduce",
    "any": "dtorch.api.ops.reduce",
    "argmax": "dtorch.api.ops.reduce",
    "argmin": "dtorch.api.ops.reduce",
    "max": "dtorch.api.ops.reduce",
    "mean": "dtorch.api.ops.reduce",
    "cumprod": "dtorch.api.ops.reduce",
    "cumsum": "dtorch.api.ops.reduce",
    "min": "dtorch.api.ops.reduce",
    "softmax": "dtorch.api.ops.reduce",
    "sum": "dtorch.api.ops.reduce",
    "count_nonzero": "dtorch.api.ops.statistics",
    "logsumexp": "dtorch.api.ops.statistics",
    "nanmean": "dtorch.api.ops.statistics",
    "nansum": "dtorch.api.ops.statistics",
    "norm": "dtorch.api.ops.statistics",
    "std": "dtorch.api.ops.statistics",
    "std_mean": "dtorch.api.ops.statistics",
    "var": "dtorch.api.ops.statistics",
    "var_mean": "dtorch.api.ops.statistics",
    "argsort": "dtorch.api.ops.order",
    "flip": "dtorch.api.ops.order",
    "fliplr": "dtorch.api.ops.order",
    "flipud": "dtorch.api.ops.order",
    "gather": "dtorch.api.ops.order",
    "msort": "dtorch.api.ops.order",
    "sort": "dtorch.api.ops.order",
    "topk": "dtorch.api.ops.order",
    "cummax": "dtorch.api.ops.order_more",
    "cummin": "dtorch.api.ops.order_more",
    "kthvalue": "dtorch.api.ops.order_more",
    "logcumsumexp": "dtorch.api.ops.order_more",
    "median": "dtorch.api.ops.order_more",
    "mode": "dtorch.api.ops.order_more",
    "nanmedian": "dtorch.api.ops.order_more",
    "index_add": "dtorch.api.ops.scatter",
    "scatter": "dtorch.api.ops.scatter",
    "scatter_add": "dtorch.api.ops.scatter",
    "scatter_reduce": "dtorch.api.ops.scatter",
    "cat": "dtorch.api.ops.shape",
    "chunk": "dtorch.api.ops.shape",
    "flatten": "dtorch.api.ops.shape",
    "permute": "dtorch.api.ops.shape",
    "repeat_interleave": "dtorch.api.ops.shape",
    "reshape": "dtorch.api.ops.shape",
    "squeeze": "dtorch.api.ops.shape",
    "stack": "dtorch.api.ops.shape",
    "transpose": "dtorch.api.ops.shape",
    "unbind": "dtorch.api.ops.shape",
    "unsqueeze": "dtorch.api.ops.shape",
    "movedim": "dtorch.api.ops.shape",
    "roll": "dtorch.api.ops.shape",
    "tile": "dtorch.api.ops.shape",
    "unflatten": "dtorch.api.ops.shape",
    "moveaxis": "dtorch.api.ops.shape:movedim",
    "index_select": "dtorch.api.ops.take",
    "tensors_redistribute_by_dict": "dtorch.api.redistribute",
    "abs": "dtorch.api.tensor:Tensor.abs",
    "asin": "dtorch.api.tensor:Tensor.asin",
    "broadcast_to": "dtorch.api.tensor:Tensor.broadcast_to",
    "BFloat16Tensor": "dtorch.api.tensor",
    "BoolTensor": "dtorch.api.tensor",
    "ByteTensor": "dtorch.api.tensor",
    "CharTensor": "dtorch.api.tensor",
    "clone": "dtorch.api.tensor:Tensor.clone",
    "cos": "dtorch.api.tensor:Tensor.cos",
    "DoubleTensor": "dtorch.api.tensor",
    "exp": "dtorch.api.tensor:Tensor.exp",
    "FloatTensor": "dtorch.api.tensor",
    "floor": "dtorch.api.tensor:Tensor.floor",
    "HalfTensor": "dtorch.api.tensor",
    "IntTensor": "dtorch.api.tensor",
    "isinf": "dtorch.api.tensor:Tensor.isinf",
    "isnan": "dtorch.api.tensor:Tensor.isnan",
    "log": "dtorch.api.tensor:Tensor.log",
    "log10": "dtorch.api.tensor:Tensor.log10",
    "log2": "dtorch.api.tensor:Tensor.log2",
    "LongTensor": "dtorch.api.tensor",
    "neg": "dtorch.api.tensor:Tensor.neg",
    "reciprocal": "dtorch.api.tensor:Tensor.reciprocal",
    "round": "dtorch.api.tensor:Tensor.round",
    "rsqrt": "dtorch.api.tensor:Tensor.rsqrt",
    "ShortTensor": "dtorch.api.tensor",
    "sin": "dtorch.api.tensor:Tensor.sin",
    "sqrt": "dtorch.api.tensor:Tensor.sqrt",
    "square": "dtorch.api.tensor:Tensor.square",
    "acos": "dtorch.api.tensor:Tensor.acos",
    "arccos": "dtorch.api.tensor:Tensor.acos",
    "arctan": "dtorch.api.tensor:Tensor.atan",
    "atan": "dtorch.api.tensor:Tensor.atan",
    "ceil": "dtorch.api.tensor:Tensor.ceil",
    "cosh": "dtorch.api.tensor:Tensor.cosh",
    "erf": "dtorch.api.tensor:Tensor.erf",
    "erfc": "dtorch.api.tensor:Tensor.erfc",
    "exp2": "dtorch.api.tensor:Tensor.exp2",
    "expm1": "dtorch.api.tensor:Tensor.expm1",
    "fix": "dtorch.api.tensor:Tensor.trunc",
    "isfinite": "dtorch.api.tensor:Tensor.isfinite",
    "isneginf": "dtorch.api.tensor:Tensor.isneginf",
    "isposinf": "dtorch.api.tensor:Tensor.isposinf",
    "log1p": "dtorch.api.tensor:Tensor.log1p",
    "sgn": "dtorch.api.tensor:Tensor.sgn",
    "sign": "dtorch.api.tensor:Tensor.sign",
    "sinh": "dtorch.api.tensor:Tensor.sinh",
    "tan": "dtorch.api.tensor:Tensor.tan",
    "trunc": "dtorch.api.tensor:Tensor.trunc",
    "acosh": "dtorch.api.tensor:Tensor.acosh",
    "arccosh": "dtorch.api.tensor:Tensor.acosh",
    "arcsinh": "dtorch.api.tensor:Tensor.asinh",
    "arctanh": "dtorch.api.tensor:Tensor.atanh",
    "asinh": "dtorch.api.tensor:Tensor.asinh",
    "atanh": "dtorch.api.tensor:Tensor.atanh",
    "deg2rad": "dtorch.api.tensor:Tensor.deg2rad",
    "digamma": "dtorch.api.tensor:Tensor.digamma",
    "erfinv": "dtorch.api.tensor:Tensor.erfinv",
    "i0": "dtorch.api.tensor:Tensor.i0",
    "lgamma": "dtorch.api.tensor:Tensor.lgamma",
    "negative": "dtorch.api.tensor:Tensor.negative",
    "rad2deg": "dtorch.api.tensor:Tensor.rad2deg",
    "signbit": "dtorch.api.tensor:Tensor.signbit",
    "sinc": "dtorch.api.tensor:Tensor.sinc",
    "prod": "dtorch.api.ops.reduce",
    "log_softmax": "dtorch.api.ops.reduce",
    "logical_not": "dtorch.api.tensor:Tensor.logical_not",
    "narrow": "dtorch.api.tensor:Tensor.narrow",
    "frac": "dtorch.api.ops.composite",
    "mm": "dtorch.api.ops.linalg",
    "bmm": "dtorch.api.ops.linalg",
    "select": "dtorch.api.ops.slices",
    "tensor_split": "dtorch.api.ops.slices",
    "diff": "dtorch.api.ops.slices",
    "take_along_dim": "dtorch.api.ops.order",
    "swapaxes": "dtorch.api.ops.shape:transpose",
    "swapdims": "dtorch.api.ops.shape:transpose",
    "split": "dtorch.api.ops.basic_index",
    "tril": "dtorch.api.tensor:Tensor.tril",
    "triu": "dtorch.api.tensor:Tensor.triu",
    "t": "dtorch.api.tensor:Tensor.t",
    "numel": "dtorch.api.tensor:Tensor.numel",
    "is_floating_point": "dtorch.api.tensor:Tensor.is_floating_point",
    "detach": "dtorch.api.tensor:Tensor.detach",
    "Tensor": "dtorch.api.tensor",
    "visualize_sharding": "dtorch.api.visualize",
    "get_default_device_mesh": "dtorch.distributed_spec",
    "DeserializationError": "dtorch.errors",
    "DTorchError": "dtorch.errors",
    "TraceError": "dtorch.errors",
    "CommError": "dtorch.errors",
    "CommTimeoutError": "dtorch.errors",
    "DtypeError": "dtorch.errors",
    "FutureTimeoutError": "dtorch.errors",
    "GraphError": "dtorch.errors",
    "KernelError": "dtorch.errors",
    "MeshError": "dtorch.errors",
    "OptionError": "dtorch.errors",
    "ParamError": "dtorch.errors",
    "PlacementError": "dtorch.errors",
    "ShapeError": "dtorch.errors",
    "UnsupportedDtypeError": "dtorch.errors",
    "UnsupportedShapeError": "dtorch.errors",
    "WorkerDiedError": "dtorch.errors",
    "WorkerError": "dtorch.errors",
    "Program": "dtorch.program.program",
    "trace": "dtorch.program.program",
    "load_program": "dtorch.program.files",
    "DeviceMesh": "dtorch.ir.mesh",
    "init_device_mesh": "dtorch.ir.mesh",
    "Partial": "dtorch.ir.placement",
    "Placement": "dtorch.ir.placement",
    "Replicate": "dtorch.ir.placement",
    "Shard": "dtorch.ir.placement",
    "MemoryStat": "dtorch.memory_stats",
    "Parameter": "dtorch.nn.parameter",
    "MemoryStats": "dtorch.memory_stats",
    "GlobalOption": "dtorch.options",
    "assert_structural_equal": "dtorch.serialization",
    "deserialize": "dtorch.serialization",
    "deserialize_from_file": "dtorch.serialization",
    "serialize": "dtorch.serialization",
    "serialize_to_file": "dtorch.serialization",
    "bfloat16": "torch",
    "bool": "torch",
    "device": "torch",
    "double": "torch",
    "dtype": "torch",
    "finfo": "torch",
    "float": "torch",
    "float16": "torch",
    "float32": "torch",
    "float64": "torch",
    "Generator": "torch",
    "half": "torch",
    "iinfo": "torch",
    "int": "torch",
    "int16": "torch",
    "int32": "torch",
    "int64": "torch",
    "int8": "torch",
    "long": "torch",
    "short": "torch",
    "Size": "torch",
    "uint8": "torch",
    # dtorch records no gradients, and draws from torch's default generator: torch's own
    "enable_grad": "torch",
    "inference_mode": "torch",
    "is_grad_enabled": "torch",
    "no_grad": "torch",
    "set_grad_enabled": "torch",
    "get_rng_state": "torch",
    "initial_seed": "torch",
    "seed": "torch",
    "set_rng_state": "torch",
    "can_cast": "torch",
    "broadcast_shapes": "torch",
    "promote_types": "torch",
}

_BEGIN = "# <namespace> generated by `python dtorch/api/namespace.py` from its NAMESPACE table\n"
_END = "# </namespace>\n"
_INIT = Path(__file__).resolve().parent.parent / "__init__.py"


def _where(name: str) -> tuple[str, str]:
    """(module, path) of ``name``; ``path`` is ``name`` for a plain import."""
    module, _, path = NAMESPACE[name].partition(":")
    return module, path or name


def _sort_key(name: str) -> tuple[int, list[int | str]]:
    # isort's order (ruff's I001): constants, then classes, then the rest, in natural order
    rank = 0 if name.isupper() and len(name) > 1 else 1 if name[0].isupper() else 2
    return rank, [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name.lower())]


def _import(module: str, names: list[str]) -> str:
    # one ``from`` statement, in ruff format's layout
    names = sorted(names, key=_sort_key)
    line = f"from {module} import {', '.join(names)}"
    if len(line) <= 100:
        return line + "\n"
    return f"from {module} import (\n" + "".join(f"    {n},\n" for n in names) + ")\n"


def _aliases() -> list[str]:
    """``name = path`` lines; each path starts with a name imported from its module."""
    lines = []
    for name in sorted(NAMESPACE):
        module, path = _where(name)
        if path != name:
            root = path.split(".")[0]
            if NAMESPACE.get(root) != module:  # imported plainly from the same module
                raise ValueError(f"NAMESPACE[{name!r}]: {root!r} is not imported from {module}")
            lines.append(f"{name} = {path}\n")
    return lines


def render() -> str:
    """The block of ``dtorch/__init__.py``: the imports, the aliases and ``__all__``."""
    by_module: dict[str, list[str]] = {}
    for name in NAMESPACE:
        module, path = _where(name)
        if path == name:
            by_module.setdefault(module, []).append(name)
    third = [_import(m, n) for m, n in sorted(by_module.items()) if m.split(".")[0] != "dtorch"]
    first = [_import(m, n) for m, n in sorted(by_module.items()) if m.split(".")[0] == "dtorch"]
    listed = "".join(f'    "{name}",\n' for name in sorted(NAMESPACE))
    return "".join(
        [_BEGIN, *third, "\n", *first, "\n", *_aliases(), "\n__all__ = [\n", listed, "]\n", _END]
    )


def written(text: str) -> str:
    """The block as ``text`` (``dtorch/__init__.py``'s source) holds it now."""
    start, end = text.index(_BEGIN[:14]), text.index(_END) + len(_END)  # from "# <namespace>"
    return text[start:end]


def main() -> None:
    """Rewrite the block of ``dtorch/__init__.py`` from the table."""
    text = _INIT.read_text()
    _INIT.write_text(text.replace(written(text), render()))
    sys.stdout.write(f"wrote {len(NAMESPACE)} names into {_INIT}\n")


if __name__ == "__main__":
    main()

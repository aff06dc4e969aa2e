"""The public surface: API.md's names (the promise, written here as API.md states it), the
``dtorch`` namespace against its one table (``dtorch.api.namespace.NAMESPACE``), module paths,
dtypes, and the sorted __all__."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
import torch

import dtorch
import dtorch.nn.functional as F
from dtorch.api import namespace
from dtorch.api.namespace import NAMESPACE, render, written

pytestmark = pytest.mark.timeout(60)

API_FUNCTIONS = [
    "matmul",
    "reshape",
    "cat",
    "concat",
    "stack",
    "abs",
    "chunk",
    "add",
    "sub",
    "mul",
    "div",
    "neg",
    "reciprocal",
    "pow",
    "exp",
    "log",
    "log2",
    "log10",
    "isinf",
    "isnan",
    "square",
    "rsqrt",
    "sin",
    "asin",
    "cos",
    "floor",
    "round",
    "repeat_interleave",
    "softmax",
    "squeeze",
    "unsqueeze",
    "flatten",
    "transpose",
    "permute",
    "einsum",
    "equal",
    "eq",
    "greater",
    "gt",
    "less",
    "lt",
    "greater_equal",
    "ge",
    "less_equal",
    "le",
    "logical_and",
    "logical_or",
    "nonzero",
    "index_select",
    "clamp",
    "clip",
    "clone",
    "max",
    "min",
    "minimum",
    "maximum",
    "sum",
    "mean",
    "any",
    "all",
    "where",
    "masked_fill",
    "masked_scatter",
    "unbind",
    "argmax",
    "argmin",
    "outer",
    "sigmoid",
    "tanh",
    "relu",
    "batch_norm",
    "conv2d",
    "dropout",
    "embedding",
    "group_norm",
    "layer_norm",
    "rms_norm",
]

TENSOR_METHODS = [
    "add",
    "sub",
    "mul",
    "div",
    "neg",
    "reciprocal",
    "pow",
    "exp",
    "log",
    "log2",
    "log10",
    "isinf",
    "isnan",
    "square",
    "rsqrt",
    "abs",
    "round",
    "floor",
    "cos",
    "sin",
    "asin",
    "tanh",
    "relu",
    "sigmoid",
    "softmax",
    "matmul",
    "squeeze",
    "unsqueeze",
    "expand",
    "view",
    "reshape",
    "contiguous",
    "is_contiguous",
    "permute",
    "transpose",
    "repeat",
    "chunk",
    "unbind",
    "flatten",
    "eq",
    "equal",
    "greater",
    "less",
    "greater_equal",
    "less_equal",
    "logical_and",
    "logical_or",
    "nonzero",
    "index_select",
    "max",
    "min",
    "argmax",
    "argmin",
    "maximum",
    "minimum",
    "sum",
    "mean",
    "any",
    "all",
    "outer",
    "repeat_interleave",
    "clamp",
    "clip",
    "where",
    "masked_fill",
    "masked_fill_",
    "masked_scatter",
    "masked_scatter_",
    "clone",
    "copy_",
    "detach",
    "type_as",
    "is_floating_point",
    "half",
    "bfloat16",
    "float",
    "double",
    "bool",
    "byte",
    "char",
    "short",
    "int",
    "long",
    "cpu",
    "cuda",
    "shape",
    "size",
    "ndim",
    "dim",
    "numel",
    "dtype",
    "device",
    "device_mesh",
    "placements",
    "is_dtensor",
    "graph",
    "to_torch",
    "to_torch_async",
    "numpy",
    "item",
    "tolist",
    "redistribute",
    "redistribute_like",
    "redistribute_by_dict",
    "to",
]

CREATION = [
    "Tensor",
    "tensor",
    "from_torch",
    "zeros",
    "ones",
    "empty",
    "full",
    "arange",
    "rand",
    "randn",
    "randint",
    "zeros_like",
    "ones_like",
    "full_like",
]


def test_all_is_sorted_and_importable() -> None:
    assert dtorch.__all__ == sorted(dtorch.__all__)
    for name in dtorch.__all__:
        assert hasattr(dtorch, name), name


def test_api_functions_and_creation_exist() -> None:
    missing = [n for n in API_FUNCTIONS + CREATION if not callable(getattr(dtorch, n, None))]
    assert not missing
    assert not [n for n in API_FUNCTIONS + CREATION if n not in NAMESPACE]


def _located(name: str) -> Any:
    """What ``NAMESPACE[name]`` names, looked up from its module (``dtorch``: a submodule)."""
    module, _, path = NAMESPACE[name].partition(":")
    if module == "dtorch":
        return importlib.import_module(f"dtorch.{name}")
    found: Any = importlib.import_module(module)
    for part in (path or name).split("."):
        found = getattr(found, part)
    return found


def test_the_namespace_is_the_table() -> None:
    assert dtorch.__all__ == sorted(NAMESPACE)
    wrong = [n for n in NAMESPACE if getattr(dtorch, n) is not _located(n)]
    assert not wrong


def test_the_init_block_is_what_the_table_renders() -> None:
    text = Path(dtorch.__file__).read_text()
    assert written(text) == render(), (
        "dtorch/__init__.py's <namespace> block is stale: run `python dtorch/api/namespace.py`"
    )


def _run_block(block: str) -> dict[str, Any]:
    scope: dict[str, Any] = {}
    exec(compile(block, "<namespace block>", "exec"), scope)
    return scope


def test_a_new_alias_is_one_table_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(NAMESPACE, "gelu", "dtorch.nn.functional")
    monkeypatch.setitem(NAMESPACE, "sqrt_alias", "dtorch.api.tensor:Tensor.sqrt")
    scope = _run_block(render())
    assert scope["gelu"] is F.gelu and scope["sqrt_alias"] is dtorch.Tensor.sqrt
    assert "gelu" in scope["__all__"] and scope["__all__"] == sorted(scope["__all__"])
    assert all(scope[n] is getattr(dtorch, n) for n in dtorch.__all__)


def test_an_alias_of_a_name_not_imported_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(NAMESPACE, "bad", "dtorch.api.tensor:TensorBase.abs")
    with pytest.raises(ValueError, match="TensorBase' is not imported from"):
        namespace.render()


def test_tensor_methods_exist() -> None:
    assert not [n for n in TENSOR_METHODS if not hasattr(dtorch.Tensor, n)]


def test_dtypes_are_torchs() -> None:
    for name in [
        "float",
        "float32",
        "float64",
        "float16",
        "bfloat16",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "bool",
        "long",
        "int",
        "half",
        "double",
    ]:
        assert getattr(dtorch, name) is getattr(torch, name)
    assert dtorch.dtype is torch.dtype and dtorch.device is torch.device
    assert dtorch.finfo is torch.finfo and dtorch.iinfo is torch.iinfo


def test_module_paths() -> None:
    expected = {
        "dtorch.distributed_spec": (
            "DeviceMesh Placement Shard Replicate Partial init_device_mesh get_default_device_mesh"
        ),
        "dtorch.tensor": "Tensor tensor TensorFuture",
        "dtorch.graph": "Graph GraphOption VoidFutureCollect",
        "dtorch.global_option": "GlobalOption",
        "dtorch.nn.functional": (
            "linear relu gelu silu softmax scaled_dot_product_attention pad interpolate "
            "conv2d batch_norm layer_norm rms_norm group_norm embedding dropout max_pool2d "
            "avg_pool2d adaptive_avg_pool2d"
        ),
        "dtorch.nn": (
            "Module Parameter Linear Conv2d BatchNorm2d LayerNorm RMSNorm GroupNorm Embedding "
            "Dropout MaxPool2d AvgPool2d AdaptiveAvgPool2d ReLU GELU SiLU Sigmoid Tanh Softmax "
            "Flatten Sequential ModuleList ModuleDict ColumnParallelLinear "
            "RowParallelLinearWithReplicateOutput EmbeddingWithReplicateOutput"
        ),
        "dtorch.nn.parameter": "Parameter",
    }
    for module_name, names in expected.items():
        module = importlib.import_module(module_name)
        for name in names.split():
            assert hasattr(module, name), f"{module_name}.{name}"


def test_dtorch_tensor_is_callable_after_importing_the_module() -> None:
    import dtorch.tensor

    t = dtorch.tensor([1, 2, 3])
    assert isinstance(t, dtorch.Tensor) and t.tolist() == [1, 2, 3]
    from dtorch.tensor import Tensor, TensorFuture

    assert Tensor is dtorch.Tensor and TensorFuture is dtorch.TensorFuture


def test_function_names_list_the_functional_operators() -> None:
    names = F._function_names
    assert len(set(names)) == len(names) and "SdpaOption" not in names
    assert all(callable(getattr(F, n)) and not isinstance(getattr(F, n), type) for n in names)
    assert {"conv2d", "scaled_dot_product_attention", "_apply_rotary_emb"} <= set(names)
    assert set(names) | {"SdpaOption"} == set(F.__all__)

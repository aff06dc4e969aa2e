"""The Convert kernel: executes redistribution plans with ThreadGroup collectives.

``convert_kernel`` is the GroupKernel of ``OpKind.Convert``; the owner of
``dtorch.kernels.table`` registers it (``register_group_kernel(OpKind.Convert,
convert_kernel)``).
"""

from dtorch.kernels.convert.kernel import convert_kernel, run_plan

__all__ = ["convert_kernel", "run_plan"]

"""The Convert kernel: executes redistribution plans with ThreadGroup collectives.

``convert_kernel`` is the GroupKernel of ``OpKind.Convert``; importing this package registers
it in ``dtorch.kernels.table``.
"""

from dtorch.ir.opkind import OpKind
from dtorch.kernels.convert.kernel import convert_kernel, run_plan
from dtorch.kernels.table import register_group_kernel

register_group_kernel(OpKind.Convert, convert_kernel)

__all__ = ["convert_kernel", "run_plan"]

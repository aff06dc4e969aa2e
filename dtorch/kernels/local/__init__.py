"""Local kernels: what one device runs for one operator on its own shards (torch calls only).

Each module exports ``KERNELS: dict[OpKind, LocalKernel]``; ``dtorch.kernels.table`` merges
them. A kernel must return exactly the local shapes and dtypes the output operands' metadata
says (the rules guarantee that the local computation is the right one).
"""

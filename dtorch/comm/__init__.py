"""Communication: TensorStore, TensorPromise/TensorFuture, ThreadGroup (spec 002).

``dtorch.comm.store`` exchanges tensors by key between threads, processes or machines;
``dtorch.comm.promise`` hands one value from a kernel to the client; ``dtorch.comm.group``
runs collectives; ``dtorch.comm.namespace`` keeps two programs on one machine apart.

Example:
    >>> from dtorch.comm.namespace import CommNamespace
    >>> CommNamespace("a") != CommNamespace("b")
    True
"""

"""dtorch.worker: the worker entry point for clusters (``python -m dtorch.worker``).

See ``dtorch.worker.main`` for the command line and what a worker does.
"""

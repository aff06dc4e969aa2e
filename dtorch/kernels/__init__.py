"""Kernels: what devices run for each OpKind (local torch calls and group communication)."""

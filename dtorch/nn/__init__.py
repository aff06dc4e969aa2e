"""dtorch.nn: neural-network building blocks on dtorch tensors (functional forms so far)."""

from dtorch.nn import functional

__all__ = ["functional"]

"""Operator functions: each builds its param and records it (dtorch.api.record)."""

"""``dtorch.global_option``: the module path of ``GlobalOption``."""

from dtorch.options import GlobalOption

__all__ = ["GlobalOption"]

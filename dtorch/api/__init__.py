"""What users touch: Tensor, creation, operators, graphs and futures. Records, never executes.

``tensor`` is imported first on purpose: the Tensor class imports its operator methods, whose
modules import the recorder, which refers back to this module (see ``record.py``).
"""

from dtorch.api import tensor as _tensor  # noqa: F401 - import order, see the docstring

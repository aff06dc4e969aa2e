"""Shape, dtype and placement rules of every operator kind (see ``registry.infer``).

Example:
    >>> from dtorch.ir.rules import RULES
    >>> from dtorch.ir.opkind import OpKind
    >>> OpKind.BroadcastBinary in RULES
    True
"""

from dtorch.ir.rules.base import DtypeError, Inference, OutputMeta, ParamError, Rule
from dtorch.ir.rules.registry import RULES, NoRuleError, infer

__all__ = [
    "DtypeError",
    "Inference",
    "NoRuleError",
    "OutputMeta",
    "ParamError",
    "RULES",
    "Rule",
    "infer",
]

"""The rule of Unsent: it accepts nothing.

An Unsent operator stands in, on the way to worker processes, for one the codec could not
write (``dtorch.runtime.process.unsent``); only the process runner makes one, after every
rule has run. Refusing it here keeps it out of everything that asks the rules first: the
client cannot record one, and the program loader refuses a file that holds one.

Example:
    >>> from dtorch.ir.opkind import OpKind
    >>> from dtorch.ir.params import UnsentParam
    >>> unsent_rule("unsent", UnsentParam(OpKind.Expand, "why"), ())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    dtorch.errors.ParamError: unsent: an Unsent operator (for an Expand) is made by the process...
"""

from __future__ import annotations

from dtorch.errors import ParamError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import OpParam, UnsentParam
from dtorch.ir.rules.base import Inference, Rule


def unsent_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """Refuses every Unsent operator (see the module docstring)."""
    assert isinstance(param, UnsentParam)
    raise ParamError(
        f"{name}: an Unsent operator (for an {param.original.name}) is made by the "
        "process runner only; nothing records or loads one"
    )


RULES: dict[OpKind, Rule] = {OpKind.Unsent: unsent_rule}

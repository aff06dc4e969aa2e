"""Column readers compiled once per record type from a fixed template.

``explode`` reads one attribute of every record per column. A list comprehension
``[o.name for o in objs]`` runs about twice as fast as ``map(attrgetter("name"), objs)``: the
interpreter specialises an attribute read written in the source to the slot it names. So the
function is compiled from a fixed template when the registry is built (at import). The only
text substituted is the field names of registered record classes - our own dataclass
definitions, each checked to be a plain identifier - and the compiled code sees no builtins:
no payload, and nothing else from outside, ever reaches ``compile``.

Example:
    >>> from dtorch.ir.span import Span
    >>> explode = compiled_exploder(["file", "line"])
    >>> explode([Span("a.py", 1), Span("b.py", 2)])
    [['a.py', 'b.py'], [1, 2]]
"""

from __future__ import annotations

import keyword
from collections.abc import Callable, Sequence
from typing import Any

from dtorch.errors import SerializationError

_TEMPLATE = "def explode(objs):\n    return [{columns}]\n"
_COLUMN = "[o.{name} for o in objs]"


def compiled_exploder(names: Sequence[str]) -> Callable[[list[Any]], list[list[Any]]]:
    """``explode`` reading the named attributes of every value, a column per name."""
    for name in names:
        if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("__"):
            raise SerializationError(f"field name {name!r} is not a plain identifier")
    source = _TEMPLATE.format(columns=", ".join(_COLUMN.format(name=n) for n in names))
    namespace: dict[str, Any] = {}
    code = compile(source, f"<explode {', '.join(names)}>", "exec")
    exec(code, {"__builtins__": {}}, namespace)  # a fixed template, see the module docstring
    explode: Callable[[list[Any]], list[list[Any]]] = namespace["explode"]
    return explode

"""What users touch: Tensor, creation, operators, graphs and futures. Records, never executes.

No module here needs another to be imported first: the operator modules and the recorder are
typed against the handle base class (``handle.TensorBase``) and make their results through
it, so none of them imports ``tensor``, which imports them.
"""

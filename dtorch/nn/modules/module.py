"""``dtorch.nn.Module``: torch.nn.Module's conventions on dtorch tensors.

Assigning a ``Parameter``, a ``Buffer`` or a ``Module`` as an attribute registers it, in
assignment order; ``named_parameters``/``named_buffers``/``named_modules`` walk the tree in
torch's order (a module's own members, then its children depth first, shared members once);
``state_dict``/``load_state_dict`` use torch's keys (``layer.0.weight``) and ``strict`` rules
(see ``dtorch.nn.modules.state``); ``to``/``float``/... rebind every parameter in place
(``dtorch.nn.modules.conversion``).

Calling a module runs, in this order: the forward pre-hooks (which may replace the
arguments), ``redistribute_input`` (DTorch's placement hook, see below), ``forward``,
``redistribute_output``, then the forward hooks (which see the arguments ``forward`` got and
may replace the output); see ``dtorch.nn.modules.hooks``.

DTorch's placement hooks: a module may declare ``input_placements`` and ``output_placements``,
dicts from mesh dim names to placements (``{"tp": Replicate()}``). ``redistribute_input``
redistributes every dtorch Tensor argument of ``forward`` (positional or keyword, not nested)
to those placements on its own mesh, ``redistribute_output`` the output (a Tensor, or each
Tensor of a tuple/list); mesh dims the dict does not name keep their placements and names the
mesh lacks are ignored (``Tensor.redistribute_by_dict(..., default_placement_mode="keep")``).
None (the default) passes the values unchanged. Subclasses may override either method.

Example:
    >>> import dtorch
    >>> from dtorch import nn
    >>> class Scale(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.w = nn.Parameter(dtorch.full((2,), 3.0))
    ...         self.register_buffer("offset", dtorch.ones(2))
    ...     def forward(self, x):
    ...         return x * self.w + self.offset
    >>> m = Scale()
    >>> [name for name, _ in m.named_parameters()], list(m.state_dict())
    (['w'], ['w', 'offset'])
    >>> m(dtorch.ones(2)).tolist()
    [4.0, 4.0]
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
from torch.utils.hooks import RemovableHandle

from dtorch.api.graph import Graph
from dtorch.api.tensor import Tensor
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.placement import Placement
from dtorch.nn.modules import conversion, hooks, loading, paths, state
from dtorch.nn.modules.hooks import Hook
from dtorch.nn.modules.torch_children import Child, holds_state, stateless
from dtorch.nn.parameter import Buffer, Parameter

#: ``Graph.traced_module_calls``, read at every call (one lookup the fewer).
_TRACED_CALLS = Graph.traced_module_calls


class _TrainingFlag:
    """``Module.training``, kept in the instance's ``__dict__`` as torch keeps it. A read while
    a trace runs in this thread tells the trace the module's mode was read: a traced function
    that calls ``module.forward(x)`` directly, or reads ``model.training`` itself, depends on
    that mode as much as one that calls ``module(x)``, and the program checks it at every call."""

    def __get__(self, module: Module | None, owner: type) -> Any:
        if module is None:
            return self
        if _TRACED_CALLS:
            _note_traced_call(module)
        try:
            return module.__dict__["training"]
        except KeyError:  # Module.__getattr__ then raises torch's message
            raise AttributeError("training") from None

    def __set__(self, module: Module, value: bool) -> None:
        module.__dict__["training"] = value

    def __delete__(self, module: Module) -> None:
        try:
            del module.__dict__["training"]
        except KeyError:
            raise AttributeError("training") from None


def _typename(value: Any) -> str:
    return type(value).__name__


def _torch_member(name: str, value: Any) -> TypeError | None:
    """The error for a torch.nn Parameter, Buffer, or Module with parameters or buffers,
    assigned to a dtorch module (dtorch's modules hold dtorch tensors), else None: a torch
    module without any (``torch.nn.GELU()``, HF's activations) is a child as in torch."""
    if isinstance(value, torch.nn.Module) and holds_state(value):
        return TypeError(
            f"cannot assign torch.nn.Module '{_typename(value)}' as child module '{name}' of a "
            "dtorch.nn.Module: it holds parameters or buffers, which a dtorch module holds as "
            "dtorch tensors; build it from dtorch.nn layers (load its state_dict into them)"
        )
    if isinstance(value, torch.nn.Parameter) or getattr(value, "_is_buffer", False):
        kind = "Parameter" if isinstance(value, torch.nn.Parameter) else "Buffer"
        return TypeError(
            f"cannot assign a torch.nn.{kind} as '{name}' of a dtorch.nn.Module: it holds "
            f"dtorch tensors; use dtorch.nn.{kind}(t), which distributes a torch tensor"
        )
    return None


def _check_member_name(kind: str, name: Any) -> None:
    """torch's checks of a new parameter/buffer/module name."""
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string. Got {_typename(name)}")
    if "." in name:
        raise KeyError(f'{kind} name can\'t contain ".", got: {name}')
    if name == "":
        raise KeyError(f'{kind} name can\'t be empty string ""')


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


#: The hook dicts of the state's two directions (torch's names).
_STATE_HOOKS = (
    "_state_dict_pre_hooks",
    "_state_dict_hooks",
    "_load_state_dict_pre_hooks",
    "_load_state_dict_post_hooks",
)


def _addindent(text: str, spaces: int) -> str:
    """Indent every line of ``text`` but the first (torch's ``_addindent``)."""
    first, *rest = text.split("\n")
    return "\n".join([first, *(" " * spaces + line for line in rest)])


class Module:
    """Base class of dtorch layers and models; see the module docstring.

    Example:
        >>> from dtorch import nn
        >>> model = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
        >>> [n for n, _ in model.named_parameters()], model.training, model.eval().training
        (['0.weight', '0.bias'], True, False)
    """

    #: Placements by mesh dim name given to forward's Tensor arguments (None: unchanged).
    input_placements: Mapping[str, Placement] | None = None
    #: Placements by mesh dim name given to forward's Tensor output(s) (None: unchanged).
    output_placements: Mapping[str, Placement] | None = None

    #: The layout version of this class's state (torch's ``_version``; in ``_metadata``).
    _version: int = 1

    training = _TrainingFlag()
    _parameters: dict[str, Parameter | None]
    _buffers: dict[str, Tensor | None]
    _modules: dict[str, Child | None]

    def __init__(self) -> None:
        setattr_ = object.__setattr__
        setattr_(self, "training", True)
        setattr_(self, "_parameters", {})
        setattr_(self, "_buffers", {})
        setattr_(self, "_non_persistent_buffers_set", set())
        setattr_(self, "_modules", {})
        setattr_(self, "_forward_pre_hooks", OrderedDict())
        setattr_(self, "_forward_pre_hooks_with_kwargs", OrderedDict())
        setattr_(self, "_forward_hooks", OrderedDict())
        setattr_(self, "_forward_hooks_with_kwargs", OrderedDict())
        setattr_(self, "_forward_hooks_always_called", OrderedDict())
        for store in _STATE_HOOKS:
            setattr_(self, store, OrderedDict())

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function'
        )

    # --- registration -----------------------------------------------------------------------
    def _check_new(self, kind: str, name: Any, store: dict[str, Any] | None) -> None:
        if store is None:
            raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
        _check_member_name(kind, name)
        if hasattr(self, name) and name not in store:
            raise KeyError(f"attribute '{name}' already exists")

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (or None: a declared slot without a value, as torch's bias)."""
        self._check_new("parameter", name, self.__dict__.get("_parameters"))
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                "(dtorch.nn.Parameter or None required)"
            )
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a buffer: a dtorch tensor of the module's state that is no parameter;
        ``persistent=False`` leaves it out of ``state_dict``."""
        self._check_new("buffer", name, self.__dict__.get("_buffers"))
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{_typename(tensor)}' object to buffer '{name}' (dtorch.Tensor "
                "or None required; distribute a torch tensor with dtorch.from_torch)"
            )
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: Module | torch.nn.Module | None) -> None:
        """Add a child module (or None): a dtorch one, or a torch one without parameters or
        buffers (an activation, a dropout: it runs on dtorch tensors through torch's own
        functions, and follows ``train``/``eval``)."""
        if isinstance(module, torch.nn.Module) and (refused := _torch_member(name, module)):
            raise refused
        if module is not None and not isinstance(module, Module | torch.nn.Module):
            raise TypeError(f"{_typename(module)} is not a dtorch.nn.Module subclass")
        self._check_new("module", name, self.__dict__.get("_modules"))
        self._modules[name] = module

    register_module = add_module

    def _forget(self, name: str, *stores: str) -> None:
        for store in stores:
            self.__dict__.get(store, {}).pop(name, None)
        self.__dict__.get("_non_persistent_buffers_set", set()).discard(name)

    def __setattr__(self, name: str, value: Any) -> None:
        params, modules = self.__dict__.get("_parameters"), self.__dict__.get("_modules")
        buffers = self.__dict__.get("_buffers")
        if isinstance(value, torch.Tensor | torch.nn.Module) and (
            refused := _torch_member(name, value)
        ):
            raise refused
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._forget(name, "_buffers", "_modules")
            self.__dict__.pop(name, None)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            self._set_existing("parameter", "dtorch.nn.Parameter", params, name, value)
        elif isinstance(value, Module | torch.nn.Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._forget(name, "_parameters", "_buffers")
            self.__dict__.pop(name, None)
            modules[name] = value
        elif modules is not None and name in modules:
            self._set_existing("child module", "dtorch.nn.Module", modules, name, value)
        elif isinstance(value, Buffer) or (buffers is not None and name in buffers):
            self._set_buffer(name, value)
        else:
            object.__setattr__(self, name, value)

    def _set_existing(
        self, kind: str, wanted: str, store: dict[str, Any], name: str, value: Any
    ) -> None:
        if value is not None:
            raise TypeError(
                f"cannot assign '{_typename(value)}' as {kind} '{name}' ({wanted} or None expected)"
            )
        store[name] = None

    def _set_buffer(self, name: str, value: Any) -> None:
        if value is not None and not isinstance(value, Tensor):
            raise TypeError(
                f"cannot assign '{_typename(value)}' as buffer '{name}' (dtorch.nn.Buffer, "
                "dtorch.Tensor or None expected)"
            )
        if isinstance(value, Buffer):
            persistent = value.persistent
        else:
            persistent = name not in self._non_persistent_buffers_set
        self._forget(name, "_parameters", "_modules")
        self.__dict__.pop(name, None)
        self.register_buffer(name, value, persistent)

    def __getattr__(self, name: str) -> Any:
        state_ = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            members = state_.get(store)
            if members is not None and name in members:
                return members[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for store in ("_parameters", "_buffers", "_modules"):
            members = self.__dict__.get(store, {})
            if name in members:
                del members[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self) -> list[str]:
        members = itertools.chain(self._parameters, self._buffers, self._modules)
        keys = [*object.__dir__(self), *members]
        return sorted(k for k in set(keys) if not k[0].isdigit())

    # --- walking the tree -------------------------------------------------------------------
    def named_modules(
        self, memo: set[Any] | None = None, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Child]]:
        """This module and every descendant, depth first (each once unless
        ``remove_duplicate=False``), with dotted names."""
        memo = set() if memo is None else memo
        if self in memo:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, module in self._modules.items():
            if module is not None:
                child = stateless(name, module)
                yield from child.named_modules(memo, _join(prefix, name), remove_duplicate)

    def modules(self, remove_duplicate: bool = True) -> Iterator[Child]:
        """This module and every descendant, depth first (each once unless
        ``remove_duplicate=False``), as torch's ``modules``."""
        for _, module in self.named_modules(remove_duplicate=remove_duplicate):
            yield module

    def named_children(self) -> Iterator[tuple[str, Child]]:
        seen: set[int] = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self) -> Iterator[Child]:
        for _, module in self.named_children():
            yield module

    def _named_members(
        self, store: str, prefix: str, recurse: bool, remove_duplicate: bool
    ) -> Iterator[tuple[str, Any]]:
        # ids, not the tensors: a set would compare tensors with ``==``, which records an op
        seen: set[int] = set()
        if recurse:
            walk = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
        else:
            walk = iter([(prefix, self)])
        for module_prefix, module in walk:
            for name, value in getattr(module, store).items():
                if value is None or id(value) in seen:
                    continue
                if remove_duplicate:
                    seen.add(id(value))
                yield _join(module_prefix, name), value

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Parameter]]:
        """``(dotted name, parameter)`` pairs in torch's order."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        """``(dotted name, buffer)`` pairs in torch's order (non-persistent ones included)."""
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, buffer in self.named_buffers(recurse=recurse):
            yield buffer

    get_submodule = paths.get_submodule
    set_submodule = paths.set_submodule
    get_parameter = paths.get_parameter
    get_buffer = paths.get_buffer

    def first_param_device_mesh(self) -> DeviceMesh | None:
        """The mesh of the first parameter (in ``named_parameters`` order), else of the first
        buffer; None for a module without tensors.

        Example:
            >>> import dtorch
            >>> mesh = dtorch.init_device_mesh("cpu", 2)
            >>> dtorch.nn.Linear(2, 2, device_mesh=mesh).first_param_device_mesh() == mesh
            True
        """
        for tensor in itertools.chain(self.parameters(), self.buffers()):
            return tensor.device_mesh
        return None

    # --- modes and conversions --------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """torch's: every parameter's ``grad`` to None (or, ``set_to_none=False``, to zeros).
        dtorch computes no gradients, so only a ``grad`` a program assigned is touched.

        Example:
            >>> from dtorch import nn
            >>> m = nn.Linear(2, 2)
            >>> m.weight.grad = m.weight * 0 + 1
            >>> m.zero_grad(); m.weight.grad is None
            True
        """
        for param in self.parameters():
            if param.grad is None:
                continue
            if set_to_none:
                param.grad = None
            else:
                param.grad.zero_()  # in place, as torch's

    def apply(self, fn: Callable[[Any], Any]) -> Module:
        """``fn`` on every child (recursively) and then on this module; returns self."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # --- conversions (dtorch.nn.modules.conversion holds torch's methods) ---------------
    _apply = conversion.apply_to_tensors
    to = conversion.to
    to_empty = conversion.to_empty
    type = conversion.to_type
    share_memory = conversion.share_memory
    cpu = conversion.cpu
    cuda = conversion.cuda

    # --- state (dtorch.nn.modules.state and .loading hold torch's methods) ----------------
    state_dict = state.state_dict
    _save_to_state_dict = state.save_to_state_dict
    get_extra_state = state.get_extra_state
    set_extra_state = state.set_extra_state
    register_state_dict_pre_hook = state.register_state_dict_pre_hook
    register_state_dict_post_hook = state.register_state_dict_post_hook
    register_load_state_dict_pre_hook = state.register_load_state_dict_pre_hook
    _register_state_dict_hook = state.register_state_dict_hook
    _register_load_state_dict_pre_hook = state.load_state_dict_pre_hook
    register_load_state_dict_post_hook = state.register_load_state_dict_post_hook
    _load_from_state_dict = loading.load_from_state_dict

    def load_state_dict(
        self, state_dict: Any, strict: bool = True, assign: bool = False
    ) -> state.IncompatibleKeys:
        """Load values into the parameters and buffers, in place; see
        ``dtorch.nn.modules.loading`` (torch or dtorch tensors, or the path of a safetensors
        file)."""
        return loading.load_state_dict(self, state_dict, strict=strict, assign=assign)

    # --- calling (the machinery is in dtorch.nn.modules.hooks) -----------------------------
    def register_forward_pre_hook(
        self, hook: Hook, *, prepend: bool = False, with_kwargs: bool = False
    ) -> RemovableHandle:
        """``hook(module, args)`` (or ``hook(module, args, kwargs)``) before ``forward``; a
        non-None result replaces the arguments (``(args, kwargs)`` with ``with_kwargs``)."""
        return hooks.register_forward_pre_hook(self, hook, prepend=prepend, with_kwargs=with_kwargs)

    def register_forward_hook(
        self,
        hook: Hook,
        *,
        prepend: bool = False,
        with_kwargs: bool = False,
        always_call: bool = False,
    ) -> RemovableHandle:
        """``hook(module, args, output)`` (or with ``kwargs`` before ``output``) after
        ``forward``; a non-None result replaces the output. ``always_call``: also when
        ``forward`` raised (the error is raised again afterwards)."""
        return hooks.register_forward_hook(
            self, hook, prepend=prepend, with_kwargs=with_kwargs, always_call=always_call
        )

    def register_full_backward_hook(self, hook: Hook, prepend: bool = False) -> RemovableHandle:
        raise hooks.no_autograd("register_full_backward_hook")

    def register_full_backward_pre_hook(self, hook: Hook, prepend: bool = False) -> RemovableHandle:
        raise hooks.no_autograd("register_full_backward_pre_hook")

    def register_backward_hook(self, hook: Hook) -> RemovableHandle:
        raise hooks.no_autograd("register_backward_hook")

    def redistribute_input(self, *args: Any, **kwargs: Any) -> tuple[tuple[Any, ...], dict]:
        """forward's arguments on ``input_placements`` (see the module docstring)."""
        return hooks.redistribute_input(self.input_placements, args, kwargs)

    def redistribute_output(self, output: Any) -> Any:
        """forward's output on ``output_placements`` (see the module docstring)."""
        return hooks.redistribute_output(self.output_placements, output)

    def _run_pre_hooks(
        self, args: tuple, kwargs: dict, run: hooks.HookRun | None = None
    ) -> tuple[tuple, dict]:
        return hooks.run_pre_hooks(self, args, kwargs, run)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _TRACED_CALLS:  # a trace runs in some thread: it lists the modules of its thread
            _note_traced_call(self)
        if not self._forward_hooks:  # inline, not a helper: warnings' stacklevels count frames
            if self._forward_pre_hooks:
                args, kwargs = self._run_pre_hooks(args, kwargs)
            args, kwargs = self.redistribute_input(*args, **kwargs)
            return self.redistribute_output(self.forward(*args, **kwargs))
        run = hooks.HookRun(args=args, kwargs=kwargs)
        try:  # as torch: ``always_call`` hooks run after a pre-hook's error too
            if self._forward_pre_hooks:
                run.args, run.kwargs = self._run_pre_hooks(args, kwargs, run)
            run.args, run.kwargs = self.redistribute_input(*run.args, **run.kwargs)
            run.output = self.redistribute_output(self.forward(*run.args, **run.kwargs))
            return hooks.run_hooks(self, run.args, run.kwargs, run)
        except Exception:
            hooks.run_always_hooks(self, run.args, run.kwargs, run)
            raise

    # --- printing ---------------------------------------------------------------------------
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """The text inside this module's parentheses in ``repr`` (subclasses override)."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [
            f"({key}): {_addindent(repr(module), 2)}" for key, module in self._modules.items()
        ]
        lines = extra_lines + child_lines
        body = ""
        if len(extra_lines) == 1 and not child_lines:
            body = extra_lines[0]
        elif lines:
            body = "\n  " + "\n  ".join(lines) + "\n"
        return f"{self._get_name()}({body})"

    # --- dtype casts (last: their names shadow builtins in the class body) ------------
    float = conversion.to_float
    double = conversion.to_double
    half = conversion.to_half
    bfloat16 = conversion.to_bfloat16


__all__ = ["Module"]


def _note_traced_call(module: Module) -> None:
    """Tell a trace running in this thread that ``module`` was called, whatever its
    arguments: the program checks the module's train/eval mode at every call."""
    called = _TRACED_CALLS.get(threading.get_ident())
    if called is not None:
        called.append(module)

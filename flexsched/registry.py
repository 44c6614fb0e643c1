"""The task registry: compute definitions registered by name, re-created from (name, args)."""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
from dataclasses import dataclass, fields, is_dataclass

import numpy as np

from .errors import DefinitionError, RegistryError
from .expr import Expr
from .reference import evaluate, topological_order
from .tensor import Tensor

_ARG_TYPES = (int, float, str, bool)


@dataclass(frozen=True)
class Param:
    name: str
    default: object = inspect.Parameter.empty

    @property
    def required(self):
        return self.default is inspect.Parameter.empty


@dataclass(frozen=True)
class TaskDefinition:
    """A registered function that builds a computation from its arguments."""

    name: str
    func: object
    params: tuple
    module: str
    description: str

    def signature_text(self):
        """Argument names as a user types them: 'M K N' or 'B C ... [stride=1]'."""
        return " ".join(p.name if p.required else f"[{p.name}={p.default}]" for p in self.params)

    def create(self, *args, **kwargs):
        """The Task built from these arguments."""
        bound = self._bind(args, kwargs)
        try:
            tensors = self.func(**bound)
        except DefinitionError as err:
            raise DefinitionError(f"task {self.name}: {err}") from None
        return Task(self.name, tuple(bound.values()), _check_tensors(self.name, tensors), self.module)

    def _bind(self, args, kwargs):
        signature = inspect.Signature([inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                         default=p.default) for p in self.params])
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            required = sum(p.required for p in self.params)
            count = str(required) if required == len(self.params) else f"{required} to {len(self.params)}"
            raise RegistryError(f"task {self.name} takes {count} arguments ({self.signature_text()}), "
                                f"got {len(args) + len(kwargs)}") from None
        bound.apply_defaults()
        for key, value in bound.arguments.items():
            if not isinstance(value, _ARG_TYPES):
                raise RegistryError(f"task {self.name}: argument '{key}' must be an int, float, str or "
                                    f"bool, got {type(value).__name__}")
        return dict(bound.arguments)


def _check_tensors(name, tensors):
    """Returned tensors: placeholders are the inputs (all of them), computes the outputs."""
    if isinstance(tensors, Tensor):
        tensors = (tensors,)
    stray = tensors if not isinstance(tensors, (tuple, list)) else next(
        (t for t in tensors if not isinstance(t, Tensor)), None)
    if stray is not None or tensors is None:
        raise DefinitionError(f"task {name}: the definition must return its tensors (inputs, then "
                              f"outputs), got {type(stray).__name__}")
    tensors = tuple(tensors)
    outputs = [t for t in tensors if not t.is_placeholder]
    if not outputs:
        raise DefinitionError(f"task {name}: returns no compute tensor (return inputs, then outputs)")
    returned = {id(t) for t in tensors}
    reachable = topological_order(outputs)
    for t in reachable:
        if t.is_placeholder and id(t) not in returned:
            raise DefinitionError(f"task {name}: input '{t.name}' is read but not returned")
    names = {}
    for t in (*tensors, *reachable):
        if names.setdefault(t.name, t) is not t:
            raise DefinitionError(f"task {name}: two different tensors are named '{t.name}'")
    return tensors


@dataclass(frozen=True, eq=False)
class Task:
    """One computation: a registered name, its argument values and its tensors."""

    name: str
    args: tuple
    tensors: tuple  # inputs then outputs, as the definition returned them
    module: str

    @property
    def inputs(self):
        return tuple(t for t in self.tensors if t.is_placeholder)

    @property
    def outputs(self):
        return tuple(t for t in self.tensors if not t.is_placeholder)

    @functools.cached_property
    def fingerprint(self):
        """A digest of the computation itself, so two different computations under one name differ."""
        return computation_fingerprint(self.outputs)

    @property
    def key(self):
        """Identifies the task across processes: (name, args) of a registered task; a computation
        given as tensors is told apart by its fingerprint instead."""
        return (self.name, self.args) if self.module != COMPUTATION_MODULE else (self.name, self.fingerprint)

    def ref(self):
        """A JSON-friendly reference from which task_from_ref re-creates a registered task."""
        return {"name": self.name, "args": list(self.args), "module": self.module, "fingerprint": self.fingerprint}

    def random_inputs(self, seed=0):
        """Input arrays drawn uniformly from [-1, 1) (integers from -4..4), reproducibly."""
        rng = np.random.default_rng(seed)
        arrays = []
        for t in self.inputs:
            if t.dtype.startswith("float"):
                arrays.append(rng.uniform(-1.0, 1.0, t.shape).astype(t.dtype))
            else:
                arrays.append(rng.integers(-4, 5, t.shape).astype(t.dtype))
        return arrays

    def evaluate(self, *arrays):
        """Reference outputs for input arrays given in the order of self.inputs."""
        if len(arrays) != len(self.inputs):
            raise RegistryError(f"task {self.name} takes {len(self.inputs)} input arrays "
                                f"({', '.join(t.name for t in self.inputs)}), got {len(arrays)}")
        return evaluate(list(self.outputs), dict(zip(self.inputs, arrays)))

    def __str__(self):
        return f"{self.name}({', '.join(map(str, self.args))})"


def computation_fingerprint(outputs):
    """A short digest of every tensor the outputs depend on: names, shapes, dtypes and bodies."""
    text = "\n".join(_structure(tensor) for tensor in topological_order(list(outputs)))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _structure(value):
    """A canonical text of a tensor or expression tree (a tensor read by a Load is named, not expanded)."""
    if isinstance(value, Tensor):
        parts = [value.name, str(value.shape), value.dtype, value.tag, _structure(value.axes), _structure(value.body)]
        return "tensor(" + ", ".join(parts) + ")"
    if isinstance(value, Expr) and is_dataclass(value):
        items = []
        for field in fields(value):
            item = getattr(value, field.name)
            items.append(f"{field.name}=" + (repr(item.name) if isinstance(item, Tensor) else _structure(item)))
        return f"{type(value).__name__}(" + ", ".join(items) + ")"
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_structure(item) for item in value) + "]"
    return repr(value)


COMPUTATION_MODULE = ""   # a Task made from tensors: no module can re-create it from its ref


def task_from_tensors(tensors, name=None):
    """The Task of a computation a user holds: its output tensor(s), or inputs and outputs in the
    order the kernel should take them. Inputs left out are taken in the order the outputs read them."""
    tensors = (tensors,) if isinstance(tensors, Tensor) else tuple(tensors)
    stray = next((t for t in tensors if not isinstance(t, Tensor)), None)
    if stray is not None or not tensors:
        raise RegistryError(f"a computation is given by its tensors, got {type(stray).__name__ if tensors else 'none'}")
    outputs = [t for t in tensors if not t.is_placeholder]
    if not outputs:
        raise DefinitionError("the computation has no compute tensor: pass its output(s)")
    given = [t for t in tensors if t.is_placeholder]
    listed = {id(t) for t in given}
    missing = [t for t in topological_order(outputs) if t.is_placeholder and id(t) not in listed]
    name = name or outputs[0].name
    all_tensors = _check_tensors(name, (*given, *missing, *outputs))
    return Task(name, (), all_tensors, COMPUTATION_MODULE)


def as_task(task):
    """A Task from what a user holds: a Task, (name, *args) of a registered task, or a computation's
    tensor(s) (see task_from_tensors)."""
    if isinstance(task, Task):
        return task
    if isinstance(task, Tensor) or (isinstance(task, (tuple, list)) and task and isinstance(task[0], Tensor)):
        return task_from_tensors(task)
    if isinstance(task, str):
        return get_task(task)
    if isinstance(task, (tuple, list)) and task and isinstance(task[0], str):
        return get_task(*task)
    raise RegistryError(f"expected a Task, (name, *args) of a registered task, or output tensor(s), "
                        f"got {type(task).__name__}")


_REGISTRY: dict[str, TaskDefinition] = {}


def register_task(name=None, description=None):
    """Decorator: register a function returning (inputs..., outputs...) under `name`."""
    def decorate(func):
        task_name = name or func.__name__
        if task_name in _REGISTRY and _REGISTRY[task_name].func is not func:
            existing = _REGISTRY[task_name]
            if (existing.module, existing.func.__qualname__) != (func.__module__, func.__qualname__):
                raise RegistryError(f"task name '{task_name}' is already registered by "
                                    f"{existing.module}.{existing.func.__qualname__}")
        params = []
        for p in inspect.signature(func).parameters.values():
            if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.POSITIONAL_ONLY):
                raise RegistryError(f"task {task_name}: parameter '{p.name}' must be a plain positional "
                                    "parameter")
            params.append(Param(p.name, p.default))
        doc = description or (inspect.getdoc(func) or "").split("\n")[0]
        _REGISTRY[task_name] = TaskDefinition(task_name, func, tuple(params), func.__module__, doc)
        return func
    return decorate


def _load_library():
    importlib.import_module("flexsched.ops")


def task_definition(name):
    """The registered definition called `name` (exact, else the one case-insensitive match)."""
    _load_library()
    if name in _REGISTRY:
        return _REGISTRY[name]
    matches = [key for key in _REGISTRY if key.lower() == str(name).lower()]
    if len(matches) == 1:
        return _REGISTRY[matches[0]]
    raise RegistryError(f"unknown task '{name}'; registered: {', '.join(sorted(_REGISTRY))} (an operator of your "
                        "own: load its module with --module/-m or FLEXSCHED_MODULES, or import it first)")


def get_task(name, *args, **kwargs):
    """The task `name` built with these arguments."""
    return task_definition(name).create(*args, **kwargs)


def task_from_ref(ref):
    """Re-create a task from Task.ref() (importing its defining module if needed)."""
    _load_library()
    _refuse_computation(ref)
    if ref["name"] not in _REGISTRY and ref.get("module"):
        try:
            importlib.import_module(ref["module"])
        except ImportError as err:
            raise RegistryError(f"task '{ref['name']}': cannot import its module "
                                f"'{ref['module']}': {err}") from None
    return get_task(ref["name"], *ref["args"])


def registered_task(ref):
    """Re-create a task from a ref among the tasks registered in this process; never imports the
    ref's module (a ref read from a file must not choose code to run)."""
    _load_library()
    _refuse_computation(ref)
    if ref["name"] not in _REGISTRY:
        module = f" (defined in module '{ref['module']}')" if ref.get("module") else ""
        raise RegistryError(f"task '{ref['name']}'{module} is not registered in this process; import the module "
                            "that defines it first (on the command line: --module/-m), or pass the task")
    return get_task(ref["name"], *ref["args"])


def _refuse_computation(ref):
    """A ref of a computation given as tensors names nothing a registry can re-create."""
    if ref.get("module", None) == COMPUTATION_MODULE:
        raise RegistryError(f"task '{ref['name']}' was given as tensors, not registered: pass the task itself")


def list_tasks():
    """Every registered definition, sorted by name."""
    _load_library()
    return [_REGISTRY[key] for key in sorted(_REGISTRY)]

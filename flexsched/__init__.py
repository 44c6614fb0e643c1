"""flexsched: write a tensor computation as math; analyse, schedule and tune it without templates."""

from .errors import DefinitionError, EvaluationError, FlexschedError, RegistryError
from .reference import evaluate
from .expr import Expr, IterVar
from .functions import (abs, all_of, any_of, cast, const, exp, if_then_else, log, max, min, select,
                        sqrt, sum, tanh)
from .tensor import Tensor, compute, placeholder, reduce_axis
from .registry import Task, get_task, list_tasks, register_task
from .target import get_target
from .api import build, build_best, optimize  # light: each imports the heavy layers when called

from .version import __version__


def open_database(path=None):
    """The tuning database (None: $FLEXSCHED_DB or the user's cache). See flexsched.database."""
    from .database import open_database as open_

    return open_(path)


def jit(func=None, **options):
    """Decorator: tune a function that builds a computation from its arguments' shapes, once per
    shape, remembered in the tuning database. See flexsched.autotuner.jit."""
    from .autotuner import jit as jit_

    return jit_(func, **options)


def torch_op(kernel_or_task, name=None, target="llvm", database=None):
    """A kernel as the PyTorch operator flexsched::<name> (eager, nn.Module, torch.compile). See
    flexsched.torch_ops.torch_op."""
    from .torch_ops import torch_op as make

    return make(kernel_or_task, name, target, database)


__all__ = [
    "DefinitionError", "EvaluationError", "FlexschedError", "RegistryError",
    "Expr", "IterVar", "Tensor",
    "placeholder", "compute", "reduce_axis",
    "sum", "max", "min", "select", "if_then_else", "exp", "log", "sqrt", "abs", "tanh",
    "const", "cast", "all_of", "any_of",
    "evaluate", "Task", "register_task", "get_task", "list_tasks", "get_target",
    "optimize", "build", "build_best", "open_database", "jit", "torch_op",
]

"""flexsched: write a tensor computation as math; analyse, schedule and tune it without templates."""

from .errors import DefinitionError, EvaluationError, FlexschedError, RegistryError
from .reference import evaluate
from .expr import Expr, IterVar
from .functions import (abs, all_of, any_of, cast, const, exp, if_then_else, log, max, min, select,
                        sqrt, sum, tanh)
from .tensor import Tensor, compute, placeholder, reduce_axis

__version__ = "0.1.0"


def optimize(task, target="llvm", trials=100, method="q", log=None, **options):
    """Tune `task` (a Task or (name, *args)) on `target`: a TuneResult with the best config, its
    seconds and GFLOPS, a built kernel (CPU) and the history; the best record joins the tuning
    database (database=None: the user's, a path, False: none). See explore.optimize.optimize."""
    from .tuned import optimize as run  # torch and the back ends load only when tuning

    return run(task, target, trials=trials, method=method, log=log, **options)


__all__ = [
    "DefinitionError", "EvaluationError", "FlexschedError", "RegistryError",
    "Expr", "IterVar", "Tensor",
    "placeholder", "compute", "reduce_axis",
    "sum", "max", "min", "select", "if_then_else", "exp", "log", "sqrt", "abs", "tanh",
    "const", "cast", "all_of", "any_of",
    "evaluate", "optimize",
]


def build(task, target="llvm", schedule=None, database=None):
    """A kernel of `task` under `schedule`, else under the tuning database's best schedule for this
    workload on this target, else the naive one; kernel.origin says which. See flexsched.tuned.build."""
    from .tuned import build as build_tuned

    return build_tuned(task, target, schedule, database)


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


__all__ += ["build", "open_database", "jit", "torch_op"]

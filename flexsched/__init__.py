"""flexsched: write a tensor computation as math; analyse, schedule and tune it without templates."""

from .errors import DefinitionError, EvaluationError, FlexschedError, RegistryError
from .reference import evaluate
from .expr import Expr, IterVar
from .functions import (abs, all_of, any_of, cast, const, exp, if_then_else, log, max, min, select,
                        sqrt, sum, tanh)
from .tensor import Tensor, compute, placeholder, reduce_axis

from .version import __version__


def optimize(task, target="llvm", trials=100, method="q", log=None, **options):
    """Tune `task` (a Task or (name, *args)) on `target`: a TuneResult with the best config, its
    seconds and GFLOPS, a built kernel (CPU) and the history. See explore.optimize.optimize."""
    from explore.optimize import optimize as run  # torch and the back ends load only when tuning

    return run(task, target, trials=trials, method=method, log=log, **options)


__all__ = [
    "DefinitionError", "EvaluationError", "FlexschedError", "RegistryError",
    "Expr", "IterVar", "Tensor",
    "placeholder", "compute", "reduce_axis",
    "sum", "max", "min", "select", "if_then_else", "exp", "log", "sqrt", "abs", "tanh",
    "const", "cast", "all_of", "any_of",
    "evaluate", "optimize",
]

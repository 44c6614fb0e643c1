"""codegen's evaluators, registered by codegen.targets: measurement on a CPU or a GPU, and the static CPU and GPU models."""

from __future__ import annotations

import math
import os

from flexsched.evaluation import Evaluation, Evaluator, ExplorationError
from flexsched.target import get_target

from .worker import batch_size_for, side_by_side

# Searches time a candidate far slower than the best so far by its checked run alone (Measurer's slow_factor).
DEFAULT_SLOW_FACTOR = 3.0
# Untimed runs before a candidate's timed repeats, by device kind. A CPU kernel's checked run is as fast
# as its later ones (YOLO C10 with AVX2 code, 8 kernels twice: first over later runs, each after a
# yardstick repeat, median 0.998), so it is the first repeat; a GPU's first launch also loads its module.
DEFAULT_WARMUP = {"cpu": 0}


class MeasureEvaluator(Evaluator):
    """Builds, checks and times each point's kernel on the target's device, in codegen.measure's
    isolated worker (the CPU here, or a GPU through cupy). A task whose reference outputs cannot
    be computed in the worker's time or memory is an ExplorationError at its first evaluation.
    A candidate whose checked run takes slow_factor times the task's best so far is timed by that
    run alone (codegen.measure.Measurer); math.inf times every candidate in full. With builders > 1,
    a search's points come in batches of two per builder, built side by side and then timed one by one.
    With paired (the default), each candidate is timed in repeats alternating with the task's fastest
    kernel so far, and its time is relative to that kernel's (codegen.measure.Yardstick)."""

    name = "measure"

    def __init__(self, target="llvm", timeout_s=60.0, warmup=None, repeats=3, min_run_seconds=0.01, seed=0,
                 memory_limit_bytes=None, runner=None, slow_run_seconds=math.inf, reference_timeout_s=None,
                 slow_factor=DEFAULT_SLOW_FACTOR, builders=1, paired=True):
        from .measure import DEFAULT_REFERENCE_TIMEOUT_S, DEFAULT_RUNNER, Measurer

        self.target = get_target(target)
        if warmup is None:
            warmup = DEFAULT_WARMUP.get(self.target.kind, 1)
        # The worker starts on the first candidate, so creating an evaluator costs nothing.
        self._measurer = Measurer(timeout_s=timeout_s, warmup=warmup, repeats=repeats,
                                  min_run_seconds=min_run_seconds, seed=seed,
                                  memory_limit_bytes=memory_limit_bytes, runner=runner or DEFAULT_RUNNER,
                                  slow_run_seconds=slow_run_seconds, kinds=(self.target.kind,),
                                  reference_timeout_s=reference_timeout_s or DEFAULT_REFERENCE_TIMEOUT_S,
                                  slow_factor=slow_factor, builders=builders, paired=paired)
        self.batch_size = batch_size_for(self._measurer.builders)

    def check(self, task):
        """Refuse, before any candidate, a target this host cannot run or a task too large to check here."""
        from .backend import backend_for

        reason = backend_for(self.target).unavailable(self.target)
        if reason:
            instead = "; predict with the static CPU model instead (evaluator 'model', flexsched tune ... " \
                      "--evaluator model)" if self.target.kind == "cpu" else ""
            raise ExplorationError(f"cannot measure on {self.target.name}: {reason}{instead}")
        needed, available = checking_bytes(task), available_bytes()
        cap = self._measurer.memory_limit_bytes
        limit = min(available, cap) if cap else available
        if needed > limit:
            capped = f"; the measurement worker is capped at {cap / 2**30:.3g} GiB" if cap else ""
            raise ExplorationError(f"{task} needs about {needed / 2**30:.3g} GiB to measure (inputs and outputs, and "
                                   f"the float64 reference outputs it is checked against), but "
                                   f"{limit / 2**30:.3g} GiB are available ({available / 2**30:.3g} GiB free here"
                                   f"{capped})")

    def evaluate(self, task, space, points):
        from .measure import MeasureInput, ReferenceFailure

        inputs = [MeasureInput.of(task, space.schedule(point), self.target) for point in points]
        try:
            results = self._measurer.measure(inputs)
        except ReferenceFailure as err:  # no candidate of this task could be checked: stop the search
            raise ExplorationError(f"{err}, so no candidate can be checked") from None
        return [Evaluation(result.status, result.seconds, result.error, result.to_dict()) for result in results]

    def close(self):
        self._measurer.close()


class CpuEvaluator(MeasureEvaluator):
    """Measurement on this CPU (the host, or `llvm` with fewer features than the host has); by default
    a batch's candidates are built side by side, one builder per core this process may use."""

    name = "cpu"

    def __init__(self, target="llvm", **options):
        from .runtime import core_count

        options.setdefault("builders", core_count())
        super().__init__(target, **options)


class GpuModelEvaluator(Evaluator):
    """Predicts each point's time on a GPU with the static model (codegen.gpu_model): CUDA C
    compiled by nvcc to PTX, no GPU needed. Points come in batches, compiled side by side."""

    name = "gpu-model"
    judged_by = "modelled"
    batch_size = 8

    def __init__(self, target="cuda", workers=2):
        from flexsched.target import gpu_device

        self.target = get_target(target)
        self.device = gpu_device(self.target)
        self.workers = workers

    def evaluate(self, task, space, points):
        from .cuda_backend import modules_for
        from .gpu_model import ModelError, estimate

        modules = modules_for(task, [space.schedule(point) for point in points], self.target, self.workers)
        results = []
        for module in modules:
            if isinstance(module, Exception):
                results.append(Evaluation("build_error", math.inf, _one_line(module)))
                continue
            try:
                predicted = estimate(module, self.device)
            except ModelError as err:
                results.append(Evaluation("rejected", math.inf, _one_line(err)))
                continue
            results.append(Evaluation("ok", predicted.seconds, "", predicted.to_dict()))
        return results


class CpuModelEvaluator(Evaluator):
    """Predicts each point's time on a CPU with the static model (codegen.cpu_model): the kernel
    lowered and compiled to assembly for the target's CPU, nothing run, so any CPU target can be
    tuned here. The compiler runs in worker processes (codegen.worker), so a build that crashes
    or hangs LLVM is a failed point, not a dead search. With workers > 1, a batch's points are
    priced side by side, two per worker."""

    name = "cpu-model"
    judged_by = "modelled"

    def __init__(self, target="llvm", timeout_s=120.0, memory_limit_bytes=None, workers=1):
        from .worker import Worker

        self.target = get_target(target)
        if self.target.kind != "cpu":
            raise ExplorationError(f"the CPU model prices CPU kernels, not {self.target.kind} ones ({self.target.name})")
        if workers < 1:
            raise ExplorationError(f"the CPU model needs at least one worker, got workers={workers}")
        self.timeout_s = timeout_s
        # Workers start on their first candidate, so creating an evaluator costs nothing.
        self._workers = [Worker(memory_limit_bytes, kinds=("cpu",), name="flexsched-cpu-model") for _ in range(workers)]
        self.batch_size = batch_size_for(workers)

    def evaluate(self, task, space, points):
        schedules = [space.schedule(point) for point in points]
        if len(self._workers) == 1 or len(schedules) < 2:
            return [self.estimate(task, schedule) for schedule in schedules]
        # LLVM's -O3 is single-threaded: each worker prices its share at once with the others.
        return side_by_side(self._workers, schedules, lambda worker, one: self._estimate_on(worker, task, one))

    def estimate(self, task, schedule):
        """The Evaluation of one schedule (a Schedule or its JSON): the predicted seconds and the
        model's figures, or the failure to lower or compile it."""
        return self._estimate_on(self._workers[0], task, schedule)

    def _estimate_on(self, worker, task, schedule):
        from .worker import WorkerFailure

        text = schedule if isinstance(schedule, str) else schedule.to_json()
        try:
            predicted = worker.call("codegen.cpu_model:estimate_in_worker", (task, text, self.target.to_dict()),
                                    self.timeout_s)
        except WorkerFailure as failure:
            status = failure.status if failure.status in ("timeout", "crash") else "build_error"
            if failure.reason.startswith("ModelError"):
                status = "rejected"
            return Evaluation(status, math.inf, _one_line(failure.reason))
        return Evaluation("ok", predicted["seconds"], "", predicted)

    def close(self):
        for worker in self._workers:
            worker.close()


def checking_bytes(task):
    """A lower bound of the memory measuring task takes: inputs and outputs, and the float64 reference outputs."""
    from .measure import task_bytes

    return task_bytes(task) + sum(math.prod(tensor.shape) * 8 for tensor in task.outputs)


def available_bytes():
    """Memory this machine can still give (MemAvailable), or its physical memory where that is unknown."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return math.inf


def _one_line(err):
    text = " ".join(f"{type(err).__name__}: {err}".split())
    return text if len(text) <= 400 else text[:397] + "..."

"""Measuring candidate schedules: build, check against the reference, then time, in a worker.

Every candidate runs in one persistent worker process (codegen.worker), one candidate at a time
(two at once would disturb each other's timings; so would building the next candidate while one is
timed, since kernels run on every core: a build beside them made YOLO kernels time 1.56x slower).
A batch of candidates can first be built side by side, one builder process per core (`builders`),
and then checked and timed one by one with every core idle again: LLVM's optimisation is most of
a candidate's time, and it is single-threaded. A
candidate that hangs is killed after timeout_s and one that crashes the worker (a segfault in
generated code, an abort in LLVM) is reported as such; either way the next candidate gets a fresh
worker, so one bad candidate never stops a sweep. The worker runs under an address-space limit, so
a memory blow-up is a MemoryError there rather than the machine swapping.

A candidate carries its computation (the task's tensors, pickled), so the worker needs neither the
registry nor the module that defined the task: an operator defined in a script, a notebook or
given as tensors is measured like a library one.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import math
import os
import pickle
import statistics
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from flexsched.errors import FlexschedError
from flexsched.registry import Task
from flexsched.target import Target, get_target

from .reference_dir import ReferenceDir
from .worker import Worker, WorkerFailure, describe_exception, load_function, one_line, side_by_side

STATUSES = ("ok", "build_error", "runtime_error", "wrong_answer", "timeout", "crash")
DEFAULT_RUNNER = "codegen.measure:run_candidate"
BUILDER = "codegen.measure:build_candidate"         # a builder's half of a candidate built side by side
PREBUILT_RUNNER = "codegen.measure:run_prebuilt"    # and the measurement worker's half
DEFAULT_REFERENCE_WRITER = "codegen.measure:write_reference"
# The numpy reference of a large task can take minutes; it runs once, so it gets far longer than a candidate.
DEFAULT_REFERENCE_TIMEOUT_S = 600.0
RTOL = {"float32": 1e-4, "float64": 1e-9}
MAX_RUNS_PER_REPEAT = 1_000_000
REFERENCE_CACHE_SIZE = 4
COMPARE_CHUNK = 1 << 15   # elements compared at a time: two float64 chunks fit in a core's L2 cache


# ---------------------------------------------------------------- values

@dataclass(frozen=True, init=False)
class MeasureInput:
    """One candidate: a task (its Task.ref() as the identity, and the Task itself pickled), a schedule
    (as JSON) and the target to build it for (as its capabilities' JSON); picklable and hashable."""

    task_ref_json: str
    schedule_json: str
    target_json: str
    task_pickle: bytes = field(compare=False, repr=False)   # the ref identifies it: equal refs, equal tasks

    def __init__(self, task, schedule_json=None, target="llvm"):
        if not isinstance(task, Task):
            raise TypeError(f"MeasureInput takes the Task itself, got {type(task).__name__} (a ref names no "
                            "computation the worker could build)")
        object.__setattr__(self, "task_ref_json", json.dumps(task.ref(), sort_keys=True))
        object.__setattr__(self, "schedule_json", _schedule_text(schedule_json))
        object.__setattr__(self, "target_json", json.dumps(get_target(target).to_dict(), sort_keys=True))
        object.__setattr__(self, "task_pickle", pickle.dumps(task, protocol=pickle.HIGHEST_PROTOCOL))

    @classmethod
    def of(cls, task, schedule=None, target="llvm"):
        """The input measuring this Task under this Schedule (or its JSON; None is the naive nest)."""
        return cls(task, schedule, target)

    @property
    def task_ref(self):
        """A fresh dict, so callers cannot change the frozen value through it."""
        return json.loads(self.task_ref_json)

    @property
    def task(self):
        """The Task, unpickled afresh (it holds only the DSL's values: no user module is imported)."""
        return pickle.loads(self.task_pickle)

    @property
    def target(self):
        return Target.from_dict(json.loads(self.target_json))

    def __repr__(self):
        return (f"MeasureInput(task_ref={self.task_ref_json}, schedule_json={self.schedule_json!r}, "
                f"target={self.target.name!r})")


def _schedule_text(schedule):
    """JSON text for a Schedule, its JSON, or None (the empty schedule)."""
    if schedule is None:
        return "[]"
    return schedule if isinstance(schedule, str) else schedule.to_json()


@dataclass(frozen=True)
class MeasureSettings:
    """How the worker times a candidate; sent with every candidate so runners see the same values."""

    # Untimed runs before the timed repeats, the checked run counting as the first. With 0, the checked
    # run is the first timed repeat where it lasts min_run_seconds (paired, after a yardstick repeat):
    # a run saved per candidate, 40-60 ms on YOLO C6 and C10 with AVX2 code.
    warmup: int = 1
    repeats: int = 5
    min_run_seconds: float = 0.01
    seed: int = 0
    # A candidate whose checked run takes longer than this cannot be a search's best: that run is
    # its time, and the search moves on sooner.
    slow_run_seconds: float = math.inf
    reference_dir: str = ""   # where the Measurer files each task's reference ("": evaluate it here)
    # Time each repeat of a candidate beside one of its task's fastest kernel so far (the yardstick).
    paired: bool = False


@dataclass(frozen=True)
class MeasureResult:
    """The outcome of one candidate; seconds is the median time per kernel run (inf unless ok).
    Timed against a yardstick (yardstick_seconds > 0), each repeat's time is the candidate's over the
    yardstick's in that pair, times yardstick_seconds (the yardstick's lower-quartile time).

    compile_seconds is the whole build; the *_seconds after `number` say where a candidate's time
    went, phase by phase (0 where a phase did not run, and in records written before they existed)."""

    status: str
    seconds: float = math.inf
    min_seconds: float = math.inf
    max_seconds: float = math.inf
    repeats: int = 0
    compile_seconds: float = 0.0
    error: str = ""
    number: int = 0  # kernel runs per timed repeat
    lower_seconds: float = 0.0         # lowering and the back end's loop-IR passes
    emit_seconds: float = 0.0          # the back end's source (LLVM IR)
    optimize_seconds: float = 0.0      # the compiler's optimisation (LLVM's -O3 passes)
    machine_code_seconds: float = 0.0  # object code made (or read from a cache) and loaded
    check_seconds: float = 0.0         # the checked run (after its yardstick repeat, if paired) and the comparison
    timing_seconds: float = 0.0        # warm-up, calibration and the timed repeats
    wall_seconds: float = 0.0          # the whole candidate as the Measurer saw it, worker round trip included
    kernel_cache: str = ""             # where the machine code came from: "" (compiled), "memory" or "disk"
    yardstick_seconds: float = 0.0     # the yardstick's time after its pairs (0: timed alone)

    @property
    def ok(self):
        return self.status == "ok"

    def to_dict(self):
        """Strict-JSON fields: infinite times become None (from_dict turns them back)."""
        return {key: (None if isinstance(value, float) and not math.isfinite(value) else value)
                for key, value in asdict(self).items()}

    @classmethod
    def from_dict(cls, data):
        """The result a to_dict() (or a runner) produced; missing times are infinite, missing phases 0."""
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        for name in ("seconds", "min_seconds", "max_seconds"):
            if known.get(name) is None:
                known[name] = math.inf
        return cls(**known)

    @classmethod
    def failure(cls, status, error, compile_seconds=0.0, **phases):
        return cls(status, compile_seconds=compile_seconds, error=one_line(error), **phases)


def build_phases(kernel):
    """The MeasureResult fields saying where a kernel's build went."""
    report = kernel.compile_report
    return {"lower_seconds": kernel.lower_seconds, "emit_seconds": report.emit_seconds,
            "optimize_seconds": report.optimize_seconds, "machine_code_seconds": report.machine_code_seconds,
            "kernel_cache": report.cached}


# ---------------------------------------------------------------- the parent side

class ReferenceFailure(FlexschedError, RuntimeError):
    """A task's reference outputs could not be computed within the worker's time or memory, so no
    candidate of it can be checked (one line naming the task)."""


class Measurer:
    """Measures candidates one at a time in a persistent, restartable worker (codegen.worker).

    Each task's inputs and reference outputs are computed once per seed, in the worker, under
    their own time limit (reference_timeout_s) rather than a candidate's, and kept in a file
    that workers started after a crash read instead of evaluating the reference again.

    A candidate whose checked run takes slow_run_seconds or longer, or slow_factor times the
    fastest time measured so far for its task and target, is timed by that run alone: a core's
    speed changes by up to 1.7x, so a run 3 times the best is of a kernel at least 1.7 times
    slower, which no search keeps, and timing it precisely would cost as much as a good one.

    With paired, each candidate's repeats alternate with repeats of its task's fastest kernel so far
    (codegen.measure.Yardstick), and its time is taken relative to that kernel's: a search compares
    candidates timed minutes apart, through phases of the core's speed."""

    def __init__(self, timeout_s=60.0, warmup=1, repeats=5, min_run_seconds=0.01, seed=0,
                 memory_limit_bytes=None, runner=DEFAULT_RUNNER, slow_run_seconds=math.inf, kinds=("cpu",),
                 reference_timeout_s=DEFAULT_REFERENCE_TIMEOUT_S, reference_writer=DEFAULT_REFERENCE_WRITER,
                 slow_factor=math.inf, builders=1, builder=BUILDER, paired=False):
        if timeout_s <= 0 or reference_timeout_s <= 0 or warmup < 0 or repeats < 1 or min_run_seconds < 0 \
                or not slow_factor >= 1:
            raise ValueError("need timeout_s > 0, reference_timeout_s > 0, warmup >= 0, repeats >= 1, "
                             "min_run_seconds >= 0 and slow_factor >= 1")
        load_function(runner)  # a misspelt runner fails here, not once per candidate
        load_function(reference_writer)
        load_function(builder)
        self.timeout_s = float(timeout_s)
        self.reference_timeout_s = float(reference_timeout_s)
        self.runner = runner
        self.reference_writer = reference_writer   # 'module:function' that computes and files a reference
        self.settings = MeasureSettings(warmup, repeats, min_run_seconds, seed, slow_run_seconds, paired=paired)
        self.slow_factor = float(slow_factor)
        self._fastest = {}           # (task, target) -> the fastest seconds measured so far
        # The worker starts on the first candidate, so creating a Measurer costs nothing.
        self._worker = Worker(memory_limit_bytes, kinds, name="flexsched-measure")
        # Processes that build a batch's candidates side by side with `builder` (only for the default
        # runner: a custom runner builds its own); each starts on its first candidate.
        self.builder = builder
        self._builders = [Worker(memory_limit_bytes, kinds, name=f"flexsched-build-{number}")
                          for number in range(int(builders))] if runner == DEFAULT_RUNNER and builders > 1 else []
        self._reference_dir = None   # a ReferenceDir, made for the first reference
        self._filed = set()          # reference files written by this Measurer's workers

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    @property
    def memory_limit_bytes(self):
        return self._worker.memory_limit_bytes

    @property
    def kinds(self):
        return self._worker.kinds

    @property
    def worker_pid(self):
        """The live worker's process id (None before the first candidate or after a failure)."""
        return self._worker.pid

    @property
    def reference_dir(self):
        """The folder holding the reference files (None before the first candidate, after close())."""
        return self._reference_dir.name if self._reference_dir else None

    @property
    def builders(self):
        """How many candidates of a batch are built at once (1: each is built where it is timed)."""
        return max(1, len(self._builders))

    def measure(self, inputs):
        """One MeasureResult per input, in order, measured one after another (built side by side
        first, with builders); ReferenceFailure if a task's reference outputs cannot be computed."""
        if len(inputs) < 2 or not self._builders:
            return [self.measure_one(measure_input) for measure_input in inputs]
        built = self._build_side_by_side(inputs)
        return [self._measure_built(measure_input, build) for measure_input, build in zip(inputs, built)]

    def _build_side_by_side(self, inputs):
        """Per input, (what build_candidate answered or a failed MeasureResult, wall seconds): the
        builders take the inputs in turn, all at once."""
        def build(builder, measure_input):
            started = time.perf_counter()
            try:
                answer = builder.call(self.builder, (measure_input,), self.timeout_s)
            except WorkerFailure as failure:
                answer = MeasureResult.failure(_FAILURE_STATUS[failure.status], failure.reason)
            return answer, time.perf_counter() - started

        return side_by_side(self._builders, inputs, build)

    def _measure_built(self, measure_input, build):
        """The MeasureResult of a candidate a builder built (or failed to build)."""
        answer, build_seconds = build
        if isinstance(answer, MeasureResult):
            return replace(answer, compile_seconds=build_seconds, wall_seconds=build_seconds)
        if isinstance(answer, dict):   # the build raised: build_candidate's failure result
            return replace(result_from_runner(answer), wall_seconds=build_seconds)
        lowered, artifact, phases = answer
        return self.measure_one(measure_input, runner=PREBUILT_RUNNER, extra=(lowered, artifact, phases),
                                already=build_seconds)

    def measure_one(self, measure_input, runner=None, extra=(), already=0.0):
        """Send one candidate to the worker and wait at most timeout_s for its result (runner: what
        the worker runs, with `extra` arguments; already: seconds spent on it before)."""
        settings = self._settings_with_reference(measure_input)
        workload = (measure_input.task_ref_json, measure_input.target_json)
        fastest = self._fastest.get(workload, math.inf)
        if fastest < math.inf and self.slow_factor < math.inf:
            settings = replace(settings, slow_run_seconds=min(settings.slow_run_seconds, self.slow_factor * fastest))
        started = time.perf_counter()
        try:
            payload = self._worker.call(runner or self.runner, (measure_input, settings, *extra), self.timeout_s)
        except WorkerFailure as failure:
            result = MeasureResult.failure(_FAILURE_STATUS[failure.status], failure.reason)
        else:
            result = result_from_runner(payload)
        if result.ok and result.seconds < fastest:
            self._fastest[workload] = result.seconds
        return replace(result, wall_seconds=already + time.perf_counter() - started)

    def _settings_with_reference(self, measure_input):
        """The settings to send with this candidate, once its task's reference is on file."""
        if self._reference_dir is None:
            self._reference_dir = ReferenceDir()
        settings = replace(self.settings, reference_dir=self._reference_dir.name)
        path = reference_file(settings, measure_input.task_ref_json)
        if path not in self._filed:
            try:
                self._worker.call(self.reference_writer, (measure_input, settings.seed, path),
                                  self.reference_timeout_s)
            except WorkerFailure as failure:
                raise ReferenceFailure(self._reference_failure(measure_input.task_ref, failure)) from None
            self._filed.add(path)
        return settings

    def _reference_failure(self, task_ref, failure):
        """One line: which task's reference failed, how, and under which limit."""
        task = f"{task_ref['name']}({', '.join(map(str, task_ref['args']))})"
        what = f"the reference outputs of {task} (seed {self.settings.seed})"
        if failure.status == "timeout":
            return f"{what} did not finish within {self.reference_timeout_s:g} s"
        limit = self.memory_limit_bytes
        cap = f" (the worker's memory is capped at {limit / 2**30:g} GiB)" if limit else ""
        if failure.status == "crash":
            return f"{what} crashed the measurement worker: {failure.reason}{cap}"
        return f"{what} could not be computed: {failure.reason}{cap}"

    def close(self):
        """Stop the workers and delete the reference files; a later measure() starts afresh."""
        self._worker.close()
        for builder in self._builders:
            builder.close()
        directory, self._reference_dir = self._reference_dir, None
        self._filed.clear()
        if directory is not None:
            directory.cleanup()


_FAILURE_STATUS = {"timeout": "timeout", "crash": "crash", "error": "runtime_error"}


def result_from_runner(payload):
    """A MeasureResult from a runner's dict, refusing anything that is not one."""
    if not isinstance(payload, dict) or payload.get("status") not in STATUSES:
        return MeasureResult.failure("runtime_error", f"runner returned {payload!r:.200}, not a result dict")
    return MeasureResult.from_dict(payload)


# ---------------------------------------------------------------- the default runner

_references = OrderedDict()  # reference file, or (task key, seed) -> (inputs, reference outputs), in this worker


def run_candidate(measure_input, settings):
    """Build, check every output against the reference, then time; a result dict (see MeasureResult)."""
    from codegen.kernel import build

    started = time.perf_counter()
    try:
        task = measure_input.task
        kernel = build(task, measure_input.schedule_json, measure_input.target)
    except Exception as err:  # noqa: BLE001
        return MeasureResult.failure("build_error", describe_exception(err),
                                     time.perf_counter() - started).to_dict()
    compile_seconds = time.perf_counter() - started
    path = reference_file(settings, measure_input.task_ref_json)
    return check_and_time(task, kernel, settings, compile_seconds, path, _workload(measure_input)).to_dict()


def build_candidate(measure_input):
    """(Lowered, the back end's artifact, build phases) of a candidate, or a build_error result dict:
    a builder's half of a candidate built side by side with others."""
    from codegen.backend import backend_for
    from codegen.kernel import lower_for

    started = time.perf_counter()
    try:
        target = measure_input.target
        _, lowered = lower_for(measure_input.task, measure_input.schedule_json, target)
        lower_seconds = time.perf_counter() - started
        artifact, report = backend_for(target).compile_artifact_with_report(lowered.func, target)
    except Exception as err:  # noqa: BLE001
        return MeasureResult.failure("build_error", describe_exception(err), time.perf_counter() - started).to_dict()
    return lowered, artifact, {"lower_seconds": lower_seconds, "report": report,
                               "build_seconds": time.perf_counter() - started}


def run_prebuilt(measure_input, settings, lowered, artifact, phases):
    """Load a candidate a builder built, then check and time it as run_candidate does."""
    from codegen.backend import backend_for
    from codegen.kernel import Kernel
    from flexsched.schedule import Schedule

    started = time.perf_counter()
    try:
        task, target = measure_input.task, measure_input.target
        backend = backend_for(target)
        kernel = Kernel(task, Schedule.from_json(measure_input.schedule_json), lowered,
                        backend.load_artifact(artifact, target), target, backend)
    except Exception as err:  # noqa: BLE001
        return MeasureResult.failure("build_error", describe_exception(err),
                                     phases["build_seconds"] + time.perf_counter() - started).to_dict()
    loading = time.perf_counter() - started
    report = phases["report"]
    kernel.lower_seconds = phases["lower_seconds"]
    kernel.compile_report = replace(report, machine_code_seconds=report.machine_code_seconds + loading)
    path = reference_file(settings, measure_input.task_ref_json)
    return check_and_time(task, kernel, settings, phases["build_seconds"] + loading, path,
                          _workload(measure_input)).to_dict()


def check_and_time(task, kernel, settings, compile_seconds, reference_path="", workload=None):
    """A wrong answer is a failure, never a time: check first, then time (on the same arrays, in
    the kernel's memory); with settings.paired, against the workload's yardstick (see Yardstick)."""
    phases = build_phases(kernel)
    inputs, references = reference_for(task, settings.seed, reference_path)
    backend = kernel.backend
    unavailable = backend.unavailable(kernel.target)
    if unavailable:
        return MeasureResult.failure("runtime_error", unavailable, compile_seconds, **phases)
    yardstick = _yardsticks.get(workload) if settings.paired else None
    checking = time.perf_counter()
    try:
        arrays = kernel.arguments(inputs)
        # The yardstick's half of the first pair, where the checked run may be its other half.
        against = yardstick.time_repeat() if yardstick and checked_run_may_count(settings, yardstick) else None
        first_run_seconds = backend.time_runs(lambda: kernel(*arrays), 1)
        outputs = [backend.to_host(array) for array in arrays[len(inputs):]]
    except Exception as err:  # noqa: BLE001
        return MeasureResult.failure("runtime_error", describe_exception(err), compile_seconds, **phases)
    mismatch = compare_outputs(outputs, references, [t.name for t in task.outputs])
    phases["check_seconds"] = time.perf_counter() - checking
    if mismatch:
        return MeasureResult.failure("wrong_answer", mismatch, compile_seconds, **phases)
    timing = time.perf_counter()
    try:
        per_run, number = time_kernel(kernel, arrays, settings, first_run_seconds, yardstick, against)
        if settings.paired and len(per_run) == settings.repeats:
            per_run, crowned = settle_yardstick(kernel, arrays, number, per_run, yardstick)
            if crowned is not None:
                _keep_yardstick(workload, crowned, task)
    except Exception as err:  # noqa: BLE001
        return MeasureResult.failure("runtime_error", describe_exception(err), compile_seconds, **phases)
    phases["timing_seconds"] = time.perf_counter() - timing
    return MeasureResult("ok", statistics.median(per_run), min(per_run), max(per_run), len(per_run), compile_seconds,
                         "", number, yardstick_seconds=yardstick.seconds if yardstick else 0.0, **phases)


def reference_file(settings, task_ref_json):
    """Where a Measurer files the task's inputs and reference outputs for settings.seed ('' when
    the settings name no folder)."""
    if not settings.reference_dir:
        return ""
    digest = hashlib.sha256(f"{task_ref_json}\n{settings.seed}".encode()).hexdigest()[:32]
    return os.path.join(settings.reference_dir, f"{digest}.npz")


def write_reference(measure_input, seed, path):
    """Evaluate the inputs and reference outputs of a candidate's task for seed and file them at path
    (the Measurer runs this in the worker, once per task and seed, under its own time limit)."""
    task = measure_input.task
    inputs, references = evaluate_reference(task, seed)
    partial = f"{path}.partial"   # renamed when complete: a killed writer leaves no half-written file
    with open(partial, "wb") as out:
        np.savez(out, *inputs, *references)
    os.replace(partial, path)
    _remember(path, (inputs, references))


def evaluate_reference(task, seed):
    """(inputs, reference outputs) of a task for seed, evaluated here (it is slow)."""
    inputs = task.random_inputs(seed)
    return inputs, [np.asarray(ref) for ref in task.evaluate(*inputs)]


def reference_for(task, seed, path=""):
    """Inputs and reference outputs, read from the file at path (evaluated here without one), and
    kept for the next candidates of this worker."""
    key = path or (task.key, seed)
    if key in _references:
        _references.move_to_end(key)
        return _references[key]
    if not path:
        return _remember(key, evaluate_reference(task, seed))
    with np.load(path, allow_pickle=False) as stored:
        arrays = [stored[f"arr_{index}"] for index in range(len(stored.files))]
    count = len(task.inputs)
    return _remember(key, (arrays[:count], arrays[count:]))


def _remember(key, reference):
    _references[key] = reference
    while len(_references) > REFERENCE_CACHE_SIZE:
        _references.popitem(last=False)
    return reference


def checked_run_may_count(settings, yardstick):
    """Whether a candidate's checked run may be its first timed repeat: no warm-up asked for, and
    a yardstick (if any) whose repeat is one run, as the candidate's must then be."""
    return settings.warmup == 0 and (yardstick is None or yardstick.number == 1)


def time_kernel(kernel, arrays, settings, first_run_seconds, yardstick=None, against=None):
    """Per-run seconds of each repeat, and the runs per repeat chosen so a repeat lasts at least
    min_run_seconds; with a yardstick, each repeat is paired with one of the yardstick's and its
    seconds are the candidate's over the yardstick's, times yardstick.seconds, and the repeats stop
    once the candidate is settled as slower than the yardstick (_settled_slower).

    The checked run is the first warm-up run, and its time (or the fastest of the warm-up runs)
    sets the runs per repeat; a first repeat that still falls short of min_run_seconds is
    discarded and timed again with more runs. Without warm-up, a checked run that lasts
    min_run_seconds is the first repeat instead, paired with the yardstick repeat `against` that ran
    just before it (alone where there is no yardstick). A candidate whose checked run took
    slow_run_seconds or longer is timed by that run alone: it cannot be a search's best, and another
    run of it costs as much as timing a good candidate whole."""
    if first_run_seconds >= settings.slow_run_seconds:
        return [_scaled(first_run_seconds, yardstick, against)], 1
    fastest = first_run_seconds
    for _ in range(settings.warmup - 1):
        fastest = min(fastest, _time_repeat(kernel, arrays, 1))
    number = runs_per_repeat(fastest, settings.min_run_seconds)
    with _collection_paused():
        per_run = []
        if settings.warmup == 0 and number == 1 and (yardstick is None or against is not None):
            per_run.append(_scaled(first_run_seconds, yardstick, against))
            if yardstick and _settled_slower(per_run, yardstick.seconds, settings.repeats):
                return per_run, number
        while len(per_run) < settings.repeats:
            seconds, scaled = _paired_repeat(kernel, arrays, number, yardstick)
            needed = runs_per_repeat(seconds, settings.min_run_seconds)
            if not per_run and needed > number:   # the warm-up runs were slower than the kernel is
                number = needed
                continue
            per_run.append(scaled)
            if yardstick and _settled_slower(per_run, yardstick.seconds, settings.repeats):
                break
        return per_run, number


def _settled_slower(per_run, yardstick_seconds, repeats):
    """Whether a paired candidate's remaining repeats can be skipped: its latest is CLEARLY_SLOWER
    than the yardstick, or more than half of all its repeats are already at or above the yardstick's
    time, so their median would be too and it cannot become the yardstick (the rest would only refine
    the time of a kernel that is not the best; on YOLO C6 and C10, 30-45 ms a run, two runs each)."""
    slower = sum(1 for seconds in per_run if seconds >= yardstick_seconds)
    return per_run[-1] > CLEARLY_SLOWER * yardstick_seconds or slower > repeats // 2


@contextlib.contextmanager
def _collection_paused():
    """No garbage collection inside: one during a repeat would be charged to the kernel."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _paired_repeat(kernel, arrays, number, yardstick):
    """(the candidate's seconds per run in one repeat, the same on the yardstick's scale);
    (seconds, seconds) without a yardstick.

    The yardstick's repeat comes first, so each kernel starts its repeat on the caches the other
    left (a candidate timed straight after its checked run would start warm, the yardstick cold)."""
    if yardstick is None:
        seconds = _time_repeat(kernel, arrays, number)
        return seconds, seconds
    against = yardstick.time_repeat()
    seconds = _time_repeat(kernel, arrays, number)
    return seconds, _scaled(seconds, yardstick, against)


def _scaled(seconds, yardstick, against):
    """A candidate's seconds on the yardstick's scale, given the yardstick's repeat beside them
    (as they are without one)."""
    return seconds if yardstick is None or against is None else seconds * yardstick.seconds / against


def runs_per_repeat(run_seconds, min_run_seconds):
    """Enough runs that one repeat lasts min_run_seconds, at least one."""
    if run_seconds <= 0:
        return MAX_RUNS_PER_REPEAT if min_run_seconds > 0 else 1
    return max(1, min(MAX_RUNS_PER_REPEAT, math.ceil(min_run_seconds / run_seconds)))


def _time_repeat(kernel, arrays, number):
    return kernel.backend.time_runs(lambda: kernel(*arrays), number)


# ---------------------------------------------------------------- the yardstick

# Tasks whose arrays take more than this are timed alone: a yardstick keeps a second set alive.
YARDSTICK_MAX_BYTES = 256 * 2**20
YARDSTICKS_KEPT = 2
YARDSTICK_SAMPLES = 64   # the latest repeats a yardstick's time is taken from
# A candidate this many times slower than the yardstick in a paired repeat is timed no further (the
# first such repeat is usually its first): it is not the best, and only a best needs the precision of
# three. (YOLO C1, two
# kernels, 60 samples: one paired repeat's ratio was 0.95-1.10 of the median between the 10th and
# 90th percentiles, 0.89-1.16 at the extremes; the median of three 0.95-1.06 and 0.85-1.15.)
CLEARLY_SLOWER = 1.1
_yardsticks = OrderedDict()   # (task ref, target) JSON -> Yardstick, in this worker


@dataclass
class Yardstick:
    """A task's fastest kernel timed in this worker so far, on its arrays, and its own repeats' times.

    A core's speed changes for seconds at a time, so a candidate timed alone can look 1.6x slower
    than it is; each of its repeats is paired with one of the yardstick's, which a slow phase slows
    alike, and its time is the ratio times the yardstick's. (YOLO C1, two kernels timed the search's
    way 60 times over a minute, twice: their ratio from separate timings spread 0.92-1.21 and
    0.94-1.13 between the 10th and 90th percentiles, from three paired repeats 0.98-1.04 and
    0.95-1.06.) The yardstick's time is the lower quartile of its own repeats so far, so the phases
    its pairs met average out, and no time is taken from another kernel's: with each yardstick's time
    the ratio to the one before times that one's, a search's yardsticks drifted 2-3x below the
    kernels' true times over 200 YOLO candidates, each crowned on a ratio a few percent low."""

    kernel: object
    arrays: list
    number: int        # runs per repeat
    samples: list      # seconds per run of each of its repeats, timed alone or paired

    @property
    def seconds(self):
        return sorted(self.samples)[(len(self.samples) - 1) // 4]

    def time_repeat(self):
        seconds = _time_repeat(self.kernel, self.arrays, self.number)
        self.samples.append(seconds)
        del self.samples[:-YARDSTICK_SAMPLES]
        return seconds


def settle_yardstick(kernel, arrays, number, per_run, yardstick):
    """(the candidate's per-run seconds, the Yardstick it becomes or None) after a full timing:
    per_run, times alone without a yardstick, paired with one otherwise.

    The task's first candidate becomes the yardstick with its own times. One that timed faster than
    the yardstick is timed again in fresh pairs, which give its time (the times that picked it are
    low by luck, the fastest of hundreds of noisy times) and stop as its first repeats would once
    they settle it as not faster (_settled_slower). If all of them ran and their median is faster
    too, their alone times make it the yardstick. (Crowning on the first times alone, an equal
    kernel became the yardstick half the time: on YOLO C6 and C10, 45-50 ms a run, a third of a
    search's candidates were timed again, 40 of C6's 65 crowned kernels then timing no faster than
    the one they replaced.)"""
    if yardstick is None:
        return per_run, Yardstick(kernel, arrays, number, list(per_run))
    if statistics.median(per_run) >= yardstick.seconds:
        return per_run, None
    alone_times, times = [], []
    with _collection_paused():
        while len(times) < len(per_run):
            alone, scaled = _paired_repeat(kernel, arrays, number, yardstick)
            alone_times.append(alone)
            times.append(scaled)
            if _settled_slower(times, yardstick.seconds, len(per_run)):
                break
    if len(times) < len(per_run) or statistics.median(times) >= yardstick.seconds:
        return times, None
    return times, Yardstick(kernel, arrays, number, alone_times)


def _workload(measure_input):
    return measure_input.task_ref_json, measure_input.target_json


def _keep_yardstick(workload, yardstick, task):
    """Make yardstick the workload's (the least recently used other is dropped past YARDSTICKS_KEPT)."""
    if workload is None or task_bytes(task) > YARDSTICK_MAX_BYTES:
        return
    _yardsticks[workload] = yardstick
    _yardsticks.move_to_end(workload)
    while len(_yardsticks) > YARDSTICKS_KEPT:
        _yardsticks.popitem(last=False)


def task_bytes(task):
    """Bytes of a task's inputs and outputs."""
    return sum(math.prod(tensor.shape) * np.dtype(tensor.dtype).itemsize for tensor in (*task.inputs, *task.outputs))


# ---------------------------------------------------------------- correctness

def tolerance(dtype, reference):
    """(rtol, atol) for comparing against reference; integers and bools must match exactly."""
    dtype = np.dtype(dtype).name
    if dtype not in RTOL:
        return 0.0, 0.0
    scale = 1.0
    for chunk in _chunks(np.asarray(reference)):
        finite = np.abs(chunk[np.isfinite(chunk)])
        if finite.size:
            scale = max(scale, float(finite.max()))
    return RTOL[dtype], RTOL[dtype] * scale


def _chunks(array):
    """A C-contiguous array's elements, flat, COMPARE_CHUNK at a time."""
    flat = np.ascontiguousarray(array).reshape(-1)
    return (flat[begin:begin + COMPARE_CHUNK] for begin in range(0, flat.size, COMPARE_CHUNK))


def _all_good(output, reference, rtol, atol):
    """Whether every element of output matches reference (compare_array's test), a chunk at a time:
    small temporaries stay in cache, where whole-array ones cost page faults on every candidate."""
    with np.errstate(invalid="ignore", over="ignore"):
        for got, want in zip(_chunks(output), _chunks(reference)):
            got, want = got.astype(np.float64), want.astype(np.float64)
            close = np.abs(got - want) <= atol + rtol * np.abs(want)
            if not (close | (got == want) | (np.isnan(got) & np.isnan(want))).all():
                return False
    return True


def _clearly_good(output, reference):
    """Whether output is within half compare_array's tolerance everywhere, judged in the arrays' own
    float type in one pass (YOLO C6's 6.4 MB output: 1.3 ms, against 9 for the exact test); False, so
    that the exact test decides, for other types, non-finite values or a larger error."""
    dtype = np.dtype(reference.dtype)
    if dtype.name not in RTOL or output.dtype != dtype:
        return False
    largest_error = largest_value = 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        for got, want in zip(_chunks(output), _chunks(reference)):
            error, value = float(np.abs(got - want).max(initial=0)), float(np.abs(want).max(initial=0))
            if not (math.isfinite(error) and math.isfinite(value)):   # a NaN or an infinity
                return False
            largest_error, largest_value = max(largest_error, error), max(largest_value, value)
    return largest_error <= 0.5 * RTOL[dtype.name] * max(1.0, largest_value)


def compare_outputs(outputs, references, names):
    """'' when every output matches its reference, else one line about the first that does not."""
    if len(outputs) != len(references):
        return f"kernel produced {len(outputs)} outputs, the reference has {len(references)}"
    for output, reference, name in zip(outputs, references, names):
        mismatch = compare_array(np.asarray(output), np.asarray(reference))
        if mismatch:
            return f"output '{name}': {mismatch}"
    return ""


def compare_array(output, reference):
    """'' when output matches reference within tolerance; else the worst element and its error.

    A NaN in the output is wrong unless the reference has a NaN at the same place (a task
    taking log or sqrt of the random inputs legitimately produces NaN)."""
    if output.shape != reference.shape:
        return f"shape {output.shape}, expected {reference.shape}"
    if _clearly_good(output, reference):
        return ""
    rtol, atol = tolerance(reference.dtype, reference)
    if _all_good(output, reference, rtol, atol):
        return ""
    got, want = output.astype(np.float64), reference.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        error = np.abs(got - want)
        allowed = atol + rtol * np.abs(want)
        good = (got == want) | (np.isnan(got) & np.isnan(want)) | (error <= allowed)
    if good.all():
        return ""
    nan_in_output = np.isnan(got) & ~good
    if nan_in_output.any():
        index = np.unravel_index(int(np.argmax(nan_in_output)), got.shape)
        return f"NaN at {_index_text(index)} (reference {want[index]:.6g})"
    bad_error = np.where(good, -1.0, np.nan_to_num(error, nan=np.inf, posinf=np.inf))
    index = np.unravel_index(int(np.argmax(bad_error)), got.shape)
    limit = f"tolerance {allowed[index]:.1e}" if atol else "exact match required"
    return (f"max |error| {error[index]:.1e} at {_index_text(index)} ({limit}; got {got[index]:.6g}, "
            f"expected {want[index]:.6g}; {int((~good).sum())} of {good.size} elements wrong)")


def _index_text(index):
    return "(" + ", ".join(str(int(i)) for i in index) + ")"

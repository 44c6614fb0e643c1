"""The task registry (flexsched.registry): registering, looking up, building and re-creating tasks.

Covers registration of tasks defined here, argument binding (positional, keyword,
defaults, counts), lookup by name (case-insensitive, unknown names), the checks on what
a definition returns, Task.ref() round trips (in this process and in a fresh Python
process, for a library operator and for the user task of user_tasks.py), random inputs
and Task.evaluate's argument count.

Tasks registered by a test are removed again afterwards (see `isolated_registry`), so
other test modules see only the library. user_tasks.py is imported as the top-level
module `user_tasks`, with this directory put on sys.path for the test that needs it (and
on PYTHONPATH for child processes); tests/ needs no __init__.py for that.
"""

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import flexsched as fs
from flexsched import DefinitionError, RegistryError
from flexsched import registry
from flexsched import compute, placeholder, reduce_axis, sum
from flexsched.registry import (as_task, get_task, list_tasks, register_task, task_definition, task_from_ref,
                                task_from_tensors)

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
USER_MODULE = "user_tasks"


# ---------------------------------------------------------------- helpers

@pytest.fixture(autouse=True)
def isolated_registry():
    """Each test sees the library and USER_ROWSUM; whatever it registers is dropped after."""
    list_tasks()  # load the operator library before taking the snapshot
    saved = dict(registry._REGISTRY)
    yield
    registry._REGISTRY.clear()
    registry._REGISTRY.update(saved)


@pytest.fixture
def user_dir(monkeypatch):
    """This directory on sys.path, user_tasks not yet imported (and forgotten again after)."""
    monkeypatch.syspath_prepend(str(HERE))
    sys.modules.pop(USER_MODULE, None)
    yield HERE
    sys.modules.pop(USER_MODULE, None)


@pytest.fixture
def user_tasks(user_dir):
    """The imported user_tasks module: USER_ROWSUM is registered for this test."""
    return importlib.import_module(USER_MODULE)


def error_message(exc_type, build, *args, **kwargs):
    """The one-line message of the exc_type that build(*args, **kwargs) raises."""
    with pytest.raises(exc_type) as caught:
        build(*args, **kwargs)
    message = str(caught.value)
    assert "\n" not in message
    return message


def register_scale():
    """Register SCALE(N, factor=3.0): O[i] = A[i] * factor."""
    @register_task("SCALE")
    def scale(N, factor=3.0):
        """Scale a vector: O[i] = A[i] * factor."""
        A = fs.placeholder((N,), name="A")
        return A, fs.compute((N,), lambda i: A[i] * factor, name="O")
    return scale


def register_returning(name, build):
    """Register a one-argument task N whose definition returns build(N)."""
    def definition(N):
        return build(N)
    definition.__qualname__ = f"definition_{name}"  # a distinct function per task name
    register_task(name)(definition)


def vector_pair(N):
    """Two placeholders A, B of shape (N,) and O = A + B."""
    A, B = fs.placeholder((N,), name="A"), fs.placeholder((N,), name="B")
    return A, B, fs.compute((N,), lambda i: A[i] + B[i], name="O")


def fresh_process(ref, extra_path=()):
    """Run a new interpreter (cwd /, PYTHONPATH the repo plus extra_path) that re-creates the
    task from its JSON ref alone and prints its key, module and output sums on seeded inputs."""
    script = (
        "import json, sys\n"
        "from flexsched.registry import task_from_ref\n"
        "task = task_from_ref(json.loads(sys.argv[1]))\n"
        "outputs = task.evaluate(*task.random_inputs(seed=0))\n"
        "print(json.dumps({'key': [task.name, list(task.args)], 'module': task.module,\n"
        "                  'sums': [float(o.astype('float64').sum()) for o in outputs]}))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), *map(str, extra_path)]))
    return subprocess.run([sys.executable, "-c", script, json.dumps(ref)], env=env, cwd="/",
                          capture_output=True, text=True, timeout=60)


def run_in_fresh_process(ref, extra_path=()):
    """fresh_process's result as (key, module, output sums)."""
    done = fresh_process(ref, extra_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    return (result["key"][0], tuple(result["key"][1])), result["module"], result["sums"]


def output_sums(task, seed=0):
    return [float(o.astype("float64").sum()) for o in task.evaluate(*task.random_inputs(seed=seed))]


# ---------------------------------------------------------------- registering and building

def test_register_and_build_with_positional_and_keyword_args():
    register_scale()
    built = [get_task("SCALE", 4), get_task("SCALE", N=4), get_task("SCALE", 4, factor=3.0),
             get_task("SCALE", 4, 3.0)]
    assert {task.key for task in built} == {("SCALE", (4, 3.0))}
    task = built[1]
    assert task.name == "SCALE" and task.args == (4, 3.0)
    assert [t.name for t in task.inputs] == ["A"] and [t.name for t in task.outputs] == ["O"]
    assert task.module == __name__
    a = np.arange(4, dtype="float32")
    (out,) = task.evaluate(a)
    np.testing.assert_array_equal(out, a * 3)
    (out,) = get_task("SCALE", 4, factor=-0.5).evaluate(a)
    np.testing.assert_array_equal(out, a * -0.5)


def test_registered_definition_is_listed_and_described(user_tasks):
    scale = register_scale()
    definition = task_definition("SCALE")
    assert definition.func is scale
    assert definition.description == "Scale a vector: O[i] = A[i] * factor."
    assert definition.signature_text() == "N [factor=3.0]"
    assert definition in list_tasks()
    names = [d.name for d in list_tasks()]
    assert names == sorted(names) and {"GMM", "C2D", "SCALE", "USER_ROWSUM"} <= set(names)


def test_function_name_is_the_default_task_name():
    @register_task()
    def negate_vector(N):
        A = fs.placeholder((N,), name="A")
        return A, fs.compute((N,), lambda i: -A[i], name="O")
    assert get_task("negate_vector", 3).key == ("negate_vector", (3,))


def test_registering_the_same_function_again_is_allowed():
    scale = register_scale()
    register_task("SCALE")(scale)
    assert task_definition("SCALE").func is scale


def test_defaults_are_applied_so_equal_tasks_have_equal_keys():
    assert get_task("GMM", 4, 4, 4).key == get_task("GMM", M=4, K=4, N=4).key == ("GMM", (4, 4, 4))
    short, explicit = get_task("C2D", 1, 2, 5, 5, 3, 3), get_task("C2D", 1, 2, 5, 5, 3, 3, 1)
    assert short.args == explicit.args == (1, 2, 5, 5, 3, 3, 1, 0, 1)  # stride, pad, dilation
    assert short.key == explicit.key
    assert get_task("C2D", 1, 2, 5, 5, 3, 3, pad=1).args == (1, 2, 5, 5, 3, 3, 1, 1, 1)


def test_lookup_is_case_insensitive():
    task = get_task("gmm", 2, 3, 4)
    assert task.name == "GMM" and task.key == get_task("GMM", 2, 3, 4).key
    assert str(task) == "GMM(2, 3, 4)"
    assert task_definition("c2D").name == "C2D"
    assert task.ref()["name"] == "GMM"


def test_unknown_name_lists_the_registered_names():
    register_scale()
    message = error_message(RegistryError, get_task, "NO_SUCH_OP", 1)
    assert "unknown task 'NO_SUCH_OP'" in message and "registered" in message
    for definition in list_tasks():
        assert definition.name in message


def test_wrong_argument_count_names_the_parameters():
    message = error_message(RegistryError, get_task, "GMM", 4, 4)
    assert "GMM" in message and "M K N" in message and "takes 3" in message and "got 2" in message
    message = error_message(RegistryError, get_task, "C2D", *range(1, 11))
    assert "B C H W K k [stride=1] [pad=0] [dilation=1]" in message
    assert "6 to 9" in message and "got 10" in message
    message = error_message(RegistryError, get_task, "GMM", 4, 4, 4, X=1)
    assert "M K N" in message


def test_argument_of_an_unsupported_type_is_named():
    message = error_message(RegistryError, get_task, "GMM", [4], 4, 4)
    assert "'M'" in message and "list" in message


def test_definition_error_inside_a_definition_names_the_task():
    message = error_message(DefinitionError, get_task, "GMM", 0, 4, 4)
    assert message.startswith("task GMM:") and "'M'" in message


# ---------------------------------------------------------------- what a definition returns

def test_unreturned_input_is_named():
    register_returning("HIDDEN_INPUT", lambda N: vector_pair(N)[::2])  # A and O, not B
    message = error_message(DefinitionError, get_task, "HIDDEN_INPUT", 3)
    assert "HIDDEN_INPUT" in message and "input 'B'" in message and "not returned" in message


def test_two_read_inputs_with_the_same_name_are_rejected():
    def same_names(N):
        A, B = fs.placeholder((N,), name="A"), fs.placeholder((N,), name="A")
        return A, B, fs.compute((N,), lambda i: A[i] + B[i], name="O")
    register_returning("SAME_INPUT_NAMES", same_names)
    message = error_message(DefinitionError, get_task, "SAME_INPUT_NAMES", 3)
    assert "two different tensors" in message and "'A'" in message


def test_intermediate_named_like_an_input_is_rejected():
    def shadowing(N):
        A = fs.placeholder((N,), name="A")
        doubled = fs.compute((N,), lambda i: A[i] * 2.0, name="A")
        return A, fs.compute((N,), lambda i: doubled[i] + 1.0, name="O")
    register_returning("SHADOWING", shadowing)
    message = error_message(DefinitionError, get_task, "SHADOWING", 3)
    assert "two different tensors" in message and "'A'" in message


def test_returned_but_unread_input_with_a_duplicate_name_is_rejected():
    def unread_duplicate(N):
        A, unused = fs.placeholder((N,), name="A"), fs.placeholder((N,), name="A")
        O = fs.compute((N,), lambda i: A[i] * 2.0, name="O")
        return A, unused, O
    register_returning("UNREAD_DUPLICATE", unread_duplicate)
    message = error_message(DefinitionError, get_task, "UNREAD_DUPLICATE", 3)
    assert "'A'" in message


@pytest.mark.parametrize("returned", ["inputs-only", "empty"])
def test_definition_without_a_compute_is_rejected(returned):
    register_returning("NO_COMPUTE", lambda N: vector_pair(N)[:2] if returned == "inputs-only" else ())
    message = error_message(DefinitionError, get_task, "NO_COMPUTE", 3)
    assert "NO_COMPUTE" in message and "no compute" in message


def test_definition_returning_none_is_a_definition_error():
    def forgot_return(N):
        vector_pair(N)
    register_returning("FORGOT_RETURN", forgot_return)
    message = error_message(DefinitionError, get_task, "FORGOT_RETURN", 3)
    assert "FORGOT_RETURN" in message


def test_definition_returning_a_non_tensor_is_rejected():
    register_returning("RETURNS_ARRAY", lambda N: (*vector_pair(N), np.zeros(N)))
    message = error_message(DefinitionError, get_task, "RETURNS_ARRAY", 3)
    assert "RETURNS_ARRAY" in message and "ndarray" in message


def test_reregistering_a_different_function_under_a_taken_name_fails():
    register_scale()

    def other_scale(N):
        A = fs.placeholder((N,), name="A")
        return A, fs.compute((N,), lambda i: A[i], name="O")
    message = error_message(RegistryError, register_task("SCALE"), other_scale)
    assert "'SCALE'" in message and "already registered" in message and "register_scale" in message
    message = error_message(RegistryError, register_task("GMM"), other_scale)
    assert "flexsched.ops.linalg.gmm" in message
    assert task_definition("GMM").module == "flexsched.ops.linalg"  # the library's stays


# ---------------------------------------------------------------- references

@pytest.mark.parametrize("name, args", [
    ("GMM", (3, 4, 5)), ("C2D", (1, 2, 6, 6, 3, 3)), ("bcm", (8, 8, 2)),
    ("USER_ROWSUM", (3, 4)), ("USER_ROWSUM", (2, 5, 0.25)),
])
def test_ref_round_trips_through_json(user_tasks, name, args):
    task = get_task(name, *args)
    ref = json.loads(json.dumps(task.ref()))
    assert ref == {"name": task.name, "args": list(task.args), "module": task.module,
                   "fingerprint": task.fingerprint}
    again = task_from_ref(ref)
    assert again.key == task.key and again.module == task.module and again.fingerprint == task.fingerprint
    assert output_sums(again) == output_sums(task)


def test_ref_names_the_defining_module(user_tasks):
    assert get_task("GMM", 2, 2, 2).ref()["module"] == "flexsched.ops.linalg"
    assert get_task("USER_ROWSUM", 2, 2).ref()["module"] == user_tasks.__name__ == "user_tasks"


def test_task_from_ref_imports_the_defining_module(user_dir):
    ref = {"name": "USER_ROWSUM", "args": [2, 3, 2.0], "module": USER_MODULE}
    assert USER_MODULE not in sys.modules
    with pytest.raises(RegistryError, match="unknown task 'USER_ROWSUM'"):
        get_task("USER_ROWSUM", 2, 3)
    task = task_from_ref(ref)
    assert task.key == ("USER_ROWSUM", (2, 3, 2.0)) and USER_MODULE in sys.modules


def test_ref_with_an_unimportable_module_is_a_registry_error():
    ref = {"name": "GHOST_TASK", "args": [1], "module": "no_such_module_for_flexsched_tests"}
    message = error_message(RegistryError, task_from_ref, ref)
    assert "GHOST_TASK" in message and "no_such_module_for_flexsched_tests" in message


def test_library_task_is_recreated_in_another_process():
    task = get_task("C2D", 1, 2, 6, 6, 3, 3, 2, 1)
    key, module, sums = run_in_fresh_process(task.ref())
    assert key == task.key and module == "flexsched.ops.conv"
    assert sums == output_sums(task)


def test_user_task_is_recreated_in_another_process_by_module_name(user_tasks):
    task = get_task("USER_ROWSUM", 4, 6, 0.5)
    key, module, sums = run_in_fresh_process(task.ref(), extra_path=[HERE])
    assert key == task.key and module == "user_tasks"
    assert sums == output_sums(task)
    x, bias = task.random_inputs(seed=0)
    np.testing.assert_allclose(sums[0], float((x.astype("float64").sum(axis=1) * 0.5 + bias).sum()),
                               rtol=1e-5)
    # Without the directory on PYTHONPATH the module, and so the task, cannot be found.
    failed = fresh_process(task.ref())
    assert failed.returncode != 0
    assert "RegistryError" in failed.stderr and "cannot import its module 'user_tasks'" in failed.stderr


# ---------------------------------------------------------------- inputs and evaluation

def test_random_inputs_are_reproducible_per_seed_and_differ_across_seeds():
    task = get_task("BIL", 2, 3, 4, 5)
    first, again, other = task.random_inputs(seed=7), task.random_inputs(seed=7), task.random_inputs(seed=8)
    assert [a.shape for a in first] == [t.shape for t in task.inputs]
    assert all(a.dtype == np.float32 and a.min() >= -1 and a.max() < 1 for a in first)
    for a, b, c in zip(first, again, other):
        np.testing.assert_array_equal(a, b)
        assert not np.array_equal(a, c)
    for a, b in zip(task.random_inputs(), task.random_inputs(seed=0)):  # the default seed is 0
        np.testing.assert_array_equal(a, b)


def test_random_int_inputs_are_small_integers():
    def int_task(N):
        A = fs.placeholder((N, N), "int32", name="A")
        return A, fs.compute((N, N), lambda i, j: A[j, i] % 3, name="O")
    register_returning("INT_TASK", int_task)
    task = get_task("INT_TASK", 20)
    (a,) = task.random_inputs(seed=1)
    assert a.dtype == np.int32 and a.min() >= -4 and a.max() <= 4 and len(np.unique(a)) > 3
    np.testing.assert_array_equal(task.random_inputs(seed=1)[0], a)
    assert not np.array_equal(task.random_inputs(seed=2)[0], a)
    (out,) = task.evaluate(a)
    np.testing.assert_array_equal(out, a.T % 3)


def test_evaluate_with_the_wrong_number_of_arrays_names_the_inputs():
    task = get_task("GMM", 2, 3, 4)
    a, b = task.random_inputs()
    for arrays in [(a,), (a, b, b), ()]:
        message = error_message(RegistryError, task.evaluate, *arrays)
        assert "GMM" in message and "takes 2" in message and "A, B" in message
        assert f"got {len(arrays)}" in message


# ---------------------------------------------------------------- computations given as tensors

def _matmul(n, name="Y", scale=1.0):
    A, B = placeholder((n, n), name="A"), placeholder((n, n), name="B")
    k = reduce_axis(n, "k")
    return A, B, compute((n, n), lambda i, j: sum(A[i, k] * B[k, j] * scale, axis=k), name=name)


def test_a_computation_given_by_its_output_is_a_task():
    A, B, Y = _matmul(4)
    task = as_task(Y)
    assert task.name == "Y" and task.args == () and task.inputs == (A, B) and task.outputs == (Y,)
    np.testing.assert_allclose(task.evaluate(*task.random_inputs())[0],
                               task.random_inputs()[0] @ task.random_inputs()[1], rtol=1e-5)


def test_inputs_given_with_the_outputs_keep_their_order():
    A, B, Y = _matmul(4)
    assert task_from_tensors((B, A, Y)).inputs == (B, A)


def test_fingerprint_tells_computations_apart_and_is_stable():
    same = {as_task(_matmul(4)[2]).fingerprint for _ in range(2)}
    assert len(same) == 1
    assert as_task(_matmul(4, scale=2.0)[2]).fingerprint not in same
    assert as_task(_matmul(5)[2]).fingerprint not in same
    assert as_task(_matmul(4)[2]).key != as_task(_matmul(4, scale=2.0)[2]).key


def test_a_computation_ref_cannot_be_re_created_from_a_registry():
    with pytest.raises(RegistryError, match="given as tensors"):
        task_from_ref(as_task(_matmul(4)[2]).ref())


@pytest.mark.parametrize("bad", [42, [], ["GMM"], (1, 2)])
def test_as_task_refuses_what_is_not_a_computation(bad):
    with pytest.raises((RegistryError, DefinitionError)):
        as_task(bad)

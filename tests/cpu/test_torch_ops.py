"""Kernels as PyTorch operators: eager calls, inside an nn.Module, under torch.compile, several
outputs, registering again, and one-line errors naming the input."""

import numpy as np
import pytest
import torch

import flexsched
from analysis import analyze
from codegen.kernel import build
from flexsched.registry import get_task, task_from_tensors
from space import generate

pytestmark = pytest.mark.cpu


@pytest.fixture(scope="module")
def gmm_op():
    task = get_task("GMM", 32, 24, 40)
    space = generate(analyze(task), "llvm")
    kernel = build(task, space.schedule(space.random_point(3)))
    return flexsched.torch_op(kernel, name="test_gmm_32_24_40"), kernel


def inputs(seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(32, 24, generator=generator) - 0.5, torch.rand(24, 40, generator=generator) - 0.5


class Layer(torch.nn.Module):
    """A module that calls the operator between two torch operations."""

    def __init__(self, op):
        super().__init__()
        self.op = op
        self.weight = torch.nn.Parameter(torch.rand(24, 40) - 0.5, requires_grad=False)

    def forward(self, x):
        return torch.relu(self.op(x * 2.0, self.weight)) + 1.0


def test_eager_call_matches_torch(gmm_op):
    op, _ = gmm_op
    a, b = inputs()
    torch.testing.assert_close(op(a, b), a @ b, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(torch.ops.flexsched.test_gmm_32_24_40(a, b), a @ b, rtol=1e-4, atol=1e-4)
    transposed = (a.T.contiguous()).T  # not contiguous: the operator copies it
    torch.testing.assert_close(op(transposed, b), a @ b, rtol=1e-4, atol=1e-4)


def test_inside_a_module_eager_and_compiled(gmm_op):
    op, _ = gmm_op
    layer = Layer(op)
    a, _ = inputs(1)
    expected = torch.relu((a * 2.0) @ layer.weight) + 1.0
    torch.testing.assert_close(layer(a), expected, rtol=1e-4, atol=1e-4)
    compiled = torch.compile(layer)
    torch.testing.assert_close(compiled(a), expected, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(compiled(a + 1.0), torch.relu(((a + 1.0) * 2.0) @ layer.weight) + 1.0,
                               rtol=1e-4, atol=1e-4)


def test_registering_again(gmm_op):
    op, kernel = gmm_op
    assert flexsched.torch_op(kernel, name="test_gmm_32_24_40") is op  # same kernel, same name: same operator
    rebuilt = build(kernel.task, kernel.schedule)
    assert flexsched.torch_op(rebuilt, name="test_gmm_32_24_40") is op  # the same computation again
    with pytest.raises(ValueError, match="already registered for GMM\\(32, 24, 40\\)"):
        flexsched.torch_op(build(get_task("GMM", 8, 8, 8)), name="test_gmm_32_24_40")
    with pytest.raises(ValueError, match="must be an identifier"):
        flexsched.torch_op(kernel, name="not a name")


@pytest.mark.parametrize("arguments, error, message", [
    (lambda a, b: (a, b.double()), TypeError, "input 'B' of flexsched::test_gmm_32_24_40 has dtype float64, "
                                              "expected float32"),
    (lambda a, b: (a[:16], b), ValueError, "input 'A' .* has shape \\(16, 24\\), expected \\(32, 24\\)"),
    (lambda a, b: (a,), RuntimeError, "missing value for argument 'B'"),  # torch checks the schema first
])
def test_bad_inputs_name_the_input(gmm_op, arguments, error, message):
    op, _ = gmm_op
    with pytest.raises(error, match=message):
        op(*arguments(*inputs()))


def test_an_operator_with_two_outputs_from_a_task(tmp_path):
    x = flexsched.placeholder((4, 16), name="X")
    doubled = flexsched.compute((4, 16), lambda i, j: x[i, j] * 2.0, name="doubled")
    shifted = flexsched.compute((4, 16), lambda i, j: doubled[i, j] + 1.0, name="shifted")
    task = task_from_tensors([x, doubled, shifted], name="two_outputs")
    op = flexsched.torch_op(task, database=str(tmp_path / "db.jsonl"))  # built by flexsched.build: naive, never tuned
    assert op is flexsched.torch_op(task, database=str(tmp_path / "db.jsonl"))
    value = torch.rand(4, 16)
    first, second = op(value)
    np.testing.assert_allclose(first.numpy(), value.numpy() * 2.0, rtol=1e-6)
    np.testing.assert_allclose(second.numpy(), value.numpy() * 2.0 + 1.0, rtol=1e-6)

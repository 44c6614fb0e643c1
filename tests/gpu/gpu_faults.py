"""A measurement runner that faults the GPU on purpose, for test_cuda_runtime.py.

For a GMM task with M == 32 it first launches a kernel that writes through a null pointer (an
illegal address, which spoils the CUDA context for the rest of the process), then measures as
usual; the worker imports this module by name ("gpu_faults:illegal_address_runner").
"""

from codegen.measure import run_candidate

FAULTY = r'''
extern "C" __global__ void write_through_null(float *never) { *(volatile float *)0 = 1.0f; }
'''


def illegal_address_runner(measure_input, settings):
    ref = measure_input.task_ref
    if ref["name"] == "GMM" and ref["args"][0] == 32:
        import cupy

        kernel = cupy.RawKernel(FAULTY, "write_through_null")
        kernel((1,), (1,), (cupy.zeros(1, dtype="float32"),))
    return run_candidate(measure_input, settings)

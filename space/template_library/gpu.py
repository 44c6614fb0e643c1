"""GPU templates in the structure of TVM's CUDA dense and direct conv2d templates: each output
loop split four ways (block, virtual thread, thread, inner), blocks and threads fused and bound,
the output tile accumulated in registers, inputs staged in shared memory once per outer
reduction chunk, the inner chunk optionally unrolled. Caps keep every point launchable: threads
per block, a 64-accumulator register tile and the shared memory of the largest tiles."""

from flexsched.schedule import (Bind, CacheRead, CacheWrite, ComputeAt, ComputeInline, Fuse, Reorder, Schedule, Split,
                                Unroll)

from ..template import register_template

VTHREAD_CAP = 2
ACCUMULATORS = 64     # the register tile's elements: more spill (a third of 255 registers)


def _thread_cap(target, loops):
    """The largest power of two whose power of len(loops) fits in a block."""
    cap = 1
    while (2 * cap) ** loops <= target.max_threads_per_block:
        cap *= 2
    return cap


def _inner_cap(loops):
    """The per-loop inner factor that keeps vthreads x inner within the accumulator budget."""
    cap = 1
    while (VTHREAD_CAP * 2 * cap) ** loops <= ACCUMULATORS:
        cap *= 2
    return cap


def _bound_tiles(cfg, target, node, spatial, chunked, whole, inputs, chunk_cap, trivial=()):
    """Steps for a reducing `node`: spatial [(loop, extent)] tiled and bound, `chunked` reduce
    loops [(loop, extent)] split into (outer, chunk), `whole` reduce loops kept inside the chunk,
    `inputs` cached in shared memory per outer chunk; `trivial` loops (extent 1) join the blocks."""
    threads, inner = _thread_cap(target, len(spatial)), _inner_cap(len(spatial))
    local = f"{node}.local"
    levels = {name: cfg.split(f"tile_{name}", extent, 4, caps=(None, VTHREAD_CAP, threads, inner))
              for name, extent in spatial}
    chunks = {name: cfg.split(f"tile_{name}", extent, 2, caps=(None, chunk_cap)) for name, extent in chunked}
    unroll = cfg.choice("unroll_chunk", (0, 1))
    names = [name for name, _ in spatial]
    by_level = [[f"{name}.{level}" for name in names] for level in range(4)]
    by_level[0] = list(trivial) + by_level[0]
    steps = [CacheWrite(node, "local")] + [Split(node, name, factors) for name, factors in levels.items()]
    steps += [Reorder(node, tuple(sum(by_level, []))),
              Fuse(node, tuple(by_level[0])), Bind(node, "+".join(by_level[0]), "blockIdx.x")]
    steps += [Bind(node, loop, "vthread") for loop in by_level[1]]
    steps += [Fuse(node, tuple(by_level[2])), Bind(node, "+".join(by_level[2]), "threadIdx.x")]
    steps += [Split(local, name, factors) for name, factors in chunks.items()]
    outer_chunk = [f"{name}.0" for name in chunks]
    inner_chunk = [f"{name}.1" for name in chunks] + [name for name, _ in whole]
    steps += [Reorder(local, tuple(outer_chunk + inner_chunk + list(trivial) + names)),
              ComputeAt(local, node, "+".join(by_level[2]))]
    for tensor in inputs:
        steps += [CacheRead(tensor, "shared", (local,)), ComputeAt(f"{tensor}.shared", local, outer_chunk[-1])]
    if unroll:
        steps += [Unroll(local, loop) for loop in inner_chunk]
    return steps


@register_template("GMM", kinds=("gpu",), default=True)
def gmm_cuda(cfg, info, target):
    """CUDA GEMM: block/vthread/thread/inner tiles, register accumulators, A and B chunks in shared memory."""
    node = info.node("O")
    (i, j), (rk,) = node.spatial, node.reduce
    # The largest tiles: 2*32*4 rows and columns, 16 reduction steps: 2 x 16 KB of shared memory.
    steps = _bound_tiles(cfg, target, "O", [(i.name, i.extent), (j.name, j.extent)], [(rk.name, rk.extent)], [],
                         ("A", "B"), chunk_cap=16)
    return Schedule(tuple(steps))


@register_template("C2D", kinds=("gpu",), default=True)
def conv2d_direct_cuda(cfg, info, target):
    """CUDA direct convolution: padding inlined into the shared-memory loads, channel/row/column tiles bound."""
    node = info.node("O")
    spatial = [(loop.name, loop.extent) for loop in node.spatial if loop.extent > 1]
    trivial = [loop.name for loop in node.spatial if loop.extent == 1]
    reduce = {loop.name: loop for loop in node.reduce}
    window = [(loop.name, loop.extent) for name, loop in reduce.items() if name != "rc"]
    padded = any(other.name == "pad" for other in info.nodes)
    # The largest input chunk: 4 channels x (32 + k - 1)^2 pixels; filters 64 x 4 x k^2.
    steps = [ComputeInline("pad")] if padded else []
    steps += _bound_tiles(cfg, target, "O", spatial, [("rc", reduce["rc"].extent)], window, ("I", "W"),
                          chunk_cap=4, trivial=trivial)
    return Schedule(tuple(steps))

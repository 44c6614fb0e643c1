"""experiments/hot_loop.py: the hottest block of a kernel's assembly, and what it counts there."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))

from hot_loop import hottest_block  # noqa: E402

ASSEMBLY = """\
kernel:
\tpushq\t%rbp
\tvmovups\t%ymm0, 64(%rsp)
.LBB0_2:
\tvbroadcastss\t(%rdi), %ymm1
\tvfmadd231ps\t(%rsi), %ymm1, %ymm2
\tvfmadd231ps\t32(%rsi), %ymm1, %ymm3
\tvmovups\t%ymm4, 96(%rsp)
\tvfmadd231ps\t64(%rsi), %ymm1, %ymm4
\tvmovups\t96(%rsp), %ymm4
\taddq\t$4, %rdi
\tjne\t.LBB0_2
.LBB0_3:
\tvfmadd231ps\t%ymm5, %ymm6, %ymm7
\tretq
"""


def test_the_block_with_the_most_multiply_adds_is_counted_and_its_spills_with_it():
    assert hottest_block(ASSEMBLY) == {"instructions": 8, "multiply_adds": 3, "broadcasts": 1,
                                       "stack_references": 2}

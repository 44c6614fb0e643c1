"""Every code block of the README and docs/ runs: a page's python blocks as one script, in order,
then its shell blocks, in a fresh folder; a block that cannot run here says why in a tag.

Tags (an HTML comment on the line before the fence):
  <!-- doctest: slow -->            runs only with `-m slow`
  <!-- doctest: gpu -->             runs only where cupy sees a GPU
  <!-- doctest: skip REASON -->     never runs here, for the reason given (hours of measurement, ...)
Blocks in ```text (or with no language) are output samples and are not run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
RUNNABLE = {"python": "python", "sh": "sh", "bash": "sh", "console": "sh"}
TAG = re.compile(r"<!--\s*doctest:\s*(slow|gpu|skip)\s*(.*?)\s*-->")
BLOCK_TIMEOUT_S = 900


@dataclass(frozen=True)
class Block:
    page: Path
    line: int          # of the opening fence
    language: str      # "python" or "sh"
    tag: str           # "", "slow", "gpu" or "skip"
    reason: str
    code: str


def blocks_of(page):
    """The fenced blocks of a page with their language and tag."""
    lines = page.read_text().split("\n")
    blocks, index = [], 0
    while index < len(lines):
        opening = re.match(r"^(\s*)```(\w*)\s*$", lines[index])
        if not opening:
            index += 1
            continue
        start, language = index, opening.group(2).lower()
        end = next(i for i in range(start + 1, len(lines)) if lines[i].strip() == "```")
        previous = next((lines[i] for i in range(start - 1, -1, -1) if lines[i].strip()), "")
        tag = TAG.search(previous)
        blocks.append(Block(page, start + 1, language, tag.group(1) if tag else "", tag.group(2) if tag else "",
                            "\n".join(lines[start + 1:end])))
        index = end + 1
    return blocks


def _gpu_present():
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no cupy or no driver: no GPU
        return False


def _runs(block, slow):
    if block.language not in RUNNABLE or block.tag == "skip":
        return False
    if block.tag == "gpu":
        return _gpu_present()
    return block.tag == "" or (block.tag == "slow" and slow)


def _workspace(tmp_path):
    """A fresh folder laid out as the repository is for the pages' commands: a copy of experiments/
    (so what they write stays here), and docs/ and .venv/ as they are."""
    shutil.copytree(ROOT / "experiments", tmp_path / "experiments", ignore=shutil.ignore_patterns("results"))
    (tmp_path / "experiments" / "results").mkdir()
    for name in (".venv", "docs"):
        if (ROOT / name).exists():
            (tmp_path / name).symlink_to(ROOT / name)
    return dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                PYTHONPATH=str(ROOT), MPLBACKEND="Agg")


def _run_page(page, tmp_path, slow):
    runnable = [b for b in blocks_of(page) if _runs(b, slow)]
    if not runnable:
        pytest.skip(f"{page.relative_to(ROOT)}: no block runs here")
    env = _workspace(tmp_path)
    python = [b for b in runnable if b.language == "python"]
    if python:
        # One script, each block's lines where the page has them, so a traceback points at the page.
        script = tmp_path / "page.py"
        script.write_text("".join(f"# {b.page.name}:{b.line}\n{b.code}\n" for b in python))
        _check(subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=BLOCK_TIMEOUT_S), page, python[0].line)
    for block in (b for b in runnable if b.language != "python"):
        _check(subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.code], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S), page, block.line)


def _check(completed, page, line):
    if completed.returncode != 0:
        tail = "\n".join((completed.stdout + completed.stderr).strip().splitlines()[-25:])
        pytest.fail(f"{page.relative_to(ROOT)}:{line}: exit status {completed.returncode}\n{tail}")


def _page_id(page):
    return str(page.relative_to(ROOT))


def test_every_skipped_block_says_why():
    for page in PAGES:
        for block in blocks_of(page):
            assert block.tag != "skip" or block.reason, f"{_page_id(page)}:{block.line}: a skip tag needs a reason"


def test_command_blocks_are_marked_as_code():
    """A block of commands without a language would never run: it must say sh (or text for output)."""
    for page in PAGES:
        for block in blocks_of(page):
            if block.language == "" and re.search(r"^\s*(flexsched|python|\.venv/bin/|make) ", block.code, re.M):
                pytest.fail(f"{_page_id(page)}:{block.line}: commands in a block without a language")


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_page_runs(page, tmp_path):
    _run_page(page, tmp_path, slow=False)


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_page_runs_with_its_slow_blocks(page, tmp_path):
    if not any(b.tag == "slow" for b in blocks_of(page)):
        pytest.skip("no slow block")
    _run_page(page, tmp_path, slow=True)

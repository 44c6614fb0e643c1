"""The import graph follows the layers of ARCHITECTURE.md: a module imports its own layer and those below."""

# Every import statement counts, at module level and inside functions alike: a lazy import of a higher
# layer is still a dependency on it. What a lower layer needs from above reaches it by registration
# (flexsched.plugins), not by import. Only the public entry points, which live in flexsched/ for the
# user's sake, may import the layers above inside their functions; at module level they import
# flexsched's own modules only, so `import flexsched` stays light.

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("flexsched", "analysis", "space", "codegen", "fpga_model", "explore")

# The public entry points: the flexsched package itself and its API (optimize, build, @jit), the
# tuning database, the PyTorch operators, and the command line with what it runs (database
# commands, sweeps, reports, the library baseline).
ENTRY_POINTS = frozenset({
    "flexsched", "flexsched.api", "flexsched.autotuner", "flexsched.database", "flexsched.torch_ops",
    "flexsched.__main__", "flexsched.cli", "flexsched.cli_database", "flexsched.cli_cost_model", "flexsched.sweep", "flexsched.sweep_spec",
    "flexsched.report", "flexsched.library", "flexsched.sweep_ray",
})
CORE, ENTRY = 1, 6
LAYERS = {"flexsched": CORE, "analysis": 2, "space": 3, "codegen": 4, "fpga_model": 4, "explore": 5}
LAYER_NAMES = {1: "flexsched core", 2: "analysis", 3: "space", 4: "codegen/fpga_model", 5: "explore",
               6: "entry points"}
# Layer 4 holds two packages that do not import each other: HLS emission is codegen's, the FPGA model
# is fpga_model's, and neither needs the other.
# explore/ imports no back end or model (evaluators come from flexsched.plugins); from codegen it uses
# only what is the same for every back end: building a chosen kernel and checking and timing one.
EXPLORE_MAY_IMPORT = frozenset({"codegen.isolated_build", "codegen.measure"})


def module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name):
    base = ROOT.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def layer(name):
    top = name.split(".")[0]
    if top == "flexsched":
        return ENTRY if name in ENTRY_POINTS else CORE
    return LAYERS.get(top)


def imports(path):
    """(line, imported module, inside a function) for each import of a module of the packages."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            lazy = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                found.extend((child.lineno, alias.name, in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[:len(package.split(".")) - (child.level - 1)]
                    base = ".".join(anchor + ([child.module] if child.module else []))
                for alias in child.names:
                    target = f"{base}.{alias.name}"
                    found.append((child.lineno, target if is_module(target) else base, in_function))
            visit(child, lazy)

    visit(ast.parse(path.read_text(), str(path)), False)
    return [(line, target, lazy) for line, target, lazy in found if target.split(".")[0] in PACKAGES]


def violation(source, target, lazy):
    """Why source may not import target ('' when it may)."""
    here, there = layer(source), layer(target)
    if here == ENTRY:
        return "" if lazy or there in (CORE, ENTRY) else "an entry point imports the layers below lazily, in functions"
    if there > here:
        return "a lower layer reaches a higher one by registration (flexsched.plugins), not import"
    top, other = source.split(".")[0], target.split(".")[0]
    if {top, other} == {"codegen", "fpga_model"}:
        return "codegen and fpga_model do not import each other"
    if top == "explore" and other in ("codegen", "fpga_model") and target not in EXPLORE_MAY_IMPORT:
        return "explore gets evaluators and back ends from flexsched.plugins"
    return ""


def violations():
    lines = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            source = module_name(path)
            for line, target, lazy in imports(path):
                why = violation(source, target, lazy)
                if why:
                    where = f"{path.relative_to(ROOT)}:{line} imports {target}{' (in a function)' if lazy else ''}"
                    lines.append(f"{where}, layer {LAYER_NAMES[layer(source)]} -> {LAYER_NAMES[layer(target)]}: {why}")
    return lines


def test_imports_follow_the_layers():
    found = violations()
    assert not found, f"{len(found)} import(s) against the layers:\n" + "\n".join(found)


def test_the_checker_sees_lazy_and_relative_imports():
    def found(name):
        return {(lazy, target) for _, target, lazy in imports(ROOT / "flexsched" / name)}

    assert (True, "explore.optimize") in found("api.py") and (False, "flexsched.errors") in found("__init__.py")
    assert violation("space.generate", "explore.optimize", True)
    assert violation("codegen.hls", "fpga_model.model", False)
    assert violation("explore.evaluator", "codegen.cpu_backend", True)
    assert violation("flexsched.cli", "explore.optimize", False)
    assert not violation("flexsched.cli", "explore.optimize", True)
    assert not violation("explore.optimize", "codegen.isolated_build", True)

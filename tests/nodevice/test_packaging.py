"""pyproject.toml says what is true: the llvmlite floor holds here, every package ships, one version."""

import pathlib
import re
import tomllib

import setuptools

import flexsched
from flexsched.version import __version__

ROOT = pathlib.Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
TOP_LEVEL = ("flexsched", "analysis", "space", "explore", "codegen", "fpga_model")


def version_tuple(text):
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def test_the_installed_llvmlite_meets_the_stated_floor():
    import llvmlite

    (floor,) = [dep.split(">=", 1)[1] for dep in PYPROJECT["project"]["dependencies"] if dep.startswith("llvmlite")]
    assert version_tuple(llvmlite.__version__) >= version_tuple(floor), (llvmlite.__version__, floor)


def test_every_package_is_discovered():
    on_disk = {".".join(path.parent.relative_to(ROOT).parts) for top in TOP_LEVEL
               for path in (ROOT / top).rglob("__init__.py")}
    found = setuptools.find_packages(str(ROOT), include=PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"])
    assert set(found) == on_disk
    assert "space.template_library" in found and not any(name.startswith(("tests", "experiments")) for name in found)


def test_no_folder_of_modules_lacks_an_init():
    folders = [folder for top in TOP_LEVEL for folder in [ROOT / top, *(ROOT / top).rglob("*")]]
    missing = sorted(str(folder.relative_to(ROOT)) for folder in folders
                     if folder.is_dir() and folder.name != "__pycache__" and any(folder.glob("*.py"))
                     and not (folder / "__init__.py").exists())
    assert not missing  # setuptools would leave them out of the distribution


def test_one_version_licence_and_links():
    assert PYPROJECT["project"]["version"] == __version__ == flexsched.__version__
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "Copyright The flexsched authors" in text
    urls = PYPROJECT["project"]["urls"]
    assert set(urls) == {"Homepage", "Documentation", "Issues"}
    assert all(url.startswith("https://github.com/flexsched/flexsched") for url in urls.values())

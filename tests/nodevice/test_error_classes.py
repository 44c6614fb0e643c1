"""Every public exception class of the packages is a FlexschedError, so the CLI reports it in one line."""

import importlib
import inspect
import pkgutil

import pytest

from flexsched.errors import FlexschedError

PACKAGES = ("flexsched", "analysis", "space", "codegen", "fpga_model", "explore")


def modules():
    for package_name in PACKAGES:
        package = importlib.import_module(package_name)
        yield package_name
        for info in pkgutil.walk_packages(package.__path__, package_name + "."):
            if not info.name.endswith(".__main__"):  # running it is what importing it does
                yield info.name


def exception_classes():
    for name in modules():
        try:
            module = importlib.import_module(name)
        except ImportError:  # an optional dependency (cupy) that is absent here
            continue
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == name and issubclass(cls, Exception) and not issubclass(cls, Warning):
                yield cls


@pytest.mark.parametrize("cls", sorted(exception_classes(), key=lambda c: f"{c.__module__}.{c.__name__}"),
                         ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_public_exceptions_derive_from_flexsched_error(cls):
    if cls.__name__.startswith("_"):
        pytest.skip("private control flow, never leaves its module")
    assert issubclass(cls, FlexschedError), f"{cls.__module__}.{cls.__name__} bases: {cls.__bases__}"

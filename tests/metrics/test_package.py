"""The package's names are the functions and classes they say, whichever of its modules was imported first."""

import importlib
import inspect
import pkgutil
import subprocess
import sys

import metrics


def test_every_exported_name_is_a_function_or_class_after_all_modules_are_imported():
    for module in pkgutil.iter_modules(metrics.__path__):
        if module.name != "__main__":
            importlib.import_module(f"metrics.{module.name}")
    for name in metrics.__all__:
        value = getattr(metrics, name)
        assert not inspect.ismodule(value), f"metrics.{name} is a module: a submodule shadows the exported name"


def test_importing_a_submodule_first_does_not_shadow_an_exported_name():
    code = ("import importlib, inspect, pkgutil, metrics\n"
            "for m in pkgutil.iter_modules(metrics.__path__):\n"
            "    importlib.import_module('metrics.' + m.name) if m.name != '__main__' else None\n"
            "from metrics import *\n"
            "bad = [n for n in metrics.__all__ if inspect.ismodule(globals()[n])]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True)

"""lit configuration: run ansor-opt tests with FileCheck from PyPI."""
# ruff: noqa: F821  (lit injects `config`)

import importlib.util
import os
import sys

import lit.formats

config.name = "ansor-mlir"
config.test_format = lit.formats.ShTest()
config.suffixes = [".mlir"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.environment["PATH"] = os.pathsep.join(
    [os.path.dirname(sys.executable), os.environ.get("PATH", "")]
)
config.environment["HOME"] = os.environ.get("HOME", "/tmp")
repo = os.path.dirname(os.path.dirname(config.test_source_root))
# Test this checkout's package, whatever copy is installed.
config.environment["PYTHONPATH"] = os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH", "")]))
config.substitutions.append(("%ansor_irdl", os.path.join(repo, "ansor_mlir", "dialect", "ansor.irdl.mlir")))
config.substitutions.append(("ansor-opt", f"{sys.executable} -m ansor_mlir.cli"))
config.substitutions.append(("FileCheck", "filecheck"))
config.substitutions.append(("%python", sys.executable))
# Model inputs need the optional importers: `REQUIRES: onnx` tests run only where onnx is installed.
if importlib.util.find_spec("onnx") is not None:
    config.available_features.add("onnx")

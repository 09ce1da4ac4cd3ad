"""Benchmark harness, suite workloads and model metrics for ansor-mlir: not part of the installed library.

It lives at the repository root beside `ansor_mlir/` and is imported from there
(tests and `tools/` run from the root); `pip install -e ".[bench]"` brings its
optional contenders and report dependencies. Nothing in `ansor_mlir` imports it.
"""

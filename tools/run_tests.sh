#!/usr/bin/env bash
# Install ansor-mlir with its test extras (both model frontends, onnxruntime, the cluster engine and what the
# tools under test import), then run every check: ruff, deptry (imports declared), lit, pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -e ".[test]"
# qemu-user and IREE's aarch64 runtime for the aarch64 tests (best effort: without them those tests skip, and
# the skip reason names what is missing).
bash tools/install_qemu_aarch64.sh >/dev/null || echo "note: aarch64 emulation not installed; its tests skip"
python3 -m ruff check ansor_mlir ansor_bench tools tests examples
python3 -m deptry ansor_mlir ansor_bench tools tests/py examples --config pyproject.toml
lit -v tests/lit
# -rs: every skipped test is listed with its reason.
python3 -m pytest -q -rs tests/py

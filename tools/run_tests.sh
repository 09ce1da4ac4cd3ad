#!/usr/bin/env bash
# Install ansor-mlir with its test extras (onnx and onnxruntime included; torch is optional and its tests skip
# without it), then run the whole suite: ruff, lit, pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -e ".[test]"
# qemu-user and IREE's aarch64 runtime for the aarch64 tests (best effort: without them those tests skip).
bash tools/install_qemu_aarch64.sh >/dev/null || echo "note: aarch64 emulation not installed; its tests skip"
python3 -m ruff check ansor_mlir ansor_bench tools tests examples
lit -v tests/lit
python3 -m pytest -q tests/py

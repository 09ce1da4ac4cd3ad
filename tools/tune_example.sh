#!/usr/bin/env bash
# Install ansor-mlir and run the main job on the bundled example.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -e .
python3 tools/tune_example.py "$@"

"""What the test command installs is all the tests see, and the dependency check catches what it forgets."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CODE = ["ansor_mlir", "ansor_bench", "tools", "tests/py", "examples"]


def test_ci_runs_in_its_own_fresh_environment():
    """`.ci/run` makes a virtual environment for the run: the interpreter, its packages and the IREE tools on
    PATH all come from it, and no other site-packages is on the path."""
    venv = os.environ.get("ANSOR_CI_VENV")
    if not venv:
        pytest.skip("not run by .ci/run (ANSOR_CI_VENV unset): the environment is whatever ran pytest")
    venv = Path(venv).resolve()
    assert Path(sys.prefix).resolve() == venv and sys.prefix != sys.base_prefix
    outside = [p for p in sys.path if "site-packages" in p and not Path(p).resolve().is_relative_to(venv)]
    assert not outside, outside
    assert Path(sysconfig.get_paths()["purelib"]).resolve().is_relative_to(venv)
    for tool in ("iree-compile", "iree-run-module", "ansor-opt", "ansor-compile"):
        found = shutil.which(tool)
        assert found and Path(found).resolve().is_relative_to(venv), (tool, found)


def deptry(config: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "deptry", *CODE, "--config", str(config), "--no-ansi"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)


def test_every_third_party_import_is_declared():
    done = deptry(REPO / "pyproject.toml")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def test_an_undeclared_import_fails_the_check_and_is_named(tmp_path: Path):
    """scipy dropped from every extra: the check fails and names it (xgboost happens to pull it in, which must
    not count: the code imports it itself)."""
    text = (REPO / "pyproject.toml").read_text()
    assert '"scipy"' in text
    config = tmp_path / "pyproject.toml"
    config.write_text(re.sub(r'"scipy",\s*', "", text))
    done = deptry(config)
    assert done.returncode != 0 and "'scipy'" in done.stdout + done.stderr, done.stdout[-3000:]

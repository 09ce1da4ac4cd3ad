"""The README's commands, run as written: the quick start and the IREE-integration block.

Each ```sh block under the README's `## Quick start` and `## Use with iree-compile` headings is split into
commands (comments dropped, `\\` continuations joined) and run by bash, in order, in one scratch directory
where the bundled `examples/` and `tools/` are at hand; a `bash tools/...` script runs from the repository
root, where it changes directory anyway. Two kinds of line are not run, each for a stated reason: the test
command itself (it is what runs this test) and `pip install` (the environment running this test is the one
that command built). A documented command or flag that stops working fails here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
TESTED_SECTIONS = ("Quick start", "Use with iree-compile")
# Lines not run, and why.
NOT_RUN = {
    "bash tools/run_tests.sh": "the test command: it is what runs this test",
    "pip install": "the environment running this test was built by the test command's install",
}
TIMEOUT_S = 1800


def section(text: str, heading: str) -> str:
    """The README's text under `## heading`, up to the next heading of level one or two (outside code blocks,
    where `# ` starts a shell comment)."""
    lines, fenced, inside, found = [], False, False, False
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,2} ", line):
            inside = line.strip() == f"## {heading}"
            found = found or inside
            continue
        if inside:
            lines.append(line)
    assert found, f"README.md has no '## {heading}' section"
    return "".join(lines)


def shell_commands(markdown: str) -> list[str]:
    """The commands of the ```sh blocks: comment lines dropped, trailing comments kept (bash ignores them)."""
    commands: list[str] = []
    for block in re.findall(r"^```(?:sh|bash|shell)\s*\n(.*?)^```", markdown, re.M | re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        commands += [line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return commands


def skipped_because(command: str) -> str | None:
    for start, why in NOT_RUN.items():
        if re.sub(r"^(python3? -m )", "", command).startswith(start):
            return why
    return None


def test_the_tested_sections_have_commands():
    text = README.read_text()
    for heading in TESTED_SECTIONS:
        runnable = [c for c in shell_commands(section(text, heading)) if not skipped_because(c)]
        assert runnable, f"README.md '## {heading}' has no command to run"


def test_the_readme_commands_run_as_written(tmp_path: Path):
    text = README.read_text()
    for name in ("examples", "tools"):
        (tmp_path / name).symlink_to(REPO / name)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    ran = []
    for heading in TESTED_SECTIONS:
        for command in shell_commands(section(text, heading)):
            if skipped_because(command):
                continue
            cwd = REPO if command.startswith("bash tools/") else tmp_path
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=cwd, env=env,
                                  capture_output=True, text=True, timeout=TIMEOUT_S)
            assert done.returncode == 0, (f"README '## {heading}': `{command}` exited {done.returncode}:\n"
                                          f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
            ran.append(command)
    assert ran


@pytest.mark.parametrize("command, why", [
    ("bash tools/run_tests.sh", "test command"), ("pip install -e .", "environment"),
    ("python3 -m pip install -e '.[test]'", "environment"), ("ansor-compile m.onnx", None)])
def test_only_the_named_lines_are_left_out(command, why):
    reason = skipped_because(command)
    assert (reason is None) if why is None else (why in reason)

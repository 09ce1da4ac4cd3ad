"""The documentation as a user meets it: a README that reads in five minutes, docs in four parts whose links
resolve, reports that open with their summary, and a CLI reference generated from the code and never stale.

The README's tested blocks are run by `test_readme.py`.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = REPO / "docs"
PARTS = ("concepts", "guide", "reference", "reports")
HEADINGS = ("# ansor-mlir", "## Install", "## Quick start", "## Use with iree-compile", "## How it works",
            "## Key options", "## Results", "## Known limits", "## Development")
MAX_README_WORDS = 1500
SUMMARY_LABELS = ("What", "Where", "Result", "Caveat", "Regenerate")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def cli_reference():
    spec = importlib.util.spec_from_file_location("cli_reference", REPO / "tools" / "cli_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def outside_code(text: str) -> str:
    """Markdown without its fenced code blocks (where `#` starts a comment and `[x](y)` is not a link)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def headings(text: str) -> list[str]:
    return [line.strip() for line in outside_code(text).splitlines() if re.match(r"#{1,2} ", line)]


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def test_the_cli_reference_is_what_the_code_says():
    reference = cli_reference()
    current = reference.PAGE.read_text(encoding="utf-8")
    assert current == reference.render(), "docs/reference/cli.md is stale: run python tools/cli_reference.py"


def test_the_cli_reference_covers_every_script_and_pass():
    reference = cli_reference()
    text = reference.render()
    for script, _ in reference.console_scripts():
        assert f"\n## {script}\n" in text, f"{script} is missing from the CLI reference"
    for name, spec in reference.PASSES.items():
        assert f"\n### {name}\n" in text, f"pass {name} is missing from the CLI reference"
        for option in spec.options:
            assert f"| `{option.name}` |" in text, f"{name}'s option {option.name} is missing"


def test_the_readme_reads_in_five_minutes():
    words = len(README.read_text(encoding="utf-8").split())
    assert words <= MAX_README_WORDS, f"README.md has {words} words; at most {MAX_README_WORDS}"


def test_the_readme_has_its_sections_in_order():
    assert tuple(headings(README.read_text(encoding="utf-8"))) == HEADINGS


def test_the_quick_start_opens_with_the_two_promised_commands():
    text = README.read_text(encoding="utf-8")
    start = text.index("## Quick start")
    block = re.search(r"^```sh\n(.*?)^```", text[start:], re.M | re.S).group(1)
    commands = [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
    assert commands[:2] == ["bash tools/tune_example.sh --trials 32", "bash tools/run_tests.sh"]


def test_the_readme_names_no_commit():
    hashes = [w for w in re.findall(r"\b[0-9a-f]{7,40}\b", README.read_text(encoding="utf-8"))
              if re.search(r"\d", w) and re.search(r"[a-f]", w)]
    assert not hashes, f"README.md cites commits {hashes}: history goes to CHANGELOG.md or a report"


def test_docs_come_in_four_parts():
    assert sorted(p.name for p in DOCS.iterdir()) == list(PARTS)


def test_the_readme_links_every_guide_reference_and_concept_page():
    linked = {(REPO / target).resolve() for target in LINK.findall(outside_code(README.read_text(encoding="utf-8")))}
    for part in ("guide", "reference", "concepts"):
        for page in sorted((DOCS / part).glob("*.md")):
            assert page.resolve() in linked, f"README.md does not link {page.relative_to(REPO)}"


def test_the_architecture_page_names_the_layers_the_import_test_enforces():
    spec = importlib.util.spec_from_file_location("test_layers", REPO / "tests" / "py" / "test_layers.py")
    layers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(layers)
    rows = re.findall(r"^\| (\d+) \| (.*?) \|", (DOCS / "concepts" / "architecture.md").read_text(), re.M)
    documented = {int(level): {name.rstrip("/") for name in re.findall(r"`([^`]+)`", names)} for level, names in rows}
    enforced = dict(enumerate(set(names) for names in layers.LAYERS))
    assert documented == enforced, "docs/concepts/architecture.md's layer table differs from test_layers.LAYERS"


@pytest.mark.parametrize("page", [README, REPO / "CHANGELOG.md", *pages()], ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page: Path):
    for target in LINK.findall(outside_code(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        assert path.exists(), f"{page.relative_to(REPO)} links {target}, which does not exist"


@pytest.mark.parametrize("report", sorted((DOCS / "reports").glob("*.md")), ids=lambda p: p.name)
def test_each_report_opens_with_a_five_line_summary(report: Path):
    lines = report.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# ") and lines[1] == "", f"{report.name}: a title, then a blank line"
    summary = lines[2:7]
    for line, label in zip(summary, SUMMARY_LABELS, strict=True):
        assert line.startswith(f"- **{label}:** ") and len(line) > len(label) + 10, (
            f"{report.name}: summary line '{label}' missing or empty: {line!r}")
    assert lines[7] == "", f"{report.name}: the summary is five lines, then a blank line"

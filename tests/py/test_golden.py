"""Safety net: candidates frozen before the schedule redesign still render the same programs.

`golden/*.json` were written by `golden/make_golden.py` at the commit before
the redesign: per input and pinned target (an AVX-512 and an AVX2 CPU, so the
test is host-independent), every sketch, two seeded candidates each, and the
IREE configuration, transform strategy and tuning spec or library they
rendered to. Here each frozen candidate is read as a version-2 record would
be and rendered again; the programs are compared as canonicalized IR.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden"
sys.path.insert(0, str(GOLDEN))

from make_golden import TARGETS, canonical  # noqa: E402

from ansor_mlir.codegen.transform_strategy import render_strategy, strategy_name  # noqa: E402
from ansor_mlir.codegen.tuning_spec import render_library, render_spec  # noqa: E402
from ansor_mlir.core.schedule import Candidate, Family, Pack, Sketch  # noqa: E402
from ansor_mlir.frontend.task_extraction import extract_tasks  # noqa: E402
from ansor_mlir.space.resolve import render_config  # noqa: E402
from ansor_mlir.space.sketch_rules import generate_sketches  # noqa: E402

CASES = sorted(GOLDEN.glob("*.json"))


def as_frozen(sketch: Sketch) -> Sketch:
    """The sketch as the frozen candidates' traces replay it: they predate `Pack.block`, and a recorded trace
    without it transposes a packed panel in one block of `nr` columns."""
    return replace(sketch, steps=tuple(Pack(step.knobs) if isinstance(step, Pack) else step for step in sketch.steps))


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_frozen_candidates_render_the_same_programs(path: Path):
    golden = json.loads(path.read_text())
    target = TARGETS[golden["target"]]
    text = (GOLDEN / "inputs" / f"{golden['input']}.mlir").read_text()
    tasks = {t.key: t for t in extract_tasks(text, target, golden["input"])}
    for frozen in golden["tasks"]:
        task = tasks[frozen["key"]]
        sketches = generate_sketches(task, target)
        # Rules added since are appended to the rule list: the frozen sketches keep their indices.
        frozen_rules = [s["rules"] for s in frozen["sketches"]]
        assert [list(s.rules) for s in sketches][: len(frozen_rules)] == frozen_rules
        for item in frozen["candidates"]:
            sketch = as_frozen(sketches[item["sketch"]])
            candidate = Candidate.from_dict({"task": task.key, "sketch": item["sketch"], "values": item["values"]})
            what = f"{path.stem} {task.name} s{item['sketch']} {item['values']}"
            config = render_config(sketch, candidate, task)
            assert config.to_dict() == item["config"], what
            if sketch.family is Family.TRANSFORM:
                name = strategy_name(task, candidate)
                strategy = render_strategy(sketch, candidate, task, name)
                wrapped = "module attributes { transform.with_named_sequence } {\n" + strategy + "}\n"
                assert canonical(wrapped) == item["strategy"], what
                assert canonical(render_library([(task, name, strategy)])) == item["spec"], what
            else:
                assert canonical(render_spec([(task, config)])) == item["spec"], what

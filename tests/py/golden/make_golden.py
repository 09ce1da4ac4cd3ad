"""Freeze what candidates render to, before the schedule representation changes.

Run once (`python tests/py/golden/make_golden.py`) on the commit whose
behaviour is the reference; `test_golden.py` then checks that every later
version renders the same programs (compared as canonicalized IR: parsed and
printed by IREE's bindings, so SSA names and layout do not matter).

For each input under `inputs/` and each pinned target, every sketch of every
task gets two seeded random candidates; the golden file keeps the sketch
index, the rules, the knob values in the record format of that time
(version 2), and the IREE configuration, transform strategy and tuning spec
or library they rendered to.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[2]))

from ansor_mlir.codegen.transform_strategy import render_strategy, strategy_name  # noqa: E402
from ansor_mlir.codegen.tuning_spec import render_library, render_spec  # noqa: E402
from ansor_mlir.core.schedule import Family  # noqa: E402
from ansor_mlir.core.target import Target  # noqa: E402
from ansor_mlir.frontend.task_extraction import extract_tasks  # noqa: E402
from ansor_mlir.space.annotation import sample_candidate  # noqa: E402
from ansor_mlir.space.resolve import render_config  # noqa: E402
from ansor_mlir.space.sketch_rules import generate_sketches  # noqa: E402

TARGETS = {
    "znver4": Target(cpu="znver4", vector_bytes=64, l1_bytes=32 * 1024, l2_bytes=1024 * 1024,
                     l3_bytes=32 * 1024 * 1024, cores=2),
    "znver3": Target(cpu="znver3", vector_bytes=32, l1_bytes=32 * 1024, l2_bytes=512 * 1024,
                     l3_bytes=32 * 1024 * 1024, cores=2),
}
# znver3 (AVX2) only for the inputs whose sketches depend on the lane count the most.
CASES = [(p.stem, "znver4") for p in sorted((HERE / "inputs").glob("*.mlir"))] + [
    ("gmm_bias_relu", "znver3"), ("gmm_109", "znver3"), ("nrm", "znver3")]
SAMPLES = 2


def canonical(text: str) -> str:
    from ansor_mlir.mlir.context import new_context, parse_module

    return str(parse_module(text, "golden", new_context()))


def case(stem: str, target_name: str) -> dict:
    target = TARGETS[target_name]
    text = (HERE / "inputs" / f"{stem}.mlir").read_text()
    out = {"input": stem, "target": target_name, "tasks": []}
    for task in extract_tasks(text, target, stem):
        if not task.tunable:
            continue
        sketches = generate_sketches(task, target)
        rng = random.Random(7)
        entry = {"key": task.key, "name": task.name, "sketches": [], "candidates": []}
        for sketch in sketches:
            entry["sketches"].append({"index": sketch.index, "rules": list(sketch.rules), "family": sketch.family.value,
                                      "knobs": [k.name for k in sketch.knobs]})
            if not sketch.knobs:
                continue
            for _ in range(SAMPLES):
                candidate = sample_candidate(sketch, task, target, rng)
                if candidate is None:
                    continue
                config = render_config(sketch, candidate, task)
                item = {"sketch": sketch.index, "values": {k: list(v) for k, v in candidate.values},
                        "config": config.to_dict()}
                if sketch.family is Family.TRANSFORM:
                    name = strategy_name(task, candidate)
                    strategy = render_strategy(sketch, candidate, task, name)
                    item["strategy"] = canonical(
                        "module attributes { transform.with_named_sequence } {\n" + strategy + "}\n")
                    item["spec"] = canonical(render_library([(task, name, strategy)]))
                else:
                    item["spec"] = canonical(render_spec([(task, config)]))
                entry["candidates"].append(item)
        out["tasks"].append(entry)
    return out


def main() -> None:
    for stem, target_name in CASES:
        data = case(stem, target_name)
        path = HERE / f"{stem}.{target_name}.json"
        path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(path, sum(len(t["candidates"]) for t in data["tasks"]), "candidates")


if __name__ == "__main__":
    main()

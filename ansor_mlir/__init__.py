"""ansor-mlir: an Ansor-style auto-scheduler for linalg on IREE.

    import ansor_mlir
    result = ansor_mlir.tune("model.onnx", trials=64, log="tuned.jsonl")
    program = ansor_mlir.compile("model.onnx", log="tuned.jsonl")
    outputs = program(x)

The functions take the command line's option names as keywords (`threads=`, `time_budget=`, `batch_size=`);
`help(ansor_mlir.tune)` lists them all. Names are imported on first use, so `import ansor_mlir` stays cheap.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = [
    "AnsorError",
    "CompiledModel",
    "ModelSource",
    "Task",
    "TaskResult",
    "TuneOptions",
    "TuneResult",
    "apply_best",
    "compile",
    "emit_transform_library",
    "emit_tuning_spec",
    "extract_tasks",
    "load_model",
    "tune",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ansor_mlir import api

        return getattr(api, name)
    raise AttributeError(f"module 'ansor_mlir' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])

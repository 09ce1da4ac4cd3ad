"""The builder interface: compile candidates to programs that travel as bytes.

A builder takes `BuildInput`s (a task's flow-level module and a candidate)
or `ProgramBuildInput`s (a whole program from its source, with a tuning
spec) and answers with futures of `BuildResult`s (after TVM MetaSchedule's
`Builder`), so a build farm or a distributed engine can stand behind it.
A built program is the VM module's bytes and its entry function: a runner
on another host needs nothing else. Failures are data: a `BuildResult` with
an `ErrorKind`, never an exception.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from ansor_mlir.core.measure_result import ErrorKind
from ansor_mlir.core.task import IreeConfig


@dataclass(frozen=True)
class BuildInput:
    """One thing to compile: a task's flow-level module and a configuration for its root."""

    task_key: str
    flow_text: str
    root_index: int
    config: IreeConfig | None
    # A transform-dialect strategy (name, text) that is the dispatch's codegen.
    strategy: tuple[str, str] | None = None
    # The program's entry function (a task module's is `task`).
    function: str = "task"


@dataclass(frozen=True)
class ProgramBuildInput:
    """A whole user program, built from its source text as `ansor_mlir.compile` builds the tuned model.

    IREE compiles `source_text` with the target's flags and, when `spec_text`
    is given, that tuning spec (`--iree-codegen-tuning-spec-path`): one
    task's candidate, while every other dispatch, and the weights' layout
    transforms IREE hoists out of the program, build as IREE's default does.
    `timeout_s` replaces the builder's per-candidate limit: a model takes
    longer than one dispatch.
    """

    source_text: str
    function: str
    spec_text: str | None = None
    timeout_s: float | None = None
    # Built as for one thread (IREE's synchronous ABI, no fences): the program runs on `local-sync`, where the
    # fences cost microseconds per call and buy nothing (`tuning.device_choice.build_target`).
    one_thread: bool = False


@dataclass(frozen=True)
class BuiltProgram:
    """A compiled VM module (`.vmfb` bytes) and the function to call in it.

    A whole model keeps its weights out of the module: `parameters` is the
    `.irpa` archive the runtime serves as `parameter_scope` (empty for a task,
    whose constants are inline).
    """

    vmfb: bytes
    function: str
    parameters: bytes = field(default=b"", repr=False)
    parameter_scope: str = "model"


@dataclass(frozen=True)
class BuildResult:
    """A program, or why there is none (`error`, `message`); `compile_s` either way."""

    program: BuiltProgram | None
    error: ErrorKind
    message: str
    compile_s: float

    @property
    def ok(self) -> bool:
        return self.error == ErrorKind.NONE and self.program is not None


class Builder(ABC):
    """Compiles build inputs; `submit` returns at once, the future holds the result."""

    @abstractmethod
    def submit(self, item: BuildInput | ProgramBuildInput) -> Future[BuildResult]: ...

    def build(self, items: Sequence[BuildInput | ProgramBuildInput]) -> list[BuildResult]:
        """Submit all, wait for all: results in the order of `items`."""
        futures = [self.submit(item) for item in items]
        return [f.result() for f in futures]

    def close(self) -> None:
        """Release workers (a builder stays usable; it starts them again when needed)."""
        return None

    def __enter__(self) -> Builder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

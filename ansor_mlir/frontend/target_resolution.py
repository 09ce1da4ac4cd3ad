"""Resolve `cpu=host` (or a named CPU) to what IREE makes of it, as data.

IREE decides the CPU name, its features, the native vector size and the
stack limit that codegen works with; the search has to agree with it, so
they are read off the `#hal.executable.target` IREE builds for a tiny probe
module (`--compile-to=executable-sources`), not guessed from `/proc/cpuinfo`.
Named CPUs (`znver3`, `sapphirerapids`) resolve on any x86-64 host.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from iree.compiler import ir
from iree.compiler.dialects import iree_gpu

from ansor_mlir.core.gpu_target import GpuSpec, MmaShape
from ansor_mlir.core.target import ResolvedCpu, Target, enabled_features, parse_target
from ansor_mlir.errors import AnsorError
from ansor_mlir.mlir.context import new_context, parse_module
from ansor_mlir.mlir.iree_attributes import executable_target_config
from ansor_mlir.mlir.iree_compiler import first_error_line, run_tool

# The smallest module that gives IREE a dispatch, hence an executable target.
PROBE = """func.func @probe(%a: tensor<4xf32>) -> tensor<4xf32> {
  %r = arith.addf %a, %a : tensor<4xf32>
  return %r : tensor<4xf32>
}
"""
VARIANT = "hal.executable.variant"


@lru_cache(maxsize=16)
def resolve_cpu(backend: str, cpu: str, triple: str = "") -> ResolvedCpu:
    """What IREE resolves (backend, cpu, triple) to; asked once per process for each."""
    flags = Target(backend=backend, cpu=cpu, triple=triple).compile_flags()
    result = run_tool("iree-compile", [*flags, "--compile-to=executable-sources", "-"], stdin=PROBE.encode())
    if not result.ok:
        raise AnsorError(
            f"cpu={cpu}: IREE cannot target it ({first_error_line(result.stderr)}); "
            "use cpu=host or an LLVM CPU name such as znver3"
        )
    module = parse_module(result.stdout.decode(), f"IREE's executable sources for cpu={cpu}", new_context())
    variants: list[ir.Operation] = []
    module.operation.walk(lambda op: _collect(op, VARIANT, variants))
    config = executable_target_config(variants[0].attributes["target"]) if variants else None
    if config is None:
        raise AnsorError(f"cpu={cpu}: IREE built no {backend} executable target for it")
    return _resolved(config)


def resolve_target(target: Target) -> Target:
    """`target` with what IREE resolves its CPU to (name, features, vector bytes, stack limit), or its GPU's
    limits to (`resolve_gpu`)."""
    if target.gpu is not None:
        return replace(target, gpu=resolve_gpu(target.gpu))
    return target.resolved(resolve_cpu(target.backend, target.cpu, target.triple))


@lru_cache(maxsize=16)
def resolve_gpu(gpu: GpuSpec) -> GpuSpec:
    """`gpu` with the limits IREE's `#iree_gpu.target` for its architecture states: shared memory and threads
    per block, block dimensions, warp size, tensor-core instructions (read through `iree_gpu.TargetInfo`)."""
    with new_context():
        info = iree_gpu.TargetInfo.get_gpu_target_info(_executable_target(gpu.compile_flags(), gpu.arch))
        mma = tuple(_mma_shape(m) for m in info.mma_intrinsics)
        return gpu.with_limits(info.max_workgroup_memory_bytes, info.max_thread_count_per_workgroup,
                               tuple(info.max_workgroup_sizes), min(info.subgroup_size_choices),
                               tuple(m for m in mma if m is not None))


def _executable_target(flags: list[str], what: str) -> ir.Attribute:
    """The `#hal.executable.target` IREE builds for the probe module under `flags`, in the current context."""
    result = run_tool("iree-compile", [*flags, "--compile-to=executable-sources", "-"], stdin=PROBE.encode())
    if not result.ok:
        raise AnsorError(f"target {what}: IREE cannot target it ({first_error_line(result.stderr)})")
    module = parse_module(result.stdout.decode(), f"IREE's executable sources for {what}", ir.Context.current)
    variants: list[ir.Operation] = []
    module.operation.walk(lambda op: _collect(op, VARIANT, variants))
    if not variants:
        raise AnsorError(f"target {what}: IREE built no executable for it")
    return variants[0].attributes["target"]


def _mma_shape(intrinsic: object) -> MmaShape | None:
    """A tensor-core instruction of IREE's target (an `iree_gpu.MMAIntrinsic`); None for a virtual one."""
    if not isinstance(intrinsic, iree_gpu.MMAIntrinsic):
        return None
    mma = iree_gpu.MMAAttr.get(intrinsic)
    m, n, k = mma.mnk_shape
    a, b, c = (str(t) for t in mma.abc_element_types)
    return MmaShape(intrinsic.name, m, n, k, a, b, c)


def parse_resolved_target(name: str, threads: int = 1, cpu: str = "host", triple: str = "") -> Target:
    """A user-given target, described by the host's caches and cores and IREE's view of its CPU."""
    return resolve_target(parse_target(name, threads=threads, cpu=cpu, triple=triple))


def _resolved(config: ir.DictAttr) -> ResolvedCpu:
    def string(name: str) -> str:
        return ir.StringAttr(config[name]).value

    def integer(name: str) -> int:
        return ir.IntegerAttr(config[name]).value

    return ResolvedCpu(
        cpu=string("cpu"),
        features=enabled_features(string("cpu_features")),
        triple=string("target_triple"),
        vector_bytes=integer("native_vector_size"),
        stack_limit_bytes=integer("max_stack_allocation_size"),
    )


def _collect(op: ir.Operation, name: str, found: list[ir.Operation]) -> ir.WalkResult:
    if op.name == name:
        found.append(op)
        return ir.WalkResult.INTERRUPT
    return ir.WalkResult.ADVANCE

"""Where a whole model's time goes: each dispatch of its IREE build, onnxruntime's nodes beside them, and the rest.

IREE's runtime profiles itself (HAL-native profiling; the pip wheels ship it,
no Tracy build needed): `iree-benchmark-module
--device_profiling_mode=host-execution` records every dispatch and every
queue operation (allocations, command-buffer executions) of the real program,
in the order and cache state of whole calls, and `iree-profile statistics`
sums them per function. The program's flow-level IR (the text and flags the
build used, `--compile-to=flow`) says what each function is: its task (root
op, FLOPs, bytes; `frontend.task_extraction`), how often one call dispatches
it (checked against the profile's counts), and whether it reads weights only
(a layout change run on every call). onnxruntime profiles its nodes
(`SessionOptions.enable_profiling`). Both sides are reduced to one `OpShape`
(kind, output elements, reduction elements per output) and matched on it.
End-to-end times come from a separate run timing the contenders alternately
in one process (`ansor_bench.timing`) with the FMA peak kernel among them, so
shares of the peak are against the peak in the same rounds.
"""

from __future__ import annotations

import json
import math
import subprocess
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ansor_bench.op_shapes import LAYOUT, OpShape, name_shape, node_shape, root_shape
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import Task
from ansor_mlir.errors import AnsorError
from ansor_mlir.mlir.iree_module import CompiledModel

# iree-profile's statistics rows: per dispatch function, and per queue operation.
FUNCTION_ROW, QUEUE_ROW = "host_execution_function", "host_execution_queue_operation"
ALLOCATION_EVENTS = ("alloca", "dealloca")
# Ops a dispatch operand may pass through on its way from a weight (a global or a constant) and still be one.
WEIGHT_SOURCES = ("util.global.load", "util.global.load.indirect", "arith.constant", "flow.tensor.constant")
VIEW_OPS = ("flow.tensor.reshape", "flow.tensor.bitcast", "tensor.cast")


# ---- the program's dispatches -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dispatch:
    """One function of the program: what it computes, how often one call runs it, and what one run costs."""

    function: str
    calls: int
    shape: OpShape
    flops: int
    bytes: int
    weights_only: bool = False


def _tensor_bytes(value_type) -> int:
    from iree.compiler import ir

    if not isinstance(value_type, ir.RankedTensorType):
        return 0
    element = value_type.element_type
    width = element.width if isinstance(element, (ir.IntegerType, ir.FloatType)) else 32
    return math.prod(value_type.shape) * max(1, width // 8)


def _is_weight(value) -> bool:
    """Whether a dispatch operand is a weight: a global or a constant, through reshapes."""
    from iree.compiler import ir

    for _ in range(16):
        owner = value.owner
        if isinstance(owner, ir.Block):
            return False
        name = owner.operation.name
        if name in WEIGHT_SOURCES:
            return True
        if name not in VIEW_OPS:
            return False
        value = owner.operation.operands[0]
    return False


def _site_facts(site) -> tuple[str, int, bool]:
    """(function, bytes it reads and writes, whether it reads weights only) of one `flow.dispatch`."""
    from iree.compiler import ir

    entry = ir.SymbolRefAttr(ir.ArrayAttr(site.attributes["entry_points"])[0]).value
    tensors = [v for v in site.operands if isinstance(v.type, ir.RankedTensorType)]
    tied = [ir.IntegerAttr(t).value for t in ir.ArrayAttr(site.attributes["tied_operands"])] \
        if "tied_operands" in site.attributes else [-1] * len(site.results)
    written = [r for r, t in zip(site.results, tied, strict=True) if t < 0]
    size = sum(_tensor_bytes(v.type) for v in [*tensors, *written])
    return entry[-1], size, bool(tensors) and all(_is_weight(v) for v in tensors)


@dataclass(frozen=True)
class Inventory:
    """What one call of a program runs, read off its flow IR: its dispatches, and the tensors it fills whole
    (`flow.tensor.splat`: the zero buffer a dispatch writes a padded result into, border included)."""

    dispatches: tuple[Dispatch, ...]
    fills: int = 0
    fill_bytes: int = 0


def dispatch_inventory(text: str, target: Target, name: str) -> Inventory:
    """Every function one call of the program dispatches (what IREE forms from `text` with `target`'s flags), with
    its task's shape and FLOPs where the dispatch rebuilds as a task, and the program's whole-tensor fills."""
    from iree.compiler import ir

    from ansor_mlir.frontend.task_extraction import (
        dispatch_executable_key,
        dispatch_sites,
        in_initializer,
        tasks_from_flow,
    )
    from ansor_mlir.mlir.context import new_context, ops_of, parse_module, walk
    from ansor_mlir.mlir.iree_compiler import compile_to_phase

    flow = compile_to_phase(text, target.compile_flags(), "flow", name)
    tasks: dict[str, Task] = {task.key: task for task in tasks_from_flow(flow, target, name)}
    ctx = new_context()
    module = parse_module(flow, f"{name} (IREE flow output)", ctx)
    facts = [_site_facts(site) for site in dispatch_sites(module.operation) if not in_initializer(site)]
    calls = Counter(function for function, _, _ in facts)
    sizes = {function: size for function, size, _ in facts}
    weights = defaultdict(lambda: True)
    for function, _, only in facts:
        weights[function] = weights[function] and only
    out = []
    for exe in ops_of(module.body):
        if exe.name != "flow.executable":
            continue
        exports = [ir.StringAttr(op.attributes["sym_name"]).value for op in ops_of(exe.regions[0].blocks[0])
                   if op.name == "flow.executable.export"]
        task = tasks.get(dispatch_executable_key(exe, ctx) or "")
        for function in (f for f in exports if f in calls):
            shape = root_shape(task.root) if task is not None else name_shape(function)
            out.append(Dispatch(function, calls[function], shape, task.flops if task else 0, sizes[function],
                                weights[function]))
    splats = [op for op in walk(module.operation) if op.name == "flow.tensor.splat" and not in_initializer(op)]
    return Inventory(tuple(out), len(splats), sum(_tensor_bytes(op.results[0].type) for op in splats))


# ---- IREE's profile -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DispatchTime:
    """A dispatch and its seconds per call of the program (all its runs in that call)."""

    dispatch: Dispatch
    seconds: float


@dataclass(frozen=True)
class IreeProfile:
    """One build's profiled calls: per call, each dispatch's time, the queue's allocations and command-buffer
    executions, and the call's own end-to-end time in the same run."""

    label: str
    call_s: float
    iterations: int
    dispatches: tuple[DispatchTime, ...]
    allocation_s: float
    execute_s: float
    # IREE's own sum over its queue's dispatch operations: what the dispatches' times must add up to.
    queue_dispatch_s: float
    # Whole-tensor fills per call (`Inventory`), part of the command buffers beyond the dispatches.
    fills: int = 0
    fill_bytes: int = 0

    @property
    def kernels_s(self) -> float:
        return sum(d.seconds for d in self.dispatches)

    @property
    def outside_s(self) -> float:
        """Everything of the call that is no dispatch: the three parts below."""
        return self.call_s - self.kernels_s

    @property
    def command_buffer_s(self) -> float:
        """Command-buffer executions beyond their dispatches: barriers, copies, fills, issuing the dispatches."""
        return self.execute_s - self.kernels_s

    @property
    def host_s(self) -> float:
        """The call outside the queue: the VM, argument and result buffers, waits."""
        return self.call_s - self.execute_s - self.allocation_s


def read_iree_profile(label: str, rows: Iterable[dict], call_s: float, iterations: int,
                      inventory: Inventory) -> IreeProfile:
    """The profile of `iterations` calls from `iree-profile statistics --format=jsonl` rows.

    Each function's run count must be what the flow IR dispatches per call times `iterations`: the inventory
    describes this build, or the profile is not read at all."""
    functions: dict[str, tuple[int, int]] = {}
    queue: Counter[str] = Counter()
    for row in rows:
        if row.get("row_type") == FUNCTION_ROW and row.get("function_name"):
            functions[row["function_name"]] = (int(row["sample_count"]), int(row["total_duration_ns"]))
        elif row.get("row_type") == QUEUE_ROW:
            queue[row["event_name"]] += int(row["total_duration_ns"])
    known = {d.function: d for d in inventory.dispatches}
    unknown = sorted(set(functions) - set(known))
    if unknown:
        raise AnsorError(f"{label}: the profile has dispatch {unknown[0]}, which the program's flow IR does not "
                         "dispatch: the profile is of another build")
    times = []
    for dispatch in inventory.dispatches:
        runs, total_ns = functions.get(dispatch.function, (0, 0))
        if runs != dispatch.calls * iterations:
            raise AnsorError(f"{label}: {dispatch.function} ran {runs} times in {iterations} profiled calls, but the "
                             f"flow IR dispatches it {dispatch.calls} times a call")
        times.append(DispatchTime(dispatch, total_ns * 1e-9 / iterations))
    times.sort(key=lambda t: -t.seconds)
    allocation = sum(queue[event] for event in ALLOCATION_EVENTS) * 1e-9 / iterations
    return IreeProfile(label, call_s, iterations, tuple(times), allocation, queue["execute"] * 1e-9 / iterations,
                       queue["dispatch"] * 1e-9 / iterations, inventory.fills, inventory.fill_bytes)


def runtime_tool(name: str) -> str:
    """The path of an IREE runtime tool of the installed `iree-base-runtime`."""
    from iree._runtime import libs

    path = Path(libs.library_path) / name
    if not path.is_file():
        raise AnsorError(f"cannot find IREE's {name} in {path.parent}: install iree-base-runtime==3.13.*")
    return str(path)


def profile_program(label: str, vmfb: bytes, function: str, device: str, inputs: Sequence[np.ndarray],
                    inventory: Inventory, iterations: int, workdir: Path, threads: int = 1,
                    parameters: tuple[str, bytes] | None = None, timeout_s: float = 1800.0) -> IreeProfile:
    """Profile `iterations` calls of a built program with `iree-benchmark-module` (HAL host-execution events)."""
    workdir.mkdir(parents=True, exist_ok=True)
    module = workdir / f"{label}.vmfb"
    module.write_bytes(vmfb)
    bundle, timing = workdir / f"{label}.ireeprof", workdir / f"{label}.benchmark.json"
    flags = [f"--module={module}", f"--function={function}", f"--device={device}",
             f"--benchmark_min_time={iterations}x", "--device_profiling_mode=host-execution",
             f"--device_profiling_output={bundle}", f"--benchmark_out={timing}", "--benchmark_out_format=json"]
    if threads > 1:
        flags.append(f"--task_topology_max_group_count={threads}")
    if parameters is not None:
        scope, archive = parameters
        (workdir / f"{label}.irpa").write_bytes(archive)
        flags.append(f"--parameters={scope}={workdir / f'{label}.irpa'}")
    for index, array in enumerate(inputs):
        np.save(workdir / f"{label}.input{index}.npy", np.asarray(array))
        flags.append(f"--input=@{workdir / f'{label}.input{index}.npy'}")
    _run([runtime_tool("iree-benchmark-module"), *flags], timeout_s, label)
    statistics = _run([runtime_tool("iree-profile"), "statistics", "--format=jsonl", str(bundle)], timeout_s, label)
    rows = [json.loads(line) for line in statistics.splitlines() if line.strip()]
    benchmark = json.loads(timing.read_text())["benchmarks"][0]
    call_s = float(benchmark["real_time"]) * {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[benchmark["time_unit"]]
    return read_iree_profile(label, rows, call_s, iterations, inventory)


def _run(command: list[str], timeout_s: float, label: str) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise AnsorError(f"{label}: {Path(command[0]).name} ran over {timeout_s:.0f} s") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()] or ["no message"]
        raise AnsorError(f"{label}: {Path(command[0]).name} failed: {lines[-1]}")
    return done.stdout


# ---- onnxruntime's profile ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OrtNode:
    """One node of onnxruntime's optimized graph: its profiled shapes (and a pool's kernel), and seconds per run."""

    name: str
    op: str
    inputs: tuple[tuple[int, ...], ...]
    outputs: tuple[tuple[int, ...], ...]
    kernel: tuple[int, ...]
    seconds: float

    @property
    def shape(self) -> OpShape:
        return node_shape(self.op, self.inputs, self.outputs, self.kernel)


@dataclass(frozen=True)
class OrtProfile:
    """onnxruntime's profiled runs: per run, each node's time and the run's own time."""

    run_s: float
    runs: int
    nodes: tuple[OrtNode, ...]

    @property
    def kernels_s(self) -> float:
        return sum(n.seconds for n in self.nodes)

    @property
    def outside_s(self) -> float:
        return self.run_s - self.kernels_s


def _shapes(entries: Sequence[dict]) -> tuple[tuple[int, ...], ...]:
    """The shapes of onnxruntime's `[{"float": [1, 64, 56, 56]}, ...]`."""
    return tuple(tuple(next(iter(entry.values()))) for entry in entries)


def read_ort_profile(events: Sequence[dict], kernels: dict[str, tuple[int, ...]], runs: int) -> OrtProfile:
    """The last `runs` runs of onnxruntime's profile (its JSON events; the runs before them warm up), with each
    pool node's kernel from the optimized graph (`kernels`, by node name)."""
    model_runs = sorted((e for e in events if e.get("name") == "model_run"), key=lambda e: e["ts"])
    if len(model_runs) < runs:
        raise AnsorError(f"onnxruntime's profile holds {len(model_runs)} runs, not the {runs} asked for")
    kept = model_runs[-runs:]
    start = kept[0]["ts"]
    totals: dict[str, float] = defaultdict(float)
    first: dict[str, dict] = {}
    for event in events:
        name = event.get("name", "")
        if event.get("cat") != "Node" or not name.endswith("_kernel_time") or event["ts"] < start:
            continue
        node = name[: -len("_kernel_time")]
        totals[node] += event["dur"] * 1e-6
        first.setdefault(node, event)
    nodes = []
    for node, seconds in totals.items():
        args = first[node]["args"]
        nodes.append(OrtNode(node, args["op_name"], _shapes(args.get("input_type_shape", [])),
                             _shapes(args.get("output_type_shape", [])), kernels.get(node, ()), seconds / runs))
    nodes.sort(key=lambda n: -n.seconds)
    return OrtProfile(sum(r["dur"] for r in kept) * 1e-6 / runs, runs, tuple(nodes))


def pool_kernels(model) -> dict[str, tuple[int, ...]]:
    """Each node's `kernel_shape` attribute (pools), by node name, of an ONNX graph."""
    from onnx import helper

    return {node.name: tuple(helper.get_attribute_value(a)) for node in model.graph.node for a in node.attribute
            if a.name == "kernel_shape"}


def profile_onnxruntime(onnx_path: Path, feeds: dict[str, np.ndarray], threads: int, runs: int,
                        workdir: Path) -> OrtProfile:
    """onnxruntime's CPU provider profiled over `runs` runs after one warm-up run."""
    import onnx
    import onnxruntime as ort

    workdir.mkdir(parents=True, exist_ok=True)
    options = ort.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = str(workdir / "onnxruntime")
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    optimized = workdir / "onnxruntime_optimized.onnx"
    options.optimized_model_filepath = str(optimized)
    session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    for _ in range(runs + 1):
        session.run(None, feeds)
    events = json.loads(Path(session.end_profiling()).read_text())
    return read_ort_profile(events, pool_kernels(onnx.load(str(optimized), load_external_data=False)), runs)


# ---- ours against theirs ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpRow:
    """The ops of one shape on both sides: our dispatches' seconds and runs per call, onnxruntime's nodes'."""

    kind: str
    shape: OpShape
    ours_s: float
    ours_runs: int
    theirs_s: float
    theirs_runs: int


def op_rows(profile: IreeProfile, ort: OrtProfile) -> list[OpRow]:
    """Our dispatches and onnxruntime's nodes grouped by shape (one row per shape either side has), most time
    first. A row with one side empty is an op the other side fuses away or never runs.

    onnxruntime's NCHWc kernels pad channels to whole blocks (24 input channels reduce over 32): once the exact
    shapes are matched, a node left over joins the dispatches of its kind and output elements, when exactly one
    such group is left over too."""
    ours: dict[tuple, list[DispatchTime]] = defaultdict(list)
    theirs: dict[tuple, list[OrtNode]] = defaultdict(list)
    for t in profile.dispatches:
        key = t.dispatch.shape.key if t.dispatch.shape.outputs else ("function", t.dispatch.function)
        ours[key].append(t)
    for node in ort.nodes:
        theirs[node.shape.key].append(node)
    kinds = {key: group[0].dispatch.shape.kind for key, group in ours.items()}
    for key in [k for k in theirs if k not in ours]:
        kind = theirs[key][0].shape.kind
        near = [k for k in ours if k not in theirs and k[:2] == key[:2] and kinds[k] == kind]
        if len(near) == 1:
            theirs[near[0]] = theirs.pop(key)
    rows = []
    for key in {*ours, *theirs}:
        mine, other = ours.get(key, []), theirs.get(key, [])
        shape = mine[0].dispatch.shape if mine else other[0].shape
        rows.append(OpRow(other[0].shape.kind if other else shape.kind, shape, sum(t.seconds for t in mine),
                          sum(t.dispatch.calls for t in mine), sum(n.seconds for n in other), len(other)))
    rows.sort(key=lambda r: -(r.ours_s + r.theirs_s))
    return rows


def kind_totals(rows: Sequence[OpRow]) -> list[tuple[str, float, float]]:
    """(kind, our seconds, onnxruntime's seconds) per op kind, most time first."""
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for row in rows:
        totals[row.kind][0] += row.ours_s
        totals[row.kind][1] += row.theirs_s
    return sorted(((k, v[0], v[1]) for k, v in totals.items()), key=lambda x: -(x[1] + x[2]))


# ---- one model, end to end ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelProfile:
    """A model at a thread count: the contenders' alternated end-to-end medians, the peak in those rounds, the
    bandwidths, each IREE build's profile and onnxruntime's, and any output that differs from onnxruntime's."""

    model: str
    threads: int
    rounds: int
    median_ms: dict[str, float]
    peak_flops: float
    bandwidths: tuple[tuple[int, float], ...]
    memory_bandwidth: float
    iree: tuple[IreeProfile, ...]
    onnxruntime: OrtProfile
    mismatches: dict[str, str] = field(default_factory=dict)

    def bandwidth_for(self, size: int) -> float:
        """The triad bandwidth of the smallest measured cache level `size` bytes fit in, else memory's."""
        fitting = [bw for capacity, bw in sorted(self.bandwidths) if size <= capacity]
        return fitting[0] if fitting else self.memory_bandwidth

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_json(data: dict) -> ModelProfile:
        def dispatch(d: dict) -> Dispatch:
            return Dispatch(**{**d, "shape": OpShape(**d["shape"])})

        iree = tuple(IreeProfile(**{**p, "dispatches": tuple(DispatchTime(dispatch(t["dispatch"]), t["seconds"])
                                                             for t in p["dispatches"])}) for p in data["iree"])
        ort = data["onnxruntime"]
        nodes = tuple(OrtNode(n["name"], n["op"], tuple(tuple(x) for x in n["inputs"]),
                              tuple(tuple(x) for x in n["outputs"]), tuple(n["kernel"]), n["seconds"])
                      for n in ort["nodes"])
        return ModelProfile(**{**data, "bandwidths": tuple(tuple(b) for b in data["bandwidths"]), "iree": iree,
                               "onnxruntime": OrtProfile(ort["run_s"], ort["runs"], nodes)})


def time_contenders(calls: dict[str, Callable[[], object]], peak, threads: int, rounds: int,
                    min_round_s: float) -> tuple[dict[str, float], float]:
    """(median ms per contender, the peak FLOP/s in the same rounds): the contenders and the FMA kernel timed
    alternately in one process."""
    from ansor_bench.suite import PEAK_KEY, rounds_peak_flops
    from ansor_bench.timing import time_alternately

    timings = time_alternately({**calls, PEAK_KEY: peak.call}, rounds=rounds, min_round_s=min_round_s)
    return ({name: t.median_s * 1e3 for name, t in timings.items() if name != PEAK_KEY},
            rounds_peak_flops(peak, timings[PEAK_KEY], threads))


def measure_bandwidths(target: Target) -> tuple[tuple[tuple[int, float], ...], float]:
    """Cache-level and memory triad bandwidths of one core (a quick roofline)."""
    from ansor_bench.roofline import measure_roofline

    roofline = measure_roofline(target.l3_bytes, quick=True, caches=(target.l2_bytes, target.l3_bytes))
    return roofline.cache_bandwidths, roofline.bandwidth_bytes_s


def built_text(source, target: Target, log: Path | None, rewrites: str) -> str:
    """The text `ansor_mlir.compile(source, target, log, rewrites=rewrites)` hands IREE (its program rewrites,
    unless the log's whole-program check dropped them), whose dispatches the profile names."""
    from ansor_mlir.api import rewritten
    from ansor_mlir.tuning.program_choice import chosen_text, recorded_choice

    changed = rewritten("compile", source.text, source.name, rewrites)
    return chosen_text(source.text, changed, recorded_choice(log, source.text, source.name, changed, target))


@dataclass(frozen=True)
class Build:
    """A contender built by IREE: its label, the program, and the text it was built from."""

    label: str
    program: CompiledModel
    text: str


def builds(source, target: Target, log: Path | None = None, rewrites: str = "") -> list[Build]:
    """IREE's default (the model as imported), ansor-mlir's program rewrites (`rewrites`, else the default ones)
    with IREE's configurations, and, given a log tuned with those rewrites, the tuned program: what
    `ansor_mlir.compile` builds for each."""
    from ansor_mlir import api
    from ansor_mlir.frontend.program_rewrites import DEFAULT_REWRITES, NO_REWRITES

    rewrites = rewrites or DEFAULT_REWRITES
    wanted = [("iree_default", None, NO_REWRITES), ("rewritten", None, rewrites)]
    if log is not None:
        wanted.append(("tuned", log, rewrites))
    return [Build(label, api.compile(source, target, records, rewrites=rewrites),
                  built_text(source, target, records, rewrites)) for label, records, rewrites in wanted]


def peak_kernel(workdir: Path):
    """The FMA kernel timed beside the contenders (`ansor_bench.roofline.peak_call`); it needs a C compiler."""
    from ansor_bench.roofline import PEAK_CALL_FLOPS, peak_call

    peak = peak_call(workdir, PEAK_CALL_FLOPS)
    if peak is None:
        raise AnsorError("the profile times the FMA peak kernel beside the model, which needs gcc or cc")
    return peak


def profile_model(name: str, source, onnx_path: Path, inputs: Sequence[np.ndarray], target: Target,
                  log: Path | None, workdir: Path, iterations: int = 5, rounds: int = 5, ort_runs: int = 10,
                  min_round_s: float = 0.2, rewrites: str = "") -> ModelProfile:
    """Build, check, time and profile one model (`source`, imported from `onnx_path`) on `target`'s threads,
    with `rewrites` (default: the default program rewrites)."""
    import onnxruntime as ort

    from ansor_bench.timing import mismatch
    from ansor_mlir.measure.vm_call import timed_call

    built = builds(source, target, log, rewrites)
    options = ort.SessionOptions()
    options.intra_op_num_threads = target.threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    feeds = {i.name: np.asarray(a) for i, a in zip(session.get_inputs(), inputs, strict=True)}
    expected = [np.asarray(o) for o in session.run(None, feeds)]
    mismatches = {}
    for build in built:
        outputs = build.program(*inputs)
        why = mismatch(list(outputs) if isinstance(outputs, tuple) else [outputs], expected)
        if why:
            mismatches[build.label] = why
    calls: dict[str, Callable[[], object]] = {b.label: timed_call(b.program, inputs) for b in built}
    calls["onnxruntime"] = lambda: session.run(None, feeds)
    medians, peak_flops = time_contenders(calls, peak_kernel(workdir), target.threads, rounds, min_round_s)
    bandwidths, memory = measure_bandwidths(target)
    profiles = []
    for build in built:
        inventory = dispatch_inventory(build.text, target, name)
        program = build.program
        parameters = (program.scope, program.parameters) if program.parameters else None
        profiles.append(profile_program(build.label, program.vmfb, program.function, program.device, inputs,
                                        inventory, iterations, workdir, target.threads, parameters))
    theirs = profile_onnxruntime(onnx_path, feeds, target.threads, ort_runs, workdir)
    return ModelProfile(name, target.threads, rounds, medians, peak_flops, bandwidths, memory, tuple(profiles),
                        theirs, mismatches)


# ---- the report ---------------------------------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    """Milliseconds, with three decimals below one."""
    ms = seconds * 1e3
    return f"{ms:.3f}" if abs(ms) < 1 else f"{ms:.2f}"


def _share(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole > 0 else "-"


def _speedup(theirs: float, ours: float) -> str:
    """onnxruntime's time over ours: above 1, ours is faster."""
    return f"{theirs / ours:.2f}x" if ours > 0 and theirs > 0 else "-"


def _op_peak(row: OpRow, seconds: float, runs: int, peak_flops: float) -> str:
    """A matched op's multiply-accumulates against the FMA peak."""
    if seconds <= 0 or not row.shape.mac_flops:
        return "-"
    return f"{100.0 * row.shape.mac_flops * runs / seconds / peak_flops:.0f}%"


def roofline_cell(profile: ModelProfile, t: DispatchTime) -> tuple[str, str, str]:
    """(GFLOP/s, % of the FMA peak, % of the roofline and its bound) of one dispatch, per run."""
    d = t.dispatch
    if t.seconds <= 0:
        return "-", "-", "-"
    flops = d.flops * d.calls
    compute_s = flops / profile.peak_flops if flops else 0.0
    memory_s = d.bytes * d.calls / profile.bandwidth_for(d.bytes)
    bound = "FMA" if compute_s >= memory_s else "memory"
    gflops = f"{flops / t.seconds / 1e9:.1f}" if flops else "-"
    peak = f"{100.0 * compute_s / t.seconds:.0f}%" if flops else "-"
    return gflops, peak, f"{100.0 * max(compute_s, memory_s) / t.seconds:.0f}% ({bound})"


def model_markdown(profile: ModelProfile, top: int = 12) -> str:
    """One model's section: end to end, time by op kind, time outside the dispatches, top dispatches, top ops."""
    ort = profile.onnxruntime
    lines = [f"## {profile.model}, {profile.threads} thread{'s' if profile.threads > 1 else ''}", ""]
    lines += ["End to end, timed alternately in one process "
              f"({profile.rounds} rounds; the FMA kernel among them read {profile.peak_flops / 1e9:.1f} GFLOP/s):",
              "", "| contender | median (ms) | onnxruntime ÷ contender | outputs against onnxruntime |",
              "|---|---:|---:|---|"]
    ort_ms = profile.median_ms.get("onnxruntime", 0.0)
    for name, ms in profile.median_ms.items():
        check = "-" if name == "onnxruntime" else profile.mismatches.get(name, "equal")
        lines.append(f"| {name} | {_ms(ms / 1e3)} | {ort_ms / ms:.2f}x | {check} |")
    lines += ["", "Where one call's time goes, by op kind (ms per call in the profiled runs, share of that call):", ""]
    builds = list(profile.iree)
    header = " | ".join(f"{p.label} ms | share" for p in builds)
    lines += [f"| op kind | {header} | onnxruntime ms | share | onnxruntime ÷ {builds[-1].label} |",
              "|---|" + "---:|---:|" * len(builds) + "---:|---:|---:|"]
    per_build = [dict((k, (o, t)) for k, o, t in kind_totals(op_rows(p, ort))) for p in builds]
    kinds = [k for k, _, _ in kind_totals(op_rows(builds[-1], ort))]
    for kind in kinds + sorted({k for totals in per_build for k in totals} - set(kinds)):
        cells = []
        for p, totals in zip(builds, per_build, strict=True):
            ours = totals.get(kind, (0.0, 0.0))[0]
            cells.append(f"{_ms(ours)} | {_share(ours, p.call_s)}")
        theirs = per_build[-1].get(kind, (0.0, 0.0))[1]
        last = per_build[-1].get(kind, (0.0, 0.0))[0]
        lines.append(f"| {kind} | {' | '.join(cells)} | {_ms(theirs)} | {_share(theirs, ort.run_s)} "
                     f"| {_speedup(theirs, last)} |")
    outside = " | ".join(f"{_ms(p.outside_s)} | {_share(p.outside_s, p.call_s)}" for p in builds)
    lines.append(f"| outside kernels | {outside} | {_ms(ort.outside_s)} | {_share(ort.outside_s, ort.run_s)} "
                 f"| {_speedup(ort.outside_s, builds[-1].outside_s)} |")
    total = " | ".join(f"**{_ms(p.call_s)}** | 100%" for p in builds)
    lines.append(f"| **call (profiled)** | {total} | **{_ms(ort.run_s)}** | 100% "
                 f"| {_speedup(ort.run_s, builds[-1].call_s)} |")
    lines += ["", "Outside the dispatches (ms per call):", "",
              "| build | call | dispatches | command buffers beyond dispatches | whole-tensor zero fills (MB) "
              "| queue allocations | host: VM, buffers, waits | dispatches reading weights only | layout dispatches |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in builds:
        weights = sum(t.seconds for t in p.dispatches if t.dispatch.weights_only)
        layout = sum(t.seconds for t in p.dispatches if t.dispatch.shape.category == LAYOUT)
        lines.append(f"| {p.label} | {_ms(p.call_s)} | {_ms(p.kernels_s)} | {_ms(p.command_buffer_s)} "
                     f"| {p.fills} ({p.fill_bytes / 1e6:.1f}) | {_ms(p.allocation_s)} | {_ms(p.host_s)} "
                     f"| {_ms(weights)} | {_ms(layout)} |")
    lines.append(f"| onnxruntime | {_ms(ort.run_s)} | {_ms(ort.kernels_s)} (nodes) | - | - | - "
                 f"| {_ms(ort.outside_s)} (run outside nodes) | - | - |")
    for p in builds:
        runs = sum(t.dispatch.calls for t in p.dispatches)
        lines += ["", f"Top dispatches of {p.label} (of {len(p.dispatches)}; {runs} runs a call):", "",
                  "| dispatch | kind | runs | ms per call | share | GFLOP/s | % FMA peak | % roofline (bound) |",
                  "|---|---|---:|---:|---:|---:|---:|---:|"]
        for t in p.dispatches[:top]:
            gflops, peak, roof = roofline_cell(profile, t)
            note = " (weights only)" if t.dispatch.weights_only else ""
            lines.append(f"| `{t.dispatch.function}`{note} | {t.dispatch.shape.kind} | {t.dispatch.calls} "
                         f"| {_ms(t.seconds)} | {_share(t.seconds, p.call_s)} | {gflops} | {peak} | {roof} |")
    last = builds[-1]
    lines += ["", f"Ops of {last.label} against onnxruntime's nodes, matched by kind and shape (outputs x reduction "
              "elements; top by time):", "",
              "| op | outputs x reduction | runs (ours / onnxruntime) | ours ms | ours % FMA peak | onnxruntime ms "
              "| onnxruntime % FMA peak | onnxruntime ÷ ours |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for row in op_rows(last, ort)[:top + 4]:
        size = f"{row.shape.outputs} x {row.shape.reduction}" if row.shape.outputs else "-"
        lines.append(f"| {row.kind} | {size} | {row.ours_runs} / {row.theirs_runs} | {_ms(row.ours_s)} "
                     f"| {_op_peak(row, row.ours_s, row.ours_runs, profile.peak_flops)} | {_ms(row.theirs_s)} "
                     f"| {_op_peak(row, row.theirs_s, row.theirs_runs, profile.peak_flops)} "
                     f"| {_speedup(row.theirs_s, row.ours_s)} |")
    return "\n".join(lines) + "\n"

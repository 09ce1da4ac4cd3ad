"""The benchmark harness: the roofline is physical, and the tool renders a report from a real quick run."""

from __future__ import annotations

import ast
import csv
import json
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from ansor_bench.c_microkernels import matmul_kernels
from ansor_bench.call_floor import CallFloor, floor_devices, floor_text, lowest
from ansor_bench.idle_pools import other_threads_cpu_s, wait_for_idle_pools
from ansor_bench.roofline import OPERAND_REGISTERS, Roofline, fma_chains, measure_roofline
from ansor_bench.timing import mismatch, time_alternately, window_ratios
from ansor_mlir.core.fma_throughput import fma_throughput, peak_check, reported_clock_hz
from ansor_mlir.core.target import detect_host
from ansor_mlir.errors import AnsorError

REPO = Path(__file__).resolve().parents[2]


def test_roofline_numbers_are_plausible_for_one_core():
    roofline = measure_roofline(quick=True)
    assert 1e9 < roofline.peak_flops < 1e13, roofline
    assert 1e8 < roofline.bandwidth_bytes_s < 1e12, roofline
    assert roofline.peak_method and roofline.bandwidth_method
    # A 512^3 matmul is compute-bound; a 1M-element copy is memory-bound.
    assert roofline.bound_s(2 * 512**3, 3 * 4 * 512**2) == 2 * 512**3 / roofline.peak_flops
    assert roofline.bound_s(1e6, 8e6) == 8e6 / roofline.bandwidth_bytes_s


def test_cache_resident_ops_are_bounded_by_their_cache_level():
    roofline = measure_roofline(quick=True, caches=(1 << 20,))
    (capacity, cache_bw), = roofline.cache_bandwidths
    assert cache_bw > 0 and roofline.bandwidth_for(capacity) == cache_bw
    assert roofline.bandwidth_for(capacity + 1) == roofline.bandwidth_bytes_s


def test_mismatch_names_the_wrong_output():
    ref = [np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)]
    assert mismatch([ref[0].copy()], ref) is None
    wrong = ref[0].copy()
    wrong[3, 3] += 0.5
    assert "1 of 64 values off" in mismatch([wrong], ref)
    assert "shape" in mismatch([ref[0].T[:4]], ref)


def test_quick_run_writes_csv_json_plots_and_markdown(tmp_path):
    out, doc = tmp_path / "out", tmp_path / "docs" / "benchmarks.md"
    cmd = [sys.executable, str(REPO / "tools" / "benchmark_suite.py"), "--quick", "--trials", "2",
           "--shape", "GMM=1,32,32,32", "--shape", "C2D=1,8,8,8,8,3,1,1",
           "--contenders", "ansor,iree,numpy", "--out", str(out), "--docs", str(doc)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]

    rows = list(csv.DictReader(open(out / "results.csv", encoding="utf-8")))
    cells = {(r["workload"], r["contender"]): r for r in rows}
    assert len(rows) == 6
    for contender in ("IREE default", "numpy", "ansor-mlir tuned"):
        gmm = cells[("GMM(1,32,32,32)", contender)]
        assert gmm["status"] == "ok", gmm
        assert float(gmm["median_s"]) > 0 and 0 < float(gmm["pct_peak"]) < 150
        # The FMA kernel ran in the op's own rounds: a share of that peak too, with its explanation in the doc.
        assert 0 < float(gmm["pct_peak_rounds"]) < 150
    assert cells[("C2D(1,8,8,8,8,3,1,1)", "IREE default")]["status"] == "ok"
    assert cells[("C2D(1,8,8,8,8,3,1,1)", "numpy")]["status"] == "skipped"
    # The tuned cell of a conv is whatever tuning gave (today: not tunable yet); the run never crashes on it.
    assert cells[("C2D(1,8,8,8,8,3,1,1)", "ansor-mlir tuned")]["status"]

    data = json.loads((out / "results.json").read_text())
    assert data["meta"]["threads"] == 1 and data["meta"]["budgets"]["trials"] == 2
    assert data["roofline"]["peak_flops"] > 0
    assert any(c["contender"] == "ansor-mlir tuned" and c["best_s"] for c in data["curves"])

    text = doc.read_text()
    for needle in ("## Geomean speedups", "vs IREE default", "% of peak", "GMM(1,32,32,32)", "Peak f32",
                   "% of the peak in the op's own rounds"):
        assert needle in text
    # One thread: IREE's programs run on the caller's thread, so that is the only floor measured.
    assert data["meta"]["call_floor"].startswith("local-sync ") and "local-task" not in data["meta"]["call_floor"]
    assert f"per-call floor: **{data['meta']['call_floor']}**" in text
    assert (doc.parent / "benchmarks" / "results.csv").exists()
    assert (doc.parent / "benchmarks" / "speedup_vs_iree_default.png").stat().st_size > 1000
    # The run's programs re-timed beside PyTorch, ratios read off every window (`tools/timing_window_report.py`).
    windows = tmp_path / "windows.md"
    cmd = [sys.executable, str(REPO / "tools" / "timing_window_report.py"), "--run", str(out), "--ops", "GMM",
           "--seconds", "1.2", "--windows", "0.3", "--docs", str(windows)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = windows.read_text()
    assert "| GMM(1,32,32,32) | local-sync |" in text and "0.3 s windows: min / median / max" in text
    assert data["meta"]["command"] in text and "| C2D(" not in text  # only the op asked for
    # The tuned call split into its kernels and IREE's per-call cost (`tools/dispatch_time_report.py`): a build
    # recording every dispatch 20 times takes longer by the kernels' time, which is positive and below the call's.
    dispatch = tmp_path / "dispatch.md"
    cmd = [sys.executable, str(REPO / "tools" / "dispatch_time_report.py"), "--run", str(out), "--repeat", "20",
           "--seconds", "1.5", "--docs", str(dispatch)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    call_us, kernel_us = (float(x) for x in re.search(r"call ([\d.]+) us .* kernels ([\d.]+) us", proc.stdout).groups())
    assert 0 < kernel_us < call_us, proc.stdout
    assert "| GMM(1,32,32,32) |" in dispatch.read_text() and "repeat-count=20" in dispatch.read_text()
    # Beside the matmul's tuned kernels, hand-written C kernels of the register tiles the search offers for it.
    assert "C micro-kernel " in proc.stdout and dispatch.read_text().count("| GMM(1,32,32,32) |") == 2


def test_hand_written_micro_kernels_compute_the_matmul(tmp_path):
    """Each register tile (leftover rows in a tile of their own) computes `a @ b`; a tile that is not whole
    vectors dividing the columns is refused with a one-line error."""
    lanes = detect_host().vector_lanes(4)
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (2, 13, 7)).astype(np.float32)
    b = rng.uniform(-1, 1, (2, 7, 4 * lanes)).astype(np.float32)
    shapes = [f"5x{2 * lanes}", f"4x{lanes}", f"13x{4 * lanes}"]
    kernels = matmul_kernels(tmp_path, a, b, shapes, lanes * 4)
    if shutil.which("gcc") is None and shutil.which("cc") is None:
        assert kernels == []
        pytest.skip("no C compiler (gcc or cc) on PATH: the hand-written kernels cannot be built")
    assert [k.shape for k in kernels] == shapes
    for kernel in kernels:
        kernel.call()  # checked against numpy when built; calling again must not crash on freed operands
    with pytest.raises(AnsorError, match="whole .*-lane vectors"):
        matmul_kernels(tmp_path, a, b, [f"4x{3 * lanes}"], lanes * 4)


@pytest.mark.parametrize("tool", ["timing_window_report.py", "dispatch_time_report.py"])
def test_the_rerun_reports_need_a_finished_run(tmp_path, tool):
    cmd = [sys.executable, str(REPO / "tools" / tool), "--run", str(tmp_path / "none")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "pass --run a finished tools/benchmark_suite.py --out" in proc.stderr


def test_window_ratios_read_a_comparison_of_every_length_off_one_run():
    baseline, contender = [10.0, 10.0, 20.0, 20.0], [10.0, 10.0, 10.0, 10.0]
    assert window_ratios(baseline, contender, 2) == [1.0, 1.5, 2.0]  # a short window lands in one phase
    assert window_ratios(baseline, contender, 4) == [1.5]
    with pytest.raises(ValueError, match="3 baseline rounds against 4"):
        window_ratios(baseline[:3], contender, 2)


def test_threads_reach_every_contender_and_the_report(tmp_path):
    out, doc = tmp_path / "out", tmp_path / "docs" / "two.md"
    cmd = [sys.executable, str(REPO / "tools" / "benchmark_suite.py"), "--quick", "--threads", "2",
           "--shape", "GMM=1,64,64,64", "--contenders", "iree,numpy", "--rewrites", "pad-fusion",
           "--out", str(out), "--docs", str(doc)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((out / "results.json").read_text())
    assert data["meta"]["threads"] == 2 and data["meta"]["budgets"]["rewrites"] == "pad-fusion"
    assert all(c["status"] == "ok" for c in data["cells"]), data["cells"]
    text = doc.read_text()
    assert "batch 1, 2 threads" in text and "local-task, 2 workers" in text and "2 x one core's" in text
    assert "rewrites=`): pad-fusion." in text
    # Both devices a threaded program may run on have their per-call floor measured in the run and reported.
    assert "local-sync " in data["meta"]["call_floor"] and "local-task (2 workers) " in data["meta"]["call_floor"]
    assert f"per-call floor: **{data['meta']['call_floor']}**" in text
    # The idle wake-up setting the run measured under is in the report: it decides multi-threaded timings in a VM.
    assert data["meta"]["machine"]["idle_wakeup"] in text and "cpuidle" in data["meta"]["machine"]["idle_wakeup"]
    # The warm-up the run used (`--quick`: half of a 20 ms round), written from the plan, not as fixed text.
    assert data["meta"]["budgets"]["warm_ms"] == 10 and "untimed warm-up of 10 ms" in text
    assert "pools stopped spinning" in text


def test_unknown_rewrites_are_a_one_line_error(tmp_path):
    cmd = [sys.executable, str(REPO / "tools" / "benchmark_suite.py"), "--quick", "--ops", "GMM",
           "--rewrites", "pad-fusion+nonsense", "--out", str(tmp_path / "out")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--rewrites pad-fusion+nonsense: expected none or one or more of" in proc.stderr


def test_two_cores_have_twice_one_cores_peak_and_the_same_bandwidth():
    one = Roofline(1e11, 2e10, "kernel", "triad", ((1 << 20, 1e11),))
    two = one.scaled(2)
    assert two.peak_flops == 2e11 and two.bandwidth_bytes_s == one.bandwidth_bytes_s
    assert one.scaled(1) is one and "2 x one core's" in two.peak_method


def test_a_measured_peak_is_checked_against_the_documented_fma_throughput(tmp_path):
    assert fma_throughput("znver3").f32_flops_per_cycle == 32
    assert fma_throughput("sapphirerapids").f32_flops_per_cycle == 64
    # A KVM guest on a Granite Rapids Xeon: LLVM names its reported model `rocketlake`, its features say server.
    assert fma_throughput("rocketlake").f32_flops_per_cycle == 32
    assert fma_throughput("rocketlake", ("avx512f", "amx-tile")).f32_flops_per_cycle == 64
    assert "AMX" in peak_check("rocketlake", 2e11, 2.2e9, ("amx-tile",))
    text = peak_check("znver4", 1.1e11, 3.0e9)
    assert "32 f32 FLOP/cycle" in text and "3.44 GHz" in text and "96.0 GFLOP/s" in text and "= 1.15" in text
    assert "unchecked" in peak_check("some-new-cpu", 1e11, None)
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\ncpu MHz\t\t: 2596.126\n")
    assert reported_clock_hz(cpuinfo, tmp_path / "absent") == 2596.126e6
    (tmp_path / "max").write_text("3700000\n")
    assert reported_clock_hz(cpuinfo, tmp_path / "max") == 3.7e9


def test_the_library_never_imports_the_bench_package():
    """ansor_bench is not installed with the library, so no ansor_mlir module may depend on it."""
    offenders = []
    for path in sorted((REPO / "ansor_mlir").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.relative_to(REPO)}: {n}" for n in names if n.split(".")[0] == "ansor_bench"]
    assert not offenders, offenders
    assert not (REPO / "ansor_mlir" / "bench").exists() and not (REPO / "ansor_mlir" / "workloads.py").exists()


def test_fma_chains_and_operands_fit_the_register_file():
    """16 chains of ymm registers spilled on AVX2 (16 registers) and read 56 GFLOP/s where OpenBLAS ran at 87: the
    chains cover FMA latency x pipes (8) and stay in registers with their operands on both register files."""
    for vector_bytes, registers in ((32, 16), (64, 32)):
        assert 8 <= fma_chains(vector_bytes) <= registers - OPERAND_REGISTERS


def test_alternating_rounds_time_each_contender_after_a_warm_up():
    """A contender whose first calls after another's slice are slow (a worker pool waking) is timed warm."""
    last = {"who": None, "slow": 0}

    def contender(who: str):
        def call() -> None:
            if last["who"] != who:
                last["who"], last["slow"] = who, 4 if who == "pool" else 0
            if last["slow"]:
                last["slow"] -= 1
                time.sleep(0.005)
        return call

    contenders = {"other": contender("other"), "pool": contender("pool")}
    warm = time_alternately(contenders, rounds=3, min_round_s=0.01, warm_s=0.03)
    cold = time_alternately(contenders, rounds=3, min_round_s=0.01, warm_s=0.0)
    # Warm calls return at once, cold ones sleep 5 ms: relative, so a loaded host's slow sleeps cannot flip it.
    assert 20 * max(warm["pool"].round_medians) < max(cold["pool"].round_medians)


@pytest.mark.timing
@pytest.mark.skipif(other_threads_cpu_s() is None, reason="no per-thread scheduler statistics (Linux's /proc)")
def test_a_slice_waits_for_another_pools_spinning_thread_to_stop():
    """A pool spinning after its last call (TVM's for about 140 ms) must not take a core from the next contender."""
    stop = time.perf_counter() + 0.15

    def spin() -> None:
        while time.perf_counter() < stop:
            pass

    spinner = threading.Thread(target=spin)
    spinner.start()
    waited = wait_for_idle_pools(max_wait_s=1.0)
    spinner.join()
    assert waited >= 0.1
    assert wait_for_idle_pools(max_wait_s=1.0) < 0.05  # nothing spins now: one step


def test_alternating_rounds_reverse_the_order_every_other_round():
    """ABBA: a host drifting over the run must not favour the contender that always runs first."""
    order: list[str] = []

    def contender(who: str):
        return lambda: order.append(who) if not order or order[-1] != who else None

    time_alternately({"a": contender("a"), "b": contender("b")}, rounds=4, min_round_s=0.001, warm_s=0.0)
    assert order == ["a", "b", "a", "b", "a", "b", "a"]  # the untimed first calls, then ab ba ab ba


def test_an_iree_program_keeps_one_placement_of_its_inputs_for_a_whole_round():
    """Rotating placements on every call keeps a memory-bound program's inputs out of cache while a library's
    stay warm; so an IREE program moves to its next placement once per round, and every placement is used."""
    from ansor_mlir.measure.vm_call import PlacedCalls

    used: list[int] = []
    placed = PlacedCalls([lambda i=i: used.append(i) for i in range(4)])
    rounds = 6
    time_alternately({"iree": placed, "library": lambda: None}, rounds=rounds, min_round_s=0.002, warm_s=0.0)
    runs = [i for k, i in enumerate(used) if k == 0 or used[k - 1] != i]  # the placements, run by run
    assert runs[1:] == [(r + 1) % 4 for r in range(rounds)]  # the first call (before the rounds) on placement 0
    assert len(used) > 2 * (rounds + 1)  # several calls a round, all on that round's placement


def test_the_call_floor_keeps_each_devices_lower_run_and_says_nothing_unmeasured():
    first = (CallFloor("local-sync", 0, 3e-6), CallFloor("local-task", 2, 30e-6))
    second = (CallFloor("local-sync", 0, 4e-6), CallFloor("local-task", 2, 16e-6))
    assert lowest(first, second) == (first[0], second[1])
    assert lowest((), second) == second
    assert floor_text(lowest(first, second)) == "local-sync 3.0 us; local-task (2 workers) 16.0 us"
    assert floor_text(()) == ""
    assert floor_devices(detect_host(threads=1)) == ("local-sync",)
    assert floor_devices(detect_host(threads=4)) == ("local-sync", "local-task")


HEAP_PROBE = r"""
import ctypes, resource, sys
import numpy as np
from ansor_bench.heap import keep_freed_memory
mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
if mallopt is not None:
    mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD pinned low: every 4 MB block a fresh mmap
kept = keep_freed_memory() if sys.argv[1] == "keep" and mallopt is not None else False
np.ones(1 << 20, np.float32)  # the first call maps its memory either way
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    np.ones(1 << 20, np.float32)  # 4 MB, written, freed
print(kept, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20)
"""


def test_kept_heap_serves_a_large_output_without_page_faults(tmp_path):
    """A contender's 4 MB output, allocated and freed call after call, faults on every page when glibc maps it
    afresh; with `keep_freed_memory` the second call on reuses the first one's memory."""
    def faults(mode: str) -> tuple[str, float]:
        proc = subprocess.run([sys.executable, "-c", HEAP_PROBE, mode], capture_output=True, text=True, timeout=60,
                              cwd=REPO, check=True)
        kept, per_call = proc.stdout.split()
        return kept, float(per_call)

    kept, with_kept = faults("keep")
    if kept != "True":
        pytest.skip("not glibc: its malloc has no such policy to set")
    _, without = faults("none")
    assert without > 200 > 5 > with_kept, (without, with_kept)

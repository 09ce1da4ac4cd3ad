"""The accumulator's fill follows the root's parallel tiles into its register tile (`fused_fill`).

Where every parallel tile of the root is cut before its reduction tiles
(`SSRR`), the strategy tiles them with `transform.structured.fuse`, so the
register tile's accumulators start at zero instead of being read back from a
zero-filled output tile. Where a parallel tile is cut inside a reduction loop
the fill keeps tiles of its own: fused there it would zero the partial sums.
Rendering is checked on pinned CPUs; programs run on the host.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import PINNED_CPUS, assert_candidate_matches, pinned_target
from test_transform_packing import K, M, N, linear_bias_relu, micro_kernel_values

from ansor_mlir.codegen.transform_strategy import fused_fill, render_strategy
from ansor_mlir.core.schedule import Candidate, ImplicitGemm, MicroKernel, Pack, Pad, Rfactor
from ansor_mlir.core.task import main_task
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.space.annotation import is_valid
from ansor_mlir.space.dag import task_dag
from ansor_mlir.space.resolve import resolve
from ansor_mlir.space.sketch_rules import generate_sketches

FUSE = "transform.structured.fuse %"


def packed_kernel(target):
    """The linear layer's packed micro-kernel sketch (its `W` packed in panels, bias and ReLU after the root)."""
    mlir = linear_bias_relu(M, N, K)
    task = main_task(extract_tasks(mlir, target, "linear"))
    sketch = next(s for s in generate_sketches(task, target) if s.has(Pack) and s.has(MicroKernel))
    return mlir, task, sketch


def strategy(task, sketch, values: dict) -> str:
    return render_strategy(sketch, Candidate(task.key, sketch.index, tuple(sorted(values.items()))), task, "s")


@pytest.mark.parametrize("cpu", PINNED_CPUS)
def test_the_fill_is_fused_only_above_the_reduction_tiles(cpu):
    target = pinned_target(cpu)
    _, task, sketch = packed_kernel(target)
    whole_k = {**micro_kernel_values(sketch), "d2": (K, 1)}  # no cache tile of K: S S R R
    split_k = {**micro_kernel_values(sketch), "d2": (32, 1)}  # rows cut inside the loop over K tiles: S R S R
    for values in (whole_k, split_k):
        assert is_valid(sketch, values, task, target)
    fused = strategy(task, sketch, whole_k)
    # The fill is fused into the workgroup, then tiled with the root's parallel tiles (cache, row block).
    assert fused.count(FUSE) >= 2
    assert fused.index(FUSE) < fused.index("transform.structured.pack %")
    assert FUSE not in strategy(task, sketch, split_k)


@pytest.mark.parametrize("step", [Pad(), Rfactor(), ImplicitGemm()], ids=lambda s: s.kind)
def test_no_fused_fill_beside_padded_tiles_rfactor_or_im2col(step):
    """`fuse` takes every producer it can tile: the same sketch with any of these steps keeps the fill apart."""
    target = pinned_target(PINNED_CPUS[0])
    _, task, sketch = packed_kernel(target)
    values = {**micro_kernel_values(sketch), "d2": (K, 1)}
    tiles = resolve(sketch, Candidate(task.key, sketch.index, tuple(sorted(values.items()))), task)
    dag = task_dag(task)
    root = dag.ops[dag.root]
    assert fused_fill(sketch, task, dag, tiles) == root.producers[root.num_inputs]
    assert dag.ops[root.producers[root.num_inputs]].is_fill
    with_step = dataclasses.replace(sketch, steps=(*sketch.steps, step))
    assert fused_fill(with_step, task, dag, tiles) is None


def test_a_fused_fill_program_matches_numpy(target):
    mlir, task, sketch = packed_kernel(target)
    values = {**micro_kernel_values(sketch), "d2": (K, 1)}
    assert FUSE in strategy(task, sketch, values)
    rng = np.random.default_rng(2)
    x, w, bias = (rng.uniform(-1, 1, s).astype(np.float32) for s in ((M, K), (N, K), (N,)))
    assert_candidate_matches(target, mlir, "linear", task, sketch, values, [x, w, bias],
                             np.maximum(x @ w.T + bias, 0))

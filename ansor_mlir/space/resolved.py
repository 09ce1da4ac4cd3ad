"""The concrete loop structure a candidate stands for (`space.resolve` builds it).

The strategy emitter, the validity checks and the features all read a
`Resolved`, never raw knob values, so they describe the same program. Its
fields are the root's tiles per level and what the trace's steps add (each
kind's resolve hook in `steps` sets its own); its properties are derived
from those alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from math import prod

from ansor_mlir.core.schedule import Candidate, ChoiceKnob, Sketch, is_register_level
from ansor_mlir.core.task import LinalgOpInfo, Task
from ansor_mlir.space.dag import Dag, dim_map, operands_along, output_dims, vector_loop, window_maps


@dataclass(frozen=True)
class Resolved:
    """A candidate's loop structure: the root's tile per loop at each level, its register tile, and the
    register tiles of consumer loops the root does not have.

    `per_level[level][d]` is 0 where loop `d` is not tiled at that level (its
    tile stays the one above); `register` is the innermost tile per loop.
    """

    sketch: Sketch
    candidate: Candidate
    task: Task
    dag: Dag | None
    extents: tuple[int, ...]
    iterator_types: tuple[str, ...]
    per_level: dict[str, list[int]]
    register: list[int]
    consumer_tiles: dict[int, dict[int, int]] = field(default_factory=dict)
    # What the trace's steps add to the loop structure (each set by its kind's resolve hook, `steps`).
    # Consumers fused into the root's register tiles (`inner`), not computed after it per workgroup.
    consumers_inner: bool = False
    # A packed root's cache tiles of its row loops (those no packed operand reads), cut after the packing as
    # GotoBLAS orders its loops, 0 elsewhere; empty when the root is not packed or not cached.
    deferred_row_tiles: tuple[int, ...] = ()
    # The level whose K loop the strategy unrolls around an implicit-GEMM im2col gather, and its trip count.
    unrolled_k_level: tuple[str, int] | None = None
    # Reduction loops whose register tile is a vector of partial sums (rfactor): accumulators too.
    partial_sum_dims: tuple[int, ...] = ()
    # Per level, the order of the root's loops (a permutation of its dims) where it is not their own.
    loop_order: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # Stack buffers the steps allocate per workgroup (packed panels, im2col panels), in bytes.
    step_stack_bytes: int = 0

    @property
    def root(self) -> LinalgOpInfo:
        assert self.dag is not None
        return self.dag.ops[self.dag.root]

    def choice(self, knob: ChoiceKnob) -> str | None:
        return self.candidate.choice(knob) if knob in self.sketch.knobs else None

    def level_tiles(self) -> dict[str, tuple[int, ...]]:
        """Effective tile per loop at Ansor's three levels (workgroup, cache, register), whole loop when untiled."""
        reduction = [t == "reduction" for t in self.iterator_types]

        def pick(names: tuple[str, ...], parent: tuple[int, ...], dims_red: bool) -> tuple[int, ...]:
            out = list(parent)
            for name in names:
                for d, size in enumerate(self.per_level.get(name, ())):
                    if size and reduction[d] == dims_red:
                        out[d] = min(int(size), parent[d])
            return tuple(out)

        # GPU levels in the same roles: the block tile, the shared-memory stage (reduction step), the thread tile.
        wg = pick(("distribution", "workgroup"), self.extents, False)
        cache = pick(("cache_reduction", "reduction", "partial_reduction"), pick(("cache_parallel",), wg, False), True)
        reg = pick(("vector_reduction",), pick(("vector_common_parallel", "vector_inner_parallel", "thread"), cache,
                                               False), True)
        return {"wg": wg, "cache": cache, "reg": reg}

    @cached_property
    def above_register(self) -> list[int]:
        """The root's tile per loop above the register levels (cache, else workgroup tile, else whole loop)."""
        current = list(self.extents)
        for level in self.sketch.levels:
            if not is_register_level(level):
                current = [size or extent for size, extent in zip(self.per_level[level], current, strict=True)]
        return current

    @cached_property
    def output_tiles(self) -> list[tuple[int, ...]]:
        """The innermost tile of every vectorized op's output, in the output's dimension order.

        The root's register tile, and per consumer its loops mapped to the root's
        (or its own knob, or the whole extent); fills mirror the root's output.
        """
        dag, reg = self.dag, self.register
        assert dag is not None
        tiles = [tuple(reg[d] if d is not None else 1 for d in output_dims(dag.ops[dag.root]))]
        for c in dag.consumers:
            op = dag.ops[c]
            sizes = list(op.extents)
            for mine, theirs in dim_map(dag.ops, dag.root, c).items():
                sizes[mine] = reg[theirs]
            for d, size in self.consumer_tiles.get(c, {}).items():
                sizes[d] = size
            tiles.append(tuple(sizes[d] if d is not None else 1 for d in output_dims(op)))
        return tiles

    @property
    def workgroups(self) -> int:
        """How many workgroups the distribution tiles make (the whole loop where a loop is not distributed)."""
        return prod(-(-extent // tile) for extent, tile in zip(self.extents, self.level_tiles()["wg"], strict=True))

    @property
    def accumulator_elements(self) -> int:
        """Accumulators of the root's register tile: its parallel tile, times the partial sums it keeps."""
        root, reg = self.root, self.register
        parallel = prod(t for t, it in zip(reg, root.iterator_types, strict=True) if it == "parallel")
        return parallel * prod(reg[d] for d in self.partial_sum_dims)

    @cached_property
    def workgroup_output_elements(self) -> int:
        """Elements of the root's output tile per workgroup (a stack buffer when consumers run after the root)."""
        dist = self.per_level.get("distribution", [0] * len(self.extents))
        return prod((dist[d] or self.extents[d]) if d is not None else 1 for d in output_dims(self.root))

    @cached_property
    def padded_panel_bytes(self) -> int:
        """Bytes of the root's operand tiles padded outside its reduction loop (stack buffers).

        A padded root is padded along its parallel loops before its reduction
        loops are tiled, so every input tile spans whole reduction loops there.
        """
        root, reg = self.root, self.register
        sizes = [reg[d] if it == "parallel" else root.extents[d] for d, it in enumerate(root.iterator_types)]
        total = 0
        for amap in root.indexing_maps:
            total += amap.footprint(sizes)
        return total * self.task.root.element_bytes

    @cached_property
    def _window_sizes(self) -> list[int]:
        """The root's loops over one workgroup: its distribution tiles, whole reduction loops."""
        root = self.root
        dist = self.per_level.get("distribution", [0] * len(self.extents))
        return [(dist[d] or extent) if it == "parallel" else extent
                for d, (extent, it) in enumerate(zip(root.extents, root.iterator_types, strict=True))]

    @cached_property
    def padded_input_bytes(self) -> int:
        """Bytes of the root's windowed inputs over the workgroup tile when the dispatch pads them itself: the
        strategy pads each workgroup's input tile into a stack buffer (`transform_strategy._fuse_pads`)."""
        if not self.task.pads_input:
            return 0
        return sum(amap.footprint(self._window_sizes) for amap in window_maps(self.root)) * self.task.root.element_bytes

    @property
    def padded_input_tile(self) -> tuple[int, ...]:
        """The workgroup's tile of the (first) windowed input, in that input's non-unit dimensions: the shape of
        the pad the strategy copies per workgroup when the dispatch pads its input itself."""
        maps = window_maps(self.root)
        if not maps:
            return ()
        full = maps[0].spans(self.root.extents)
        return tuple(span for span, whole in zip(maps[0].spans(self._window_sizes), full, strict=True) if whole != 1)

    @cached_property
    def packed_panel_bytes(self) -> int:
        """Bytes of the packed input panels (stack buffers): each input indexed by the vector loop, over the
        root's tile above the register levels."""
        root, extents = self.root, self.above_register
        inputs = [dims for i, dims in operands_along(root, vector_loop(root)) if i < root.num_inputs]
        return sum(prod(extents[d[0]] for d in dims) for dims in inputs) * self.task.root.element_bytes

    @cached_property
    def im2col_panel_bytes(self) -> int:
        """Bytes of the im2col panel of an implicit-GEMM root (a stack buffer): its input that the output's
        vector loop does not read (the im2col of the windowed input), over the tile above the register
        levels, where the strategy gathers it."""
        root, extents = self.root, self.above_register
        vector = vector_loop(root)
        panels = [amap for amap in root.indexing_maps[: root.num_inputs] if vector not in amap.dims()]
        return sum(amap.footprint(extents) for amap in panels[:1]) * self.task.root.element_bytes

    @cached_property
    def im2col_buffers(self) -> int:
        """How many im2col panels the strategy allocates: one, or one per K tile when it unrolls the K loop
        around row tiles cut after packing (each unrolled row loop gathers into a buffer of its own: GRP's
        9 K tiles made 9 panels, 34-133 KiB against IREE's 32 KiB, all rejected by IREE)."""
        unrolled = self.unrolled_k_level
        return unrolled[1] if unrolled and any(self.deferred_row_tiles) else 1


def input_tiles(resolved: Resolved) -> list[tuple[int, ...]]:
    """The root's register tile of every input, in the input's dimension order.

    A compound access (`d1 * 2 + d4`) spans more than one element when any of
    its loops does (counted as 2: only unit or not matters); constants span 1.
    """
    root, reg = resolved.root, resolved.register
    tiles = []
    for amap in root.indexing_maps[: root.num_inputs]:
        tile = []
        for expr in amap.results:
            if expr.is_dim():
                tile.append(reg[expr.dims()[0]])
            else:
                tile.append(2 if any(reg[d] > 1 for d in expr.dims()) else 1)
        tiles.append(tuple(tile))
    return tiles


def has_interior_unit_dim(tile: tuple[int, ...]) -> bool:
    """A unit dimension after a non-unit one (`[1, 2, 1, 16]`, `[4, 1]`).

    Folding unit dims rank-reduces such a tile with `extract_slice` /
    `insert_slice`; MLIR's `insert_slice(transfer_write)` folding (run by
    `vectorize_children_and_apply_patterns`) then rewrites the write with a
    minor-identity map on the full-rank tensor, which drops all but the first
    row of the tile: wrong answers, not a compile error (IREE 3.13). Only
    leading unit dims fold correctly.
    """
    first = next((i for i, size in enumerate(tile) if size > 1), len(tile))
    return any(size == 1 for size in tile[first:])


def workgroup_stack_bytes(resolved: Resolved, element_bytes: int, stores_into_slice: bool) -> int:
    """A workgroup's stack buffers as a transform strategy allocates them: the root's workgroup output when
    consumers run after the root, when one workgroup covers the whole output (the one-iteration forall folds away
    and the output tile is allocated) or when the dispatch stores into part of its output (its `map_store` writes
    each workgroup's result tile from a stack buffer); the buffers the steps add (packed and im2col panels) and a
    padded input tile."""
    root = resolved.root
    assert resolved.dag is not None
    wg_output = resolved.workgroup_output_elements
    whole = wg_output == prod(root.extents[d] if d is not None else 1 for d in output_dims(root))
    after_root = bool(resolved.dag.consumers) and not resolved.consumers_inner
    stack = wg_output * element_bytes if after_root or whole or stores_into_slice else 0
    return stack + resolved.step_stack_bytes + resolved.padded_input_bytes

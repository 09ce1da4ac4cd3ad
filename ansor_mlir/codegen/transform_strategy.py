"""Emit a transform sketch's candidate as the transform-dialect strategy IREE runs.

A sketch of this family *is* the codegen of its dispatch: a
`transform.named_sequence` that IREE runs instead of one of its pipelines
(`#iree_codegen.transform_dialect_codegen`). The strategy is derived from the
dispatch's DAG as IREE's codegen sees it (`Task.codegen_ops`), from the last
op to the first, as Ansor does:

- the last op is tiled to workgroups with `tile_using_forall` (and the
  workgroup-count region), every producer is fused into that tile;
- the root (the op with reductions) is tiled for cache and registers in
  `SSRSR` order; its consumers (epilogues) are fused into the root's tiles at
  the register level (`inner`) or computed after it per workgroup (`outer`);
- reduction factorization (rfactor): `tile_reduction_using_for` keeps a
  vector of partial sums across the reduction loop;
- padding: register tiles that do not divide the loop (whole vectors over a
  109-wide output) are padded to full tiles (`transform.structured.pad`)
  and the pads vectorized into out-of-bounds reads and writes;
- unit dimensions are folded so convolution windows vectorize as
  contractions, then everything is vectorized, accumulators hoisted out of
  the reduction loops (cache write), bufferized and the vectors lowered with
  a chosen contraction lowering.

Every decision is a knob (`TileKnob` for tile sizes, `ChoiceKnob` for
categorical ones); `render_strategy` turns a candidate into text
deterministically, so a candidate always rebuilds the byte-identical script.
"""

from __future__ import annotations

from math import gcd

from ansor_mlir.core.schedule import LEVEL_KIND, REDUCTION, SPATIAL, Candidate, Decompose, Pack, Pad, Rfactor, Sketch
from ansor_mlir.core.task import LinalgOpInfo, Task
from ansor_mlir.space.dag import Dag, dim_map, operands_along, output_dims, vector_loop
from ansor_mlir.space.decisions import CACHE_WRITE, FUSION, LOWERING, REDUCTION_LOWERING
from ansor_mlir.space.resolve import Resolved, resolve

ANY = "!transform.any_op"
BLOCKS = ("z", "y", "x")


class _Script:
    """Accumulates strategy lines with fresh, deterministic handle names."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.counter = 0

    def fresh(self, base: str) -> str:
        self.counter += 1
        return f"%{base}{self.counter}"

    def add(self, line: str) -> None:
        self.lines.append("  " + line)

    def tile_for(self, handle: str, sizes: list[int], base: str, handle_type: str = ANY) -> tuple[str, list[str]]:
        loops = [self.fresh(f"{base}_loop") for s in sizes if s]
        tiled = self.fresh(base)
        results = ", ".join([tiled, *loops])
        types = ", ".join([ANY] * (1 + len(loops)))
        self.add(
            f"{results} = transform.structured.tile_using_for {handle} tile_sizes {_ints(sizes)}"
            f" : ({handle_type}) -> ({types})"
        )
        return tiled, loops

    def fuse_into(self, producer: str, container: str, base: str) -> tuple[str, str]:
        fused, new = self.fresh(base), self.fresh("container")
        self.add(
            f"{fused}, {new} = transform.structured.fuse_into_containing_op {producer} into {container}"
            f" : ({ANY}, {ANY}) -> ({ANY}, {ANY})"
        )
        return fused, new

    def pad(self, handle: str, op: LinalgOpInfo, element_type: str, base: str, dims: list[int]) -> str:
        """Pad loops `dims` of `op`'s (partial) tile to their static bounds; the result is sliced back."""
        zero = "0.0" if element_type.startswith(("f", "bf")) else "0"
        values = ", ".join([f"{zero} : {element_type}"] * len(op.indexing_maps))
        padded, pad, copy = self.fresh(base), self.fresh(f"{base}pad"), self.fresh(f"{base}copy")
        self.add(
            f"{padded}, {pad}, {copy} = transform.structured.pad {handle} <padding_values = [{values}], "
            f"padding_dimensions = {_ints(dims)}, copy_back_op = \"none\">"
            f" : ({ANY}) -> ({ANY}, {ANY}, {ANY})"
        )
        return padded

    def patterns(self, target: str, patterns: list[str]) -> None:
        self.add(f"transform.apply_patterns to {target} {{")
        for pattern in patterns:
            self.add(f"  transform.apply_patterns.{pattern}")
        self.add(f"}} : {ANY}")


def _ints(values: list[int]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"



def _mapped(sizes_by_root_dim: list[int], mapping: dict[int, int], rank: int, extra: dict[int, int]) -> list[int]:
    out = [0] * rank
    for mine, root_dim in mapping.items():
        out[mine] = sizes_by_root_dim[root_dim]
    for d, size in extra.items():
        out[d] = size
    return out


def render_strategy(sketch: Sketch, candidate: Candidate, task: Task, name: str) -> str:
    """The `transform.named_sequence @name` a candidate of a transform sketch stands for."""
    tiles = resolve(sketch, candidate, task)
    dag = tiles.dag
    assert dag is not None
    rfactor = sketch.has(Rfactor)
    ops = dag.ops
    root = ops[dag.root]
    s = _Script()
    handles = [f"%op{i}" for i in range(len(ops))]
    s.add(f"%ops = transform.structured.match interface{{LinalgOp}} in %module : ({ANY}) -> {ANY}")
    if len(ops) > 1:
        s.add(f"{', '.join(handles)} = transform.split_handle %ops : ({ANY}) -> ({', '.join([ANY] * len(ops))})")
    else:
        handles = ["%ops"]

    # 1. Workgroups: tile the last op, fuse every producer into its tile.
    last_map = dim_map(ops, dag.root, dag.last)
    dist = tiles.per_level.get("distribution", [0] * len(root.extents))
    wg_sizes = _mapped(dist, last_map, len(ops[dag.last].extents), {})
    if not any(wg_sizes):
        wg_sizes[0] = ops[dag.last].extents[0]
    mapping = ", ".join(f"#gpu.block<{b}>" for b in BLOCKS[-sum(1 for x in wg_sizes if x):])
    source = handles[dag.last]
    handles[dag.last], forall = s.fresh("wg_last"), s.fresh("forall")
    s.add(
        f"{handles[dag.last]}, {forall} = transform.structured.tile_using_forall {source}"
        f" tile_sizes {_ints(wg_sizes)} (mapping = [{mapping}]) : ({ANY}) -> ({ANY}, {ANY})"
    )
    s.add(f"transform.iree.populate_workgroup_count_region_using_num_threads_slice {forall} : ({ANY}) -> ()")
    for i in range(dag.last - 1, -1, -1):
        handles[i], forall = s.fuse_into(handles[i], forall, f"wg{i}_")

    # 2. Consumers fused into the root's register tiles, or tiled on their own.
    inner = dag.consumers and tiles.choice(FUSION) == "inner"
    parallel_levels = [lv for lv in sketch.levels if LEVEL_KIND[lv] == SPATIAL and lv != "distribution"
                       and lv != "vector_inner_parallel"]
    extras = tiles.consumer_tiles
    if inner:
        for level in parallel_levels:
            sizes = _mapped(tiles.per_level[level], last_map, len(ops[dag.last].extents), extras.get(dag.last, {})
                            if level == "vector_common_parallel" else {})
            if not any(sizes):
                continue
            handles[dag.last], loops = s.tile_for(handles[dag.last], sizes, f"t{dag.last}_")
            for i in range(dag.last - 1, -1, -1):
                handles[i], _ = s.fuse_into(handles[i], loops[-1], f"f{i}_")
        root_levels = [lv for lv in sketch.levels if LEVEL_KIND[lv] == REDUCTION]
    else:
        root_levels = [lv for lv in sketch.levels if lv != "distribution" and lv != "vector_inner_parallel"]

    # 3. The root: cache and register levels, or the rfactor split. A padded root is padded along its
    # parallel loops before its reduction loops are tiled (the accumulator tile is padded once, outside
    # the reduction loop), and along its reduction loops inside it.
    padded = sketch.has(Pad)
    packed = sketch.has(Pack)
    parallel_dims = [d for d, it in enumerate(root.iterator_types) if it == "parallel"]
    for level in root_levels:
        sizes = tiles.per_level[level]
        if rfactor and level == "vector_reduction":
            continue
        if packed and level.startswith("vector_"):
            if level == "vector_common_parallel":
                handles[dag.root] = _pack_root(s, handles[dag.root], dag, tiles)
            sizes = _packed_sizes(sizes, dag)
        if padded and level == "vector_reduction":
            handles[dag.root] = s.pad(handles[dag.root], root, task.root.element_type, "pad_par", parallel_dims)
        if any(sizes):
            handles[dag.root], _ = s.tile_for(handles[dag.root], sizes, f"r{level[:3]}_")
    if padded and root.reduction_dims:
        handles[dag.root] = s.pad(handles[dag.root], root, task.root.element_type, "pad_red", root.reduction_dims)
    decomposed = sketch.has(Decompose)
    if decomposed:
        # The register tile (unit oh and kh) becomes `linalg.conv_2d_nhwc_hwcf`, then a 1-D convolution
        # that the vectorizer handles with strided windows (several output pixels per tile).
        named, conv_1d = s.fresh("conv2d"), s.fresh("conv1d")
        s.add(f"{named} = transform.structured.specialize {handles[dag.root]} : ({ANY}) -> {ANY}")
        s.add(f"{conv_1d} = transform.structured.decompose {named} : ({ANY}) -> {ANY}")
        handles[dag.root] = conv_1d
    if rfactor:
        split_sizes = tiles.per_level.get("vector_reduction", [0] * len(root.extents))
        inner_red = [0] * len(root.extents)
        last_red = root.reduction_dims[-1]
        inner_red[last_red] = split_sizes[last_red]
        if inner_red[last_red]:
            fills, split, combine, loop = (s.fresh("rf_fill"), s.fresh("rf_split"), s.fresh("rf_combine"),
                                           s.fresh("rf_loop"))
            s.add(
                f"{fills}, {split}, {combine}, {loop} = transform.structured.tile_reduction_using_for "
                f"{handles[dag.root]} by tile_sizes = {_ints(inner_red)} : ({ANY}) -> ({ANY}, {ANY}, {ANY}, {ANY})"
            )
            outer_red = [size if d != last_red else 0 for d, size in enumerate(split_sizes)]
            if any(outer_red):
                s.tile_for(split, outer_red, "rf_tiled")

    # 4. Fills and (outer) consumers get register tiles of their own.
    if not inner:
        reg = tiles.register
        for i, op in enumerate(ops):
            if i == dag.root:
                continue
            if op.is_fill:
                if dag.root in [j for j, o in enumerate(ops) if i in o.producers]:
                    rank = len(op.extents)
                    sizes = [reg[d] if d is not None and reg[d] != root.extents[d] else 0
                             for d in output_dims(root)][:rank]
                    if any(sizes):
                        handles[i], _ = s.tile_for(handles[i], sizes, f"fill{i}_")
                continue
            mapping_i = dim_map(ops, dag.root, i)
            sizes = [0] * len(op.extents)
            for mine, theirs in mapping_i.items():
                if reg[theirs] != root.extents[theirs]:
                    sizes[mine] = reg[theirs]
            for d, size in extras.get(i, {}).items():
                sizes[d] = size
            if any(sizes):
                handles[i], _ = s.tile_for(handles[i], sizes, f"c{i}_")

    # 4b. Padding: the other ops' partial register tiles become full, static tiles.
    if padded:
        for i, op in enumerate(ops):
            if i != dag.root:
                handles[i] = s.pad(handles[i], op, task.root.element_type, f"pad{i}_", list(range(len(op.extents))))

    # 5. Vectorize, cache write (hoist accumulators), bufferize, lower vectors.
    s.add(f"%func = transform.structured.match ops{{[\"func.func\"]}} in %module : ({ANY}) -> {ANY}")
    s.patterns("%func", ["linalg.tiling_canonicalization", "scf.for_loop_canonicalization", "canonicalization"])
    if not packed and not decomposed:
        # Unit window loops fold away so window tiles vectorize as contractions. A packed root has no
        # windows, and its output tile has an interior unit loop (`[1, 8, 1, 32]`), which the fold breaks;
        # a 1-D convolution would fold back into a generic the vectorizer cannot handle.
        s.patterns("%func", ["linalg.fold_unit_extent_dims_via_slices", "canonicalization"])
    vectorize_padding = " <{vectorize_padding}>" if padded else ""
    s.add(f"%vfunc = transform.structured.vectorize_children_and_apply_patterns %func{vectorize_padding}"
          f" : ({ANY}) -> {ANY}")
    s.patterns("%vfunc", ["linalg.tiling_canonicalization", "scf.for_loop_canonicalization", "canonicalization"])
    s.add(f"transform.apply_cse to %vfunc : {ANY}")
    if tiles.choice(CACHE_WRITE) in (None, "hoist"):
        s.add(f"%loops = transform.structured.match ops{{[\"scf.for\"]}} in %vfunc : ({ANY}) -> {ANY}")
        s.add(f"transform.foreach %loops : {ANY} {{")
        s.add(f"^bb0(%loop: {ANY}):")
        s.add(f"  transform.loop.hoist_loop_invariant_subsets %loop : {ANY}")
        s.add("}")
        s.patterns("%vfunc", ["canonicalization"])
    s.add(f"transform.iree.eliminate_empty_tensors %module : ({ANY}) -> ()")
    s.add(f"%bfunc = transform.iree.bufferize %vfunc : ({ANY}) -> {ANY}")
    s.add(f"%mfunc = transform.structured.match ops{{[\"func.func\"]}} in %bfunc : ({ANY}) -> {ANY}")
    s.add(f"transform.iree.forall_to_workgroup %mfunc : ({ANY}) -> ()")
    if padded or packed:
        # Pads that stay materialised (a fused consumer's input tile) and packed panels inside cache loops
        # bufferize to stack buffers in the loop.
        s.add(f"transform.iree.hoist_static_alloc %mfunc : ({ANY}) -> ()")
    s.patterns("%mfunc", ["canonicalization"])
    s.add(f"transform.apply_cse to %mfunc : {ANY}")
    lowering = tiles.choice(LOWERING) or "outerproduct"
    s.patterns("%mfunc", [f"vector.lower_contraction lowering_strategy = \"{lowering}\""])
    s.patterns("%mfunc", ["vector.lower_outerproduct"])
    strategy = tiles.choice(REDUCTION_LOWERING) or "innerparallel"
    s.patterns("%mfunc", [f"vector.{p} lowering_strategy = \"{strategy}\"" for p in (
        "reorder_multi_reduction_dims", "multi_reduction_flattening", "multi_reduction_unrolling")])
    s.patterns("%mfunc", ["vector.lower_transpose"])
    s.patterns("%mfunc", ["vector.transfer_permutation_patterns", "vector.lower_transfer max_transfer_rank = 1"])
    s.patterns("%mfunc", ["vector.lower_shape_cast", "vector.lower_broadcast"])
    s.patterns("%mfunc", ["canonicalization"])
    s.add(f"transform.apply_cse to %mfunc : {ANY}")
    s.add(
        "%none = transform.param.constant #iree_codegen.translation_info<pipeline = "
        "#iree_codegen.no_pipeline> -> !transform.any_param"
    )
    s.add(f"transform.annotate %mfunc \"translation_info\" = %none : {ANY}, !transform.any_param")
    s.add("transform.yield")
    header = f"transform.named_sequence @{name}(%module: {ANY} {{transform.readonly}}) {{"
    return "\n".join([header, *s.lines, "}"]) + "\n"


GENERIC = '!transform.op<"linalg.generic">'
PACK = '!transform.op<"linalg.pack">'
UNPACK = '!transform.op<"linalg.unpack">'
LOWERED_PACK = '(!transform.op<"tensor.pad">, !transform.op<"tensor.expand_shape">, !transform.op<"linalg.transpose">)'
LOWERED_UNPACK = ('(!transform.op<"tensor.empty">, !transform.op<"linalg.transpose">, '
                  '!transform.op<"tensor.collapse_shape">, !transform.op<"tensor.extract_slice">, '
                  '!transform.op<"linalg.copy">)')



def _pack_root(s: _Script, handle: str, dag: Dag, tiles: Resolved) -> str:
    """Pack the root's operands along the vector loop by the register tile `nr`, above the register levels.

    Every operand indexed by the vector loop gets a `[..., nr]` inner tile
    (`transform.structured.pack`): the output's is a reshape (the vector loop
    is already innermost), a transposed input's (`K[j, h, k]` ->
    `[j/nr, h, k, nr]`) is a real transpose, tiled into `nr x gcd(k, nr)`
    vector transposes. The packed root has one more loop (the inner `nr`).
    """
    root = dag.ops[dag.root]
    vector = vector_loop(root)
    nr = tiles.register[vector]
    extents = tiles.above_register
    packed, generic = s.fresh("packed"), s.fresh("packed_any")
    sizes = [nr if d == vector else 0 for d in range(len(root.extents))]
    s.add(f"{packed} = transform.structured.pack {handle} packed_sizes = {_ints(sizes)} : ({ANY}) -> ({GENERIC})")
    for operand, dims in operands_along(root, vector):
        pack, lowered = s.fresh("pack"), [s.fresh("pad"), s.fresh("expand"), s.fresh("transpose")]
        s.add(f"{pack} = transform.get_producer_of_operand {packed}[{operand}] : ({GENERIC}) -> ({PACK})")
        s.add(f"{', '.join(lowered)} = transform.structured.lower_pack {pack} : ({PACK}) -> {LOWERED_PACK}")
        if operand < root.num_inputs:
            # The transpose's loops are the packed operand's dims: tile all but its two innermost.
            inner = dims[-1][0]
            transpose_tiles = [1] * len(dims) + [0]
            transpose_tiles[-2] = gcd(extents[inner], nr)
            s.tile_for(lowered[2], transpose_tiles, "pack_tr", '!transform.op<"linalg.transpose">')
    unpack = s.fresh("unpack")
    s.add(f"{unpack} = transform.get_consumers_of_result {packed}[0] : ({GENERIC}) -> ({UNPACK})")
    lowered = [s.fresh(n) for n in ("empty", "utranspose", "collapse", "slice", "copy")]
    s.add(f"{', '.join(lowered)} = transform.structured.lower_unpack {unpack} : ({UNPACK}) -> {LOWERED_UNPACK}")
    s.add(f"{generic} = transform.cast {packed} : {GENERIC} to {ANY}")
    return generic


def _packed_sizes(sizes: list[int], dag: Dag) -> list[int]:
    """A register level's tile sizes in the packed root's loops: the vector loop counts whole `nr` blocks."""
    vector = vector_loop(dag.ops[dag.root])
    out = list(sizes) + [0]
    out[vector] = 1 if sizes[vector] else 0
    return out



def strategy_name(task: Task, candidate: Candidate) -> str:
    return f"ansor_strategy_{task.key}_s{candidate.sketch_index}"

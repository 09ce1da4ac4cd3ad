"""Transform-dialect codegen strategies: the second sketch family.

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

import re
from dataclasses import dataclass
from math import gcd, prod

from ansor_mlir.core.schedule import LEVEL_KIND, REDUCTION, SPATIAL, Candidate, ChoiceKnob, Sketch, TileKnob, tile_knobs
from ansor_mlir.core.task import LinalgOpInfo, Task

TRANSFORM = "transform"
PIPELINE = "TransformDialectCodegen"
ANY = "!transform.any_op"
MAX_DISTRIBUTED = 3
BLOCKS = ("z", "y", "x")
PADDING = "padding"
PACKING = "packing"
DECOMPOSE = "decompose"
# Largest loop whose divisors are all useless as a register tile is still tiled
# well without padding: a loop over 8 with no divisor in 2..8 is prime-like.
AWKWARD_LOOP = 8

FUSION = ChoiceKnob("consumer_fusion", ("inner", "outer"))
CACHE_WRITE = ChoiceKnob("cache_write", ("hoist", "none"))
LOWERING = ChoiceKnob("lowering", ("outerproduct", "dot", "parallelarith"))
REDUCTION_LOWERING = ChoiceKnob("reduction_lowering", ("innerparallel", "innerreduction"))


# ---- reading the DAG ---------------------------------------------------------


def _map_results(amap: str) -> list[str]:
    return [r.strip() for r in amap.split("->", 1)[1].strip()[1:-1].split(",") if r.strip()]


def _dims_of(expr: str) -> list[int]:
    return [int(d) for d in re.findall(r"d(\d+)", expr)]


def codegen_root(ops: tuple[LinalgOpInfo, ...]) -> int:
    """IREE's root: the last op with reductions, else the last non-fill op."""
    compute = [i for i, op in enumerate(ops) if not op.is_fill]
    with_reduction = [i for i in compute if ops[i].reduction_dims]
    return (with_reduction or compute)[-1]


def output_dims(op: LinalgOpInfo) -> list[int | None]:
    """Per result dimension of the op's (first) output, the loop it indexes."""
    out = []
    for expr in _map_results(op.indexing_maps[op.num_inputs]):
        out.append(int(expr[1:]) if re.fullmatch(r"d\d+", expr) else None)
    return out


def dim_map(ops: tuple[LinalgOpInfo, ...], root: int, consumer: int) -> dict[int, int]:
    """Loops of `consumer` that walk the same iteration space as loops of `root`.

    Follows the chain of producers from `consumer` back to `root`, composing
    each consumer's input indexing map with its producer's output map.
    """
    if consumer == root:
        return {d: d for d in range(len(ops[root].extents))}
    op = ops[consumer]
    for operand, producer in enumerate(op.producers[: op.num_inputs]):
        if producer < 0 or ops[producer].is_fill:
            continue
        inner = dim_map(ops, root, producer)
        if not inner and producer != root:
            continue
        result = {}
        for mine, theirs in zip(_map_results(op.indexing_maps[operand]), output_dims(ops[producer]), strict=False):
            if theirs is not None and re.fullmatch(r"d\d+", mine) and theirs in inner:
                result[int(mine[1:])] = inner[theirs]
        if result:
            return result
    return {}


def unit_register_dims(op: LinalgOpInfo) -> set[int]:
    """Loops whose register tile must be 1 so that the tile vectorizes.

    A loop inside a compound access (`d1 * 2 + d4`: convolution windows,
    strides, dilations) is not a projected permutation; folding unit loops
    away turns the tile into a contraction. One parallel loop with
    coefficient 1 may stay (stride-1 windows), every other loop is unit.
    """
    forced: set[int] = set()
    for amap in op.indexing_maps[: op.num_inputs]:
        for expr in _map_results(amap):
            if not re.search(r"[+*]", expr):
                continue
            free = [
                int(m.group(1)) for m in re.finditer(r"(?<![*\w])d(\d+)(?!\s*\*)", expr)
                if op.iterator_types[int(m.group(1))] == "parallel"
            ]
            keep = free[0] if len(free) == 1 and "*" not in expr.split("+")[0] else None
            forced |= {d for d in _dims_of(expr) if d != keep}
    return forced


def operands_along(op: LinalgOpInfo, loop: int) -> list[tuple[int, list[list[int]]]]:
    """(operand index, loops of each of its dims) of every operand (inputs, then output) indexed by `loop`."""
    found = []
    for i, amap in enumerate(op.indexing_maps):
        dims = [_dims_of(expr) for expr in _map_results(amap)]
        if any(loop in d for d in dims):
            found.append((i, dims))
    return found


def conv_2d_loops(op: LinalgOpInfo) -> tuple[int, int, int, int, int, int, int] | None:
    """Loops `(n, oh, ow, co, kh, kw, ci)` of an NHWC x HWCF convolution (strided, dilated), else None.

    This is the form IREE's codegen sees for a 2-D convolution (the batch
    loop re-inserted): `transform.structured.specialize` turns it back into
    `linalg.conv_2d_nhwc_hwcf`, which `transform.structured.decompose` splits
    into 1-D convolutions once `oh` and `kh` are unit.
    """
    if op.num_inputs != 2 or len(op.indexing_maps) != 3 or not {"arith.mulf", "arith.addf"} <= set(op.body_ops):
        return None
    inp, flt, out = (_map_results(m) for m in op.indexing_maps)
    if not (len(inp) == len(flt) == len(out) == 4) or not all(re.fullmatch(r"d\d+", e) for e in flt + out):
        return None
    n, oh, ow, co = (int(e[1:]) for e in out)
    kh, kw, ci, co_f = (int(e[1:]) for e in flt)
    if co_f != co or inp[0] != f"d{n}" or inp[3] != f"d{ci}":
        return None
    if set(_dims_of(inp[1])) != {oh, kh} or set(_dims_of(inp[2])) != {ow, kw}:
        return None
    kinds = ["parallel"] * 4 + ["reduction"] * 3
    if [op.iterator_types[d] for d in (n, oh, ow, co, kh, kw, ci)] != kinds:
        return None
    return n, oh, ow, co, kh, kw, ci


def forced_unit_dims(rules: tuple[str, ...], op: LinalgOpInfo) -> set[int]:
    """Loops a sketch's register tile keeps unit: `unit_register_dims`, or only `oh` and `kh` when the
    convolution is decomposed into 1-D convolutions (which vectorize strided windows themselves)."""
    loops = conv_2d_loops(op) if DECOMPOSE in rules else None
    if loops is None:
        return unit_register_dims(op)
    return {loops[1], loops[4]}


@dataclass(frozen=True)
class Dag:
    """The roles of a dispatch's ops, read from loop structure only."""

    ops: tuple[LinalgOpInfo, ...]
    root: int

    @property
    def last(self) -> int:
        return len(self.ops) - 1

    @property
    def consumers(self) -> tuple[int, ...]:
        return tuple(i for i in range(self.root + 1, len(self.ops)) if not self.ops[i].is_fill)

    def distributed_dims(self) -> tuple[int, ...]:
        root = self.ops[self.root]
        last_map = dim_map(self.ops, self.root, self.last)
        reachable = set(last_map.values())
        dims = [
            d for d in range(len(root.extents))
            if root.iterator_types[d] == "parallel" and root.extents[d] > 1 and d in reachable
        ]
        return tuple(dims[:MAX_DISTRIBUTED])

    def is_contraction(self) -> bool:
        root = self.ops[self.root]
        return bool(root.reduction_dims) and {"arith.mulf", "arith.addf"} <= set(root.body_ops)

    def has_reuse(self) -> bool:
        """Some input is invariant to a non-unit parallel loop (contractions, convolutions)."""
        root = self.ops[self.root]
        parallel = {d for d, t in enumerate(root.iterator_types) if t == "parallel" and root.extents[d] > 1}
        return any(
            parallel - set(_dims_of(amap.split("->", 1)[1])) for amap in root.indexing_maps[: root.num_inputs]
        )

    def pad_pays(self, lanes: int) -> bool:
        """Padding pays when a register-tiled loop has only poor divisors.

        The output's vector loop is not a whole number of vectors (109, 24 with
        16 lanes), or another parallel loop has no divisor in 2..8 (a prime
        109: its register tile is 1 or the whole loop).
        """
        root = self.ops[self.root]
        forced = unit_register_dims(root)
        outputs = output_dims(root)
        vector = outputs[-1] if outputs else None
        for d, (extent, iterator) in enumerate(zip(root.extents, root.iterator_types, strict=True)):
            if iterator != "parallel" or d in forced or extent <= 1:
                continue
            if d == vector and extent > lanes and extent % lanes:
                return True
            if d != vector and extent > AWKWARD_LOOP and not any(extent % k == 0 for k in range(2, AWKWARD_LOOP + 1)):
                return True
        return False

    def packed_operands(self) -> tuple[int, ...]:
        """Inputs of a contraction that the output's vector loop reads across (`B` of `A @ B^T`).

        Such an operand is read with a stride along the vector: each register
        tile gathers it element by element (TBS's `K[j, h, k]`, 35x slower
        than IREE's default). Packing lays it out with the vector loop
        innermost. Only plain (projected permutation) accesses are packed:
        windows and strides stay with the other sketches.
        """
        root = self.ops[self.root]
        outputs = output_dims(root)
        vector = outputs[-1] if outputs else None
        if vector is None or not self.is_contraction() or unit_register_dims(root):
            return ()
        return tuple(i for i, dims in operands_along(root, vector) if i < root.num_inputs and dims[-1] != [vector])

    def rfactor_pays(self, lanes: int) -> bool:
        """rfactor pays when the innermost loop is a long reduction with no reuse (rows, norms)."""
        root = self.ops[self.root]
        if not root.reduction_dims or root.iterator_types[-1] != "reduction":
            return False
        return root.extents[-1] >= 2 * lanes and not self.has_reuse()


def task_dag(task: Task) -> Dag | None:
    if not task.codegen_ops:
        return None
    return Dag(task.codegen_ops, codegen_root(task.codegen_ops))


# ---- sketches ------------------------------------------------------------------


def tiling_knobs(
    dag: Dag, levels: tuple[str, ...], padded: bool = False, rules: tuple[str, ...] = ()
) -> list[TileKnob]:
    """One tile knob per non-unit loop of the root, over the levels of its kind.

    With `padded`, register tiles of parallel loops (and of reduction loops of
    contractions, where a zero operand adds nothing) may be non-divisors.
    Loops `forced_unit_dims(rules, root)` have no register level.
    """
    root = dag.ops[dag.root]
    distributed = dag.distributed_dims()
    forced = forced_unit_dims(rules, root)
    knobs = []
    for d, (extent, iterator) in enumerate(zip(root.extents, root.iterator_types, strict=True)):
        if extent <= 1:
            continue
        kind = REDUCTION if iterator == "reduction" else SPATIAL
        dim_levels = tuple(
            lv for lv in levels
            if LEVEL_KIND[lv] == kind
            and lv != "vector_inner_parallel"
            and not (lv == "distribution" and d not in distributed)
            and not (lv.startswith("vector_") and d in forced)
        )
        pads = padded and dim_levels[-1:] != () and dim_levels[-1].startswith("vector_") and (
            kind == SPATIAL or dag.is_contraction())
        if dim_levels:
            knobs.append(TileKnob(name=f"d{d}", dim=d, extent=extent, levels=dim_levels, padded=pads))
    return knobs


def is_consumer_knob(name: str) -> bool:
    """`c{op}d{loop}`: a consumer's own register tile, not a loop of the root."""
    return re.fullmatch(r"c\d+d\d+", name) is not None


def consumer_knobs(dag: Dag) -> list[TileKnob]:
    """Register tiles of consumer loops that have no counterpart in the root."""
    knobs = []
    for c in dag.consumers:
        mapped = dim_map(dag.ops, dag.root, c)
        for d, extent in enumerate(dag.ops[c].extents):
            if d not in mapped and extent > 1 and dag.ops[c].iterator_types[d] == "parallel":
                knobs.append(TileKnob(f"c{c}d{d}", d, extent, ("vector_inner_parallel",)))
    return knobs


def choice_knobs(dag: Dag, rfactor: bool, fusion: bool = True) -> list[ChoiceKnob]:
    """`fusion=False`: consumers always run after the root (a packed root has no register tile to fuse into)."""
    knobs = []
    if dag.consumers and fusion:
        knobs.append(FUSION)
    if dag.ops[dag.root].reduction_dims and not rfactor:
        knobs.append(CACHE_WRITE)
    if dag.is_contraction():
        knobs.append(LOWERING)
    elif dag.ops[dag.root].reduction_dims:
        knobs.append(REDUCTION_LOWERING)
    return knobs


# ---- rendering -------------------------------------------------------------------


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


@dataclass(frozen=True)
class _Tiles:
    """Root tile sizes per level, resolved from a candidate (0 = not tiled at that level)."""

    per_level: dict[str, list[int]]
    register: list[int]


def resolve_tiles(sketch: Sketch, candidate: Candidate, dag: Dag) -> _Tiles:
    root = dag.ops[dag.root]
    values = dict(candidate.values)
    forced = forced_unit_dims(sketch.rules, root)
    current = list(root.extents)
    per_level: dict[str, list[int]] = {}
    for level in sketch.levels:
        sizes = [0] * len(root.extents)
        for knob in tile_knobs(sketch.knobs):
            if knob.name in values and level in knob.levels and not is_consumer_knob(knob.name):
                size = values[knob.name][knob.levels.index(level)]
                if size != current[knob.dim] or level == "distribution":
                    sizes[knob.dim] = size
                    current[knob.dim] = size
        if level.startswith("vector_") and LEVEL_KIND[level] == (
            REDUCTION if level == "vector_reduction" else SPATIAL
        ):
            for d in forced:
                kind = REDUCTION if root.iterator_types[d] == "reduction" else SPATIAL
                if LEVEL_KIND[level] == kind and current[d] > 1:
                    sizes[d] = 1
                    current[d] = 1
        per_level[level] = sizes
    return _Tiles(per_level, current)


def _mapped(sizes_by_root_dim: list[int], mapping: dict[int, int], rank: int, extra: dict[int, int]) -> list[int]:
    out = [0] * rank
    for mine, root_dim in mapping.items():
        out[mine] = sizes_by_root_dim[root_dim]
    for d, size in extra.items():
        out[d] = size
    return out


def render_strategy(sketch: Sketch, candidate: Candidate, task: Task, name: str) -> str:
    """The `transform.named_sequence @name` a candidate of a transform sketch stands for."""
    dag = task_dag(task)
    if dag is None:
        raise ValueError(f"task {task.key} has no codegen structure for a transform strategy")
    values = dict(candidate.values)
    choice = {k.name: k.option(values[k.name]) for k in sketch.knobs if isinstance(k, ChoiceKnob)}
    rfactor = "rfactor" in sketch.rules
    tiles = resolve_tiles(sketch, candidate, dag)
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
    inner = dag.consumers and choice.get("consumer_fusion") == "inner"
    parallel_levels = [lv for lv in sketch.levels if LEVEL_KIND[lv] == SPATIAL and lv != "distribution"
                       and lv != "vector_inner_parallel"]
    extras = {
        c: {k.dim: values[k.name][0] for k in tile_knobs(sketch.knobs) if k.name.startswith(f"c{c}d")}
        for c in dag.consumers
    }
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
    padded = PADDING in sketch.rules
    packed = PACKING in sketch.rules
    parallel_dims = [d for d, it in enumerate(root.iterator_types) if it == "parallel"]
    for level in root_levels:
        sizes = tiles.per_level[level]
        if rfactor and level == "vector_reduction":
            continue
        if packed and level.startswith("vector_"):
            if level == "vector_common_parallel":
                handles[dag.root] = _pack_root(s, handles[dag.root], dag, sketch, tiles)
            sizes = _packed_sizes(sizes, dag)
        if padded and level == "vector_reduction":
            handles[dag.root] = s.pad(handles[dag.root], root, task.root.element_type, "pad_par", parallel_dims)
        if any(sizes):
            handles[dag.root], _ = s.tile_for(handles[dag.root], sizes, f"r{level[:3]}_")
    if padded and root.reduction_dims:
        handles[dag.root] = s.pad(handles[dag.root], root, task.root.element_type, "pad_red", root.reduction_dims)
    decomposed = DECOMPOSE in sketch.rules
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
    if choice.get("cache_write", "hoist") == "hoist":
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
    lowering = choice.get("lowering", "outerproduct")
    s.patterns("%mfunc", [f"vector.lower_contraction lowering_strategy = \"{lowering}\""])
    s.patterns("%mfunc", ["vector.lower_outerproduct"])
    strategy = choice.get("reduction_lowering", "innerparallel")
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


def vector_loop(root: LinalgOpInfo) -> int:
    """The loop a root's register tile is vectorized along: its output's innermost dimension."""
    outputs = output_dims(root)
    assert outputs and outputs[-1] is not None
    return outputs[-1]


def tile_above_register(sketch: Sketch, tiles: _Tiles, root: LinalgOpInfo) -> list[int]:
    """The root's tile per loop above the register levels (cache, else workgroup tile, else whole loop)."""
    current = list(root.extents)
    for level in sketch.levels:
        if not level.startswith("vector_"):
            current = [size or extent for size, extent in zip(tiles.per_level[level], current, strict=True)]
    return current


def _pack_root(s: _Script, handle: str, dag: Dag, sketch: Sketch, tiles: _Tiles) -> str:
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
    extents = tile_above_register(sketch, tiles, root)
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


def register_tiles(sketch: Sketch, candidate: Candidate, task: Task) -> tuple[int, ...]:
    """The root's innermost tile per loop (what one vector op covers)."""
    dag = task_dag(task)
    assert dag is not None
    return tuple(resolve_tiles(sketch, candidate, dag).register)


def output_tiles(sketch: Sketch, candidate: Candidate, task: Task) -> list[tuple[int, ...]]:
    """The innermost tile of every vectorized op's output, in the output's dimension order.

    The root's register tile, and per consumer its loops mapped to the root's
    (or its own knob, or the whole extent); fills mirror the root's output.
    """
    dag = task_dag(task)
    assert dag is not None
    values = dict(candidate.values)
    reg = resolve_tiles(sketch, candidate, dag).register
    tiles = [tuple(reg[d] if d is not None else 1 for d in output_dims(dag.ops[dag.root]))]
    for c in dag.consumers:
        op = dag.ops[c]
        sizes = list(op.extents)
        for mine, theirs in dim_map(dag.ops, dag.root, c).items():
            sizes[mine] = reg[theirs]
        for knob in tile_knobs(sketch.knobs):
            if knob.name.startswith(f"c{c}d"):
                sizes[knob.dim] = values[knob.name][0]
        tiles.append(tuple(sizes[d] if d is not None else 1 for d in output_dims(op)))
    return tiles


def input_tiles(sketch: Sketch, candidate: Candidate, task: Task) -> list[tuple[int, ...]]:
    """The root's register tile of every input, in the input's dimension order.

    A compound access (`d1 * 2 + d4`) spans more than one element when any of
    its loops does (counted as 2: only unit or not matters); constants span 1.
    """
    dag = task_dag(task)
    assert dag is not None
    root = dag.ops[dag.root]
    reg = resolve_tiles(sketch, candidate, dag).register
    tiles = []
    for amap in root.indexing_maps[: root.num_inputs]:
        tile = []
        for expr in _map_results(amap):
            loops = _dims_of(expr)
            if re.fullmatch(r"d\d+", expr):
                tile.append(reg[loops[0]])
            else:
                tile.append(2 if any(reg[d] > 1 for d in loops) else 1)
        tiles.append(tuple(tile))
    return tiles


def _span(expr: str, sizes: list[int]) -> int:
    """Elements an access `d1 * 2 + d4` (or `d3`, or a constant) covers over loop tiles `sizes`."""
    span = 1
    for term in expr.split("+"):
        loops = _dims_of(term)
        if loops:
            coefficient = prod(int(c) for c in re.findall(r"(?<![d\w])(\d+)", term))
            span += coefficient * (sizes[loops[0]] - 1)
    return span


def padded_panel_bytes(sketch: Sketch, candidate: Candidate, task: Task) -> int:
    """Bytes of the root's operand tiles padded outside its reduction loop (stack buffers).

    A padded root is padded along its parallel loops before its reduction
    loops are tiled, so every input tile spans whole reduction loops there.
    """
    dag = task_dag(task)
    assert dag is not None
    root = dag.ops[dag.root]
    reg = resolve_tiles(sketch, candidate, dag).register
    sizes = [reg[d] if it == "parallel" else root.extents[d] for d, it in enumerate(root.iterator_types)]
    total = 0
    for amap in root.indexing_maps:
        total += prod(_span(expr, sizes) for expr in _map_results(amap))
    return total * task.root.element_bytes


def packed_panel_bytes(sketch: Sketch, candidate: Candidate, task: Task) -> int:
    """Bytes of the packed input panels (stack buffers): each input indexed by the vector loop, over the
    root's tile above the register levels."""
    dag = task_dag(task)
    assert dag is not None
    root = dag.ops[dag.root]
    extents = tile_above_register(sketch, resolve_tiles(sketch, candidate, dag), root)
    inputs = [dims for i, dims in operands_along(root, vector_loop(root)) if i < root.num_inputs]
    return sum(prod(extents[d[0]] for d in dims) for dims in inputs) * task.root.element_bytes


def workgroup_output_elements(sketch: Sketch, candidate: Candidate, task: Task) -> int:
    """Elements of the root's output tile per workgroup (a stack buffer when consumers run after the root)."""
    dag = task_dag(task)
    assert dag is not None
    root = dag.ops[dag.root]
    dist = resolve_tiles(sketch, candidate, dag).per_level.get("distribution", [0] * len(root.extents))
    return prod((dist[d] or root.extents[d]) if d is not None else 1 for d in output_dims(root))


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


def register_bytes(sketch: Sketch, candidate: Candidate, task: Task) -> tuple[int, int]:
    """(accumulator bytes, operand tile bytes) of the root's register tile."""
    dag = task_dag(task)
    assert dag is not None
    root = dag.ops[dag.root]
    reg = register_tiles(sketch, candidate, task)
    parallel = prod(reg[d] for d in range(len(reg)) if root.iterator_types[d] == "parallel")
    total = prod(reg)
    return parallel * 4, total * 4


def strategy_name(task: Task, candidate: Candidate) -> str:
    return f"ansor_strategy_{task.key}_s{candidate.sketch_index}"

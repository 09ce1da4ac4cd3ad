"""The roles of a dispatch's linalg ops, read from loop structure only.

IREE's codegen sees a dispatch as a small DAG of linalg ops (`Task.codegen_ops`):
producers, one root (the op with reductions), consumers (epilogues). Rules,
resolution, features and the strategy emitter all read it through these helpers.
"""

from __future__ import annotations

from dataclasses import dataclass

from ansor_mlir.core.affine import AffineExpr, AffineMap
from ansor_mlir.core.task import LinalgOpInfo, Task

MAX_DISTRIBUTED = 3
# Largest loop whose divisors are all useless as a register tile is still tiled
# well without padding: a loop over 8 with no divisor in 2..8 is prime-like.
AWKWARD_LOOP = 8


def codegen_root(ops: tuple[LinalgOpInfo, ...]) -> int:
    """IREE's root: the last op with reductions, else the last non-fill op."""
    compute = [i for i, op in enumerate(ops) if not op.is_fill]
    with_reduction = [i for i in compute if ops[i].reduction_dims]
    return (with_reduction or compute)[-1]


def output_dims(op: LinalgOpInfo) -> list[int | None]:
    """Per result dimension of the op's (first) output, the loop it indexes."""
    return list(op.indexing_maps[op.num_inputs].result_dims())


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
        for mine, theirs in zip(op.indexing_maps[operand].result_dims(), output_dims(ops[producer]), strict=False):
            if theirs is not None and mine is not None and theirs in inner:
                result[mine] = inner[theirs]
        if result:
            return result
    return {}


def unit_register_dims(op: LinalgOpInfo) -> set[int]:
    """Loops whose register tile must be 1 so that the tile vectorizes.

    A loop inside a compound access (`d1 * 2 + d4`: convolution windows,
    strides, dilations) is not a projected permutation; folding unit loops
    away turns the tile into a contraction. One parallel loop with
    coefficient 1 may stay when it leads the access (stride-1 windows
    `d1 + d4`), every other loop is unit.
    """
    forced: set[int] = set()
    for amap in op.indexing_maps[: op.num_inputs]:
        for expr in amap.results:
            if not _is_compound(expr):
                continue
            free = [d for d, c in expr.terms if c == 1 and op.iterator_types[d] == "parallel"] if expr.linear else []
            keep = free[0] if len(free) == 1 and expr.terms[0][1] == 1 else None
            forced |= {d for d in expr.dims() if d != keep}
    return forced


def window_maps(op: LinalgOpInfo) -> list[AffineMap]:
    """The maps of inputs read through a compound access (`oh + kh`, `2 * ow + kw`): convolution or pooling
    windows."""
    return [amap for amap in op.indexing_maps[: op.num_inputs] if any(_is_compound(e) for e in amap.results)]


def has_window(op: LinalgOpInfo) -> bool:
    return bool(window_maps(op))


def read_through_window(op: LinalgOpInfo, loop: int) -> bool:
    """Whether some input is indexed by `loop` inside a compound access (`ow + kw`: a stride-1 convolution's
    output pixels)."""
    return any(_is_compound(expr) and loop in expr.dims()
               for amap in op.indexing_maps[: op.num_inputs] for expr in amap.results)


def _is_compound(expr: AffineExpr) -> bool:
    """More than one loop, or one loop with a coefficient other than 1 (`d0 * 2`, `-d0`), or non-linear."""
    return not expr.linear or len(expr.terms) > 1 or any(c != 1 for _, c in expr.terms)


def operands_along(op: LinalgOpInfo, loop: int) -> list[tuple[int, list[list[int]]]]:
    """(operand index, loops of each of its dims) of every operand (inputs, then output) indexed by `loop`."""
    found = []
    for i, amap in enumerate(op.indexing_maps):
        dims = [list(expr.dims()) for expr in amap.results]
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
    maps = _convolution_maps(op, filter_rank=4)
    if maps is None:
        return None
    inp, flt, out = maps
    n, oh, ow, co = (e.position for e in out)
    kh, kw, ci, co_f = (e.position for e in flt)
    if co_f != co or inp[0].position != n or inp[3].position != ci:
        return None
    if set(inp[1].dims()) != {oh, kh} or set(inp[2].dims()) != {ow, kw}:
        return None
    kinds = ["parallel"] * 4 + ["reduction"] * 3
    if [op.iterator_types[d] for d in (n, oh, ow, co, kh, kw, ci)] != kinds:
        return None
    return n, oh, ow, co, kh, kw, ci


def _convolution_maps(op: LinalgOpInfo, filter_rank: int) -> tuple[tuple[AffineExpr, ...], ...] | None:
    """The (input, filter, output) map results of a multiply-accumulate over a 4-D input and output and a filter
    of `filter_rank`, filter and output indexed by plain loops; else None."""
    if op.num_inputs != 2 or len(op.indexing_maps) != 3 or not {"arith.mulf", "arith.addf"} <= set(op.body_ops):
        return None
    inp, flt, out = (m.results for m in op.indexing_maps)
    if not (len(inp) == len(out) == 4 and len(flt) == filter_rank) or not all(e.is_dim() for e in flt + out):
        return None
    return inp, flt, out


def depthwise_conv_2d_loops(op: LinalgOpInfo) -> tuple[int, int, int, int, int, int] | None:
    """Loops `(n, oh, ow, c, kh, kw)` of an NHWC x HWC depthwise convolution (strided, dilated), else None.

    `transform.structured.specialize` turns it into `linalg.depthwise_conv_2d_nhwc_hwc`, which
    `transform.structured.decompose` splits into 1-D depthwise convolutions once `oh` and `kh` are unit.
    """
    maps = _convolution_maps(op, filter_rank=3)
    if maps is None:
        return None
    inp, flt, out = maps
    n, oh, ow, c = (e.position for e in out)
    kh, kw, c_f = (e.position for e in flt)
    if c_f != c or not (inp[0].is_dim() and inp[0].position == n and inp[3].is_dim() and inp[3].position == c):
        return None
    if set(inp[1].dims()) != {oh, kh} or set(inp[2].dims()) != {ow, kw}:
        return None
    if [op.iterator_types[d] for d in (n, oh, ow, c, kh, kw)] != ["parallel"] * 4 + ["reduction"] * 2:
        return None
    return n, oh, ow, c, kh, kw


def decomposable_rows(op: LinalgOpInfo) -> tuple[int, int] | None:
    """Loops `(oh, kh)` of a 2-D convolution that MLIR decomposes into 1-D ones (NHWC x HWCF, or depthwise
    NHWC x HWC) once both are unit, else None."""
    full, depthwise = conv_2d_loops(op), depthwise_conv_2d_loops(op)
    if full is not None:
        return full[1], full[4]
    return (depthwise[1], depthwise[4]) if depthwise is not None else None


def forced_unit_dims(op: LinalgOpInfo, decomposed: bool) -> set[int]:
    """Loops a sketch's register tile keeps unit: `unit_register_dims`, or only `oh` and `kh` when the
    convolution is decomposed into 1-D convolutions (which vectorize strided windows themselves)."""
    rows = decomposable_rows(op) if decomposed else None
    return unit_register_dims(op) if rows is None else set(rows)


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
        return any(parallel - amap.dims() for amap in root.indexing_maps[: root.num_inputs])

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

    def unpacked_rows(self) -> frozenset[int]:
        """The root's parallel loops that no packed operand reads: its packed panels are the same across them."""
        root = self.ops[self.root]
        packed = [root.indexing_maps[i].dims() for i in self.packed_operands()]
        return frozenset(d for d, it in enumerate(root.iterator_types)
                         if it == "parallel" and not any(d in dims for dims in packed))

    def rfactor_pays(self, lanes: int) -> bool:
        """rfactor pays when the innermost loop is a long reduction with no reuse (rows, norms). A root with
        several outputs (a reduction that also writes an elementwise value, `frontend.shared_subexpressions`)
        has no partial-reduction form: `tile_reduction_using_for` rejects it, so no sketch is offered."""
        root = self.ops[self.root]
        if not root.reduction_dims or root.iterator_types[-1] != "reduction":
            return False
        if len(root.indexing_maps) - root.num_inputs > 1:
            return False
        return root.extents[-1] >= 2 * lanes and not self.has_reuse()


def task_dag(task: Task) -> Dag | None:
    if not task.codegen_ops:
        return None
    return Dag(task.codegen_ops, codegen_root(task.codegen_ops))



def vector_loop(root: LinalgOpInfo) -> int:
    """The loop a root's register tile is vectorized along: its output's innermost dimension."""
    outputs = output_dims(root)
    assert outputs and outputs[-1] is not None
    return outputs[-1]

